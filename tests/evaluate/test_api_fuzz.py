"""schemathesis against the live server's OpenAPI spec with every check it has (the CLI's
``--checks all``): no 5xx, every answer as documented, every schema-valid request accepted
(or refused with a status the schema allows: 401, 403, 409, 429) and every invalid one rejected."""

from __future__ import annotations

import pytest
import schemathesis
from evalsvc_testkit import TOKEN, ServerThread, write_config
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks

from benchlab.evaluate.config import load_config
from benchlab.evaluate.server import create_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    # An allowlist no generated URL will match, so no fuzzed request reaches out anywhere.
    config = load_config(write_config(tmp, server={"allowed_router_hosts": ["router.invalid"]}))
    server = ServerThread(create_app(config, token=TOKEN)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api_schema(live_server):
    # The description needs the token, like every route but /health.
    return schemathesis.openapi.from_url(f"{live_server.url}/openapi.json",
                                         headers={"Authorization": f"Bearer {TOKEN}"})


schema = schemathesis.pytest.from_fixture("api_schema")


load_all_checks()
ALL_CHECKS = list(CHECKS.get_all())


def test_every_check_of_schemathesis_is_run():
    names = {check.__name__ for check in ALL_CHECKS}
    assert {"positive_data_acceptance", "negative_data_rejection", "response_schema_conformance"} <= names


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_makes_the_server_fail(case, live_server):
    response = case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=ALL_CHECKS,
        timeout=10,
    )
    if response.status_code >= 400:
        assert set(response.json()) >= {"error"}
    anonymous = case.call(base_url=live_server.url, headers={}, timeout=10)
    assert anonymous.status_code < 500, (case.method, case.path, case.body, anonymous.text)
