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
    assert n_png == 5
    assert result == {"images": n_png, "loaded": n_png, "errors": []}


def test_screenshot_of_the_page_renders(page: Path, tmp_path: Path):
    shot = tmp_path / "report.png"
    done = _browser(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    assert png_size(shot) == (1280, 2000)
