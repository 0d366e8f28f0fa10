"""schemathesis against the live server's OpenAPI spec: whatever it sends, no 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from evalsvc_testkit import TOKEN, ServerThread, write_config
from hypothesis import HealthCheck, settings

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
    return schemathesis.openapi.from_url(f"{live_server.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_makes_the_server_fail(case, live_server):
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, {}):
        response = case.call(base_url=live_server.url, headers=headers, timeout=10)
        assert response.status_code < 500, (case.method, case.path, case.body, response.text)
        if response.status_code >= 400:
            assert set(response.json()) >= {"error"}
