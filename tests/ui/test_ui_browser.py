"""The dashboard in headless Chromium (Debian's `chromium`, driven by Playwright) while a real
sweep runs: runs move from queued to done, a curve grows, seeds toggle, a log is followed, and
no page logs an error or has a request fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_testkit import SLOW_SCRIPT, SLOW_SPEC, stop, ui_server, wait_for

pytestmark = pytest.mark.slow
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the test extra)")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=900, check=False)
        found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed and could not be installed (apt-get install chromium)")
    return found


STATES_JS = "els => Object.fromEntries(els.map(e => [e.dataset.run, e.dataset.state]))"
TRACES_JS = "document.getElementById('plot').data"


class Problems:
    """Every console error, page error, failed request and error response of the pages."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, page: Any) -> None:
        page.on("console", lambda m: self.seen.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.seen.append(f"page error: {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", lambda r: self.seen.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

    def _failed(self, request: Any) -> None:
        # A live page nearly always has a poll in flight; leaving the page (the next test's
        # navigation, the context closing) cancels it, which Chromium reports as ERR_ABORTED.
        # Every other failure counts, and so does every response with an error status.
        if request.failure != "net::ERR_ABORTED":
            self.seen.append(f"failed request: {request.url} {request.failure}")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sweep running one run at a time: 2 configs x 4 seeds of about 8 s, `bad` seed 2 fails."""
    root = tmp_path_factory.mktemp("live")
    (root / "run.py").write_text(SLOW_SCRIPT)
    (root / "bench.yaml").write_text(SLOW_SPEC.format(seeds=4, steps=16, pause=0.5).replace("{fail: 3}", "{fail: 2}"))
    results = root / "out" / "slowbench"
    proc = subprocess.Popen([sys.executable, "-m", "benchlab", "run", "bench.yaml", "-j", "1", "--results",
                             str(results)], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (results / "benchlab.db").exists(), timeout=60)
        yield results
    finally:
        stop(proc, timeout=30)


@pytest.fixture(scope="module")
def server(sweep: Path) -> Iterator[str]:
    with ui_server(sweep) as (port, _):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def problems() -> Problems:
    return Problems()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        # Offline: every host name but the server's address resolves to nothing.
        offline = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
        b = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu", offline])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, problems: Problems) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    problems.watch(p)
    yield p
    context.close()


def _states(page: Any) -> dict[str, str]:
    return page.eval_on_selector_all("a.seed", STATES_JS)


def _mark(page: Any) -> None:
    page.evaluate("window.__notReloaded = true")


def _not_reloaded(page: Any) -> bool:
    return bool(page.evaluate("window.__notReloaded === true"))


def test_runs_move_from_queued_to_done_without_a_reload(server: str, page: Any):
    page.goto(f"{server}/b/slowbench")
    first = wait_for(lambda: _states(page) if any(s == "pending" for s in _states(page).values()) else None,
                     timeout=30)
    _mark(page)
    queued = {rid for rid, s in first.items() if s == "pending"}
    moved = wait_for(lambda: {rid for rid in queued if _states(page).get(rid) == "completed"}, timeout=90)
    assert moved and _not_reloaded(page)
    # The report's tables arrive with the first completed run.
    page.wait_for_selector('#numbers table.results[data-task="walk"]', timeout=30_000)
    # The counts above the grid moved with it.
    assert page.locator('[data-count="completed"]').count() == 1


def test_a_running_runs_log_is_followed(server: str, page: Any):
    def lines() -> int:
        return len([ln for ln in (page.locator("#log").text_content() or "").splitlines() if ln.startswith("step")])

    # A run seen running on the grid may have printed its last step by the time its page has
    # loaded (each run prints 16 steps, then sleeps 0.5 s before it ends): such a run has nothing
    # left to follow, so the test takes the next running run, until one is caught mid-log.
    deadline = time.monotonic() + 120
    while True:
        page.goto(f"{server}/b/slowbench")
        rid = wait_for(lambda: next((r for r, s in _states(page).items() if s == "running"), None), timeout=60)
        page.goto(f"{server}/b/slowbench/runs/{rid}")
        _mark(page)
        first = lines()
        if first < 16 or time.monotonic() > deadline:
            break
        wait_for(lambda: page.locator("#run-state").text_content() != "running", timeout=30)
    assert first < 16, "no run was caught before its last step within two minutes"
    wait_for(lambda: lines() > first, timeout=30)
    assert lines() > first and _not_reloaded(page)


def test_a_curve_gains_points_as_a_run_logs(server: str, page: Any):
    page.goto(f"{server}/b/slowbench/curves?task=walk&metric=reward&seeds=1")
    plot = page.locator("#plot")
    first = wait_for(lambda: int(plot.get_attribute("data-points") or 0), timeout=60)
    _mark(page)
    wait_for(lambda: int(plot.get_attribute("data-points") or 0) > first, timeout=30)
    assert _not_reloaded(page)


def test_seed_lines_switch_on_and_off_and_a_config_hides_from_the_legend(server: str, page: Any):
    page.goto(f"{server}/b/slowbench/curves?task=walk&metric=reward")
    plot = page.locator("#plot")
    wait_for(lambda: plot.get_attribute("data-points"), timeout=60)
    # Completed seeds are drawn only when asked for: wait for a config with a mean over completed seeds.
    wait_for(lambda: page.evaluate(TRACES_JS + ".some(t => / \\(n=\\d+\\)$/.test(t.name))"), timeout=90)

    def seed_traces_shown() -> int:
        return page.evaluate(TRACES_JS + ".filter(t => / seed \\d+$/.test(t.name) && t.visible === true).length")

    off = seed_traces_shown()
    page.check("#seeds")
    wait_for(lambda: seed_traces_shown() > off, timeout=10)
    assert "seeds=1" in page.url  # the choice is in the address, for a bookmark
    page.uncheck("#seeds")
    wait_for(lambda: seed_traces_shown() == off, timeout=10)
    # A click on a config's legend entry hides it, another shows it again.
    page.locator(".legend .traces", has_text="base").locator(".legendtoggle").first.click()
    wait_for(lambda: plot.get_attribute("data-hidden") == "base", timeout=10)
    assert page.evaluate(TRACES_JS + ".filter(t => t.legendgroup === 'base' && t.visible === true).length") == 0
    page.locator(".legend .traces", has_text="base").locator(".legendtoggle").first.click()
    wait_for(lambda: plot.get_attribute("data-hidden") == "", timeout=10)


def test_the_x_axis_switches_to_wall_time(server: str, page: Any):
    page.goto(f"{server}/b/slowbench/curves?task=walk&metric=reward")
    wait_for(lambda: page.locator("#plot").get_attribute("data-points"), timeout=60)
    page.select_option("#xaxis", "time")
    wait_for(lambda: "wall time" in (page.locator(".xtitle").text_content() or ""), timeout=10)
    assert "x=time" in page.url


def test_the_benchmark_list_shows_progress(server: str, page: Any):
    page.goto(server)
    row = page.locator('tr[data-benchmark="slowbench"]')
    assert row.count() == 1
    assert "/8" in (row.text_content() or "")


def test_no_page_logged_an_error_or_failed_a_request(server: str, page: Any, problems: Problems):
    # Every page once more, waited on until its scripts have polled at least twice.
    for path, loaded in (("/", "tr[data-benchmark]"), ("/b/slowbench", "#numbers[data-version]"),
                         ("/b/slowbench/curves?seeds=1", "#plot[data-points]")):
        page.goto(server + path)
        page.wait_for_selector(loaded, state="attached", timeout=60_000)
        time.sleep(2.5)
    assert problems.seen == []


def test_the_seed_legend_squares_have_their_states_colours(server: str, page: Any):
    page.goto(f"{server}/b/slowbench")
    colours = page.evaluate(
        "Array.from(document.querySelectorAll('.legend .seed')).map(e => getComputedStyle(e).color)")
    # The grid's squares' colours (ui.css: --completed, --running, --pending, --failed, --interrupted).
    assert colours == ["rgb(22, 163, 74)", "rgb(37, 99, 235)", "rgb(203, 213, 225)", "rgb(220, 38, 38)",
                       "rgb(245, 158, 11)"]
