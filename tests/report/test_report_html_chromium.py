"""report.html opens offline in a real browser (headless Chromium): every plot loads, no error."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_world import build_store_world, png_size

from benchlab.report import write_report

pytestmark = pytest.mark.slow

# Injected into a copy of the page: records script errors and failed loads (capture phase, so
# image errors, which do not bubble, are seen too), then on load writes what it found into the DOM.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  var what = e.target && e.target.tagName ? e.target.tagName + ' ' + e.target.src : e.type;
  window.__errors.push(String(e.message || what));
}, true);
var consoleError = console.error;
console.error = function () {
  window.__errors.push(Array.prototype.join.call(arguments, ' '));
  consoleError.apply(console, arguments);
};
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = {images: imgs.length, errors: window.__errors,
             loaded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length};
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=900, check=False
        )
        found = shutil.which("chromium")
    if found is None:
        pytest.skip(
            "chromium is not installed and could not be installed (apt-get install chromium)"
        )
    return found


def _browser(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp / 'profile'}",
            # Offline: any host name resolves to nothing, so an external resource would fail.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("html")
    values = {
        (t, c): [base + 0.01 * s + (0.05 if c == "new" else 0.0) for s in range(3)]
        for t, base in (("walk", 0.4), ("run", 0.6), ("jump", 0.2))
        for c in ("old", "new")
    }
    folder = build_store_world(
        tmp / "res",
        values,
        targets={"walk": 0.5, "run": 0.6, "jump": None},
        baseline="old",
        curves=True,
    )
    files = write_report(folder, tmp / "rep")
    return files.folder / "report.html"


def test_every_plot_loads_and_no_error_in_headless_chromium(page: Path, tmp_path: Path):
    probe = page.parent / "probe.html"
    probe.write_text(page.read_text().replace("<head>", "<head>\n" + PROBE, 1))
    done = _browser(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout)
    assert found, f"no probe output; chromium said:\n{done.stderr[-2000:]}"
    result = json.loads(found.group(1))
    n_png = len(list((page.parent / "plots").glob("*.png")))
    assert n_png == 4  # no radar: it needs three configs
    assert result == {"images": n_png, "loaded": n_png, "errors": []}


def test_screenshot_of_the_page_renders(page: Path, tmp_path: Path):
    shot = tmp_path / "report.png"
    done = _browser(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    assert png_size(shot) == (1280, 2000)


# Measures, once the page has loaded, where the comparisons table's verdict column sits.
VERDICT_PROBE = """<script>
window.addEventListener('load', function () {
  var ths = Array.prototype.slice.call(document.querySelectorAll('th'));
  var th = ths.filter(function (t) {
    var s = t.textContent.trim(); return s === 'verdict' || s === 'significant'; })[0];
  var table = th.closest('table');
  var r = th.getBoundingClientRect(), t = table.getBoundingClientRect();
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({left: r.left, right: r.right,
    visible: Math.min(window.innerWidth, t.left + table.clientWidth), width: window.innerWidth,
    page: document.documentElement.scrollWidth});
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def wide_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Long task and config names and a candidate that lost seeds: a wide comparisons table."""
    from benchlab.ledger import Store

    tmp = tmp_path_factory.mktemp("wide")
    configs = ("sac_reference_implementation", "sac_with_layer_norm_and_dropout_0.1",
               "sac_with_layer_norm_and_spectral_norm")
    values = {(t, c): [base + 0.01 * s + 0.05 * j for s in range(6)]
              for t, base in (("HalfCheetah-v4-long-horizon", 0.4), ("Walker2d-v4-long-horizon", 0.6))
              for j, c in enumerate(configs)}
    folder = build_store_world(tmp / "res", values, baseline=configs[0])
    with Store.open(folder) as store:
        for run in store.runs():
            if run.config == configs[2] and run.seed % 2:
                attempt, _ = store.start_attempt(run.run_id, host="h")
                store.finish_attempt(attempt, run.run_id, status="failed", run_status="failed",
                                     exit_code=1, failure_class="exit-code", error="exited 1")
    return write_report(folder, tmp / "rep", plots=False).folder / "report.html"


def test_verdict_column_is_on_screen_at_1280_px(wide_page: Path, tmp_path: Path):
    probe = wide_page.parent / "verdict.html"
    probe.write_text(wide_page.read_text().replace("<head>", "<head>\n" + VERDICT_PROBE, 1))
    done = _browser(tmp_path, "--window-size=1280,900", "--virtual-time-budget=5000",
                    "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout)
    assert found, f"no probe output; chromium said:\n{done.stderr[-2000:]}"
    box = json.loads(found.group(1))
    assert box["width"] == 1280
    # The whole verdict cell is inside what the table shows, without scrolling it sideways.
    assert 0 <= box["left"] and box["right"] <= box["visible"], box
    assert box["page"] <= box["width"], box  # and the page itself does not scroll sideways
