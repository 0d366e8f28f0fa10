"""`benchlab ui` answers only requests for the host names it is served on (a DNS-rebinding page
gets 400), and tells apart folders whose benchmarks share a name."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from ui_testkit import SLOW_SCRIPT, SLOW_SPEC, get, ui_server

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hosts")
    (root / "run.py").write_text(SLOW_SCRIPT)
    (root / "bench.yaml").write_text(SLOW_SPEC.format(seeds=2, steps=2, pause=0))
    run_cli("run", "bench.yaml", "--no-report", "--results", "out/slowbench", cwd=root, timeout=300)
    return root / "out" / "slowbench"


def test_requests_for_another_host_name_are_refused(finished: Path):
    with ui_server(finished, extra=("--allow-host", "bench.example.org")) as (port, _):
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "bench.example.org"):
            status, _, _ = get(port, "/", headers={"Host": host})
            assert status == 200, host
        # A page of attacker.example whose name was rebound to 127.0.0.1 sends its own name.
        for host in (f"attacker.example:{port}", "127.0.0.1.attacker.example", "localhost.evil"):
            status, _, body = get(port, "/", headers={"Host": host})
            assert status == 400 and b"Invalid host header" in body, host
        run = re.search(rb'href="(/b/[^"]+/runs/[0-9a-f]+)"', get(port, "/b/slowbench")[2])
        assert run is not None
        status, _, _ = get(port, run.group(1).decode() + "/log", headers={"Host": f"attacker.example:{port}"})
        assert status == 400


def test_served_hosts_of_loopback_wildcard_and_named_addresses():
    from benchlab.ui.hosts import served_hosts

    assert served_hosts("127.0.0.1") == ["127.0.0.1", "::1", "[::1]", "localhost"]
    assert "10.0.0.5" in served_hosts("10.0.0.5") and "attacker.example" not in served_hosts("10.0.0.5")
    import socket

    assert socket.gethostname().lower() in served_hosts("0.0.0.0")
    assert "proxy.example" in served_hosts("127.0.0.1", ["Proxy.example"])


def test_folders_of_benchmarks_with_the_same_name_are_told_apart_on_the_index(finished: Path, tmp_path: Path):
    for name in ("one", "two"):
        shutil.copytree(finished, tmp_path / name)
    with ui_server(tmp_path) as (port, _):
        status, _, body = get(port, "/")
    assert status == 200
    text = body.decode()
    for name in ("one", "two"):
        assert re.search(rf'href="/b/{name}">slowbench</a> <span class="sub where">[^<]*{name}</span>', text), text
