"""`benchlab export` to a local folder, memory:// and a real S3 API server on 127.0.0.1 (moto's
server mode): idempotent by hash, links rewritten, every export logged. Hugging Face cannot be
reached from here: only its URL handling is tested."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import textwrap
from pathlib import Path

import pytest

from benchlab.errors import DataError
from benchlab.history.export import export, public_url, rewrite_links, safe_url
from benchlab.report.leaderboard import task_settings
from benchlab_testing import linked_run, run_cli, unlink_score

SPEC = """
name: pub
variables: {max_frame: 10000000, num_envs: 16}
tasks: [{name: t1, params: {base: 0.5}}]
configs: [{name: a, params: {extra: 1}}, {name: b, params: {extra: 2, base: 0.6}}]
seeds: 3
command: python run.py base={base} extra={extra} frames={max_frame} envs={num_envs}
metrics: {primary: score}
baseline: a
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    from benchlab_testing import SCRIPT

    root = tmp_path_factory.mktemp("pub")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    folder = root / "results" / "pub"
    run_cli("report", str(folder), "--no-html", cwd=root, check=True)
    return folder


def _copy(results: Path, tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(results, out)
    return out


def test_second_export_to_a_folder_uploads_nothing_and_both_are_logged(results, tmp_path):
    folder = _copy(results, tmp_path)
    target = tmp_path / "public"
    first = run_cli("export", str(folder), str(target), "--json", check=True)
    one = json.loads(first.stdout)
    runs = sorted(p.relative_to(folder).as_posix() for p in (folder / "runs").rglob("*") if p.is_file())
    assert one["uploaded"] == one["files"] > len(runs)
    for rel in runs + ["BENCHMARK_REPORT.md", "results.csv"]:
        assert (target / rel).read_bytes() == (folder / rel).read_bytes(), rel  # local: links stay relative
    # A run folder's link leads to the page listing its files, written into each run folder.
    board = (target / "BENCHMARKS.md").read_text()
    assert board == (folder / "BENCHMARKS.md").read_text().replace("/)", "/index.html)")
    stamps = {p: p.stat().st_mtime_ns for p in target.rglob("*") if p.is_file()}
    second = json.loads(run_cli("export", str(folder), str(target), "--json", check=True).stdout)
    assert second["uploaded"] == 0 and second["uploaded_bytes"] == 0 and second["files"] == one["files"]
    assert {p: p.stat().st_mtime_ns for p in target.rglob("*") if p.is_file()} == stamps  # nothing written
    log = json.loads((folder / "exports.json").read_text())
    assert [e["uploaded"] for e in log] == [one["files"], 0]
    md = (folder / "EXPORTS.md").read_text().splitlines()
    assert md[2] == "| when | what | where | files | uploaded | bytes uploaded |"
    assert md[-1].endswith(f"| all | {target} | {one['files']} | 0 | 0 |")
    # A changed file and a file the target lost are uploaded again; nothing else.
    (folder / "results.csv").write_text((folder / "results.csv").read_text() + "\n")
    (target / runs[0]).unlink()
    third = json.loads(run_cli("export", str(folder), str(target), "--json", check=True).stdout)
    assert sorted(third["uploaded_files"]) == sorted(["results.csv", runs[0]])


def test_report_only_export_and_dry_run(results, tmp_path):
    folder = _copy(results, tmp_path)
    target = tmp_path / "public"
    dry = run_cli("export", str(folder), str(target), "--what", "report", "--dry-run", check=True)
    assert "would upload BENCHMARK_REPORT.md" in dry.stdout and not target.exists()
    assert not (folder / "exports.json").exists()  # a dry run is no export
    report_only = run_cli("export", str(folder), str(target), "--what", "report", check=True)
    assert (target / "BENCHMARKS.md").exists() and not (target / "runs").exists()
    assert any((target / "plots").iterdir())
    # The report's score links point at run folders this export did not publish: said, with the way out.
    linked = set(re.findall(r"\]\(runs/([0-9a-f]+)/\)", (folder / "BENCHMARKS.md").read_text()))
    assert linked and all((folder / "runs" / r).is_dir() for r in linked)
    assert (f"warning: the report links to {len(linked)} run folders that {target} does not hold"
            in " ".join(report_only.stderr.split()))
    assert "--what runs` publishes them" in " ".join(report_only.stderr.split())
    run_cli("export", str(folder), str(target), "--what", "runs", check=True)
    again = run_cli("export", str(folder), str(target), "--what", "report", "--json", check=True)
    assert json.loads(again.stdout)["unpublished_runs"] == [] and "warning" not in again.stderr
    bad = run_cli("export", str(folder), str(target), "--what", "everything")
    assert bad.returncode == 2 and "--what must be one of report, runs, all; got 'everything'" in bad.stderr


def test_memory_target_in_process(results, tmp_path):
    import fsspec

    folder = _copy(results, tmp_path)
    first = export(folder, "memory://bench/v1", what="report")
    again = export(folder, "memory://bench/v1", what="report")
    assert len(first.uploaded) == len(first.files) > 3 and again.uploaded == []
    fs = fsspec.filesystem("memory")
    assert fs.cat_file("/bench/v1/results.csv") == (folder / "results.csv").read_bytes()


@pytest.fixture
def s3_server():
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.mark.slow
def test_s3_export_through_a_real_s3_api_rewrites_links_and_second_run_uploads_nothing(results, tmp_path, s3_server):
    import s3fs

    folder = _copy(results, tmp_path)
    # Credentials and endpoint come from the environment, as s3fs/fsspec read them; benchlab sees none.
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "FSSPEC_S3_ENDPOINT_URL": s3_server}
    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=s3_server)
    fs.mkdir("my-bucket")
    first = json.loads(run_cli("export", str(folder), "s3://my-bucket/bench/starter", "--json", env=env,
                               check=True).stdout)
    assert first["uploaded"] == first["files"] > 10
    assert first["public_url"] == "https://my-bucket.s3.amazonaws.com/bench/starter/"
    fs.invalidate_cache()
    etags = {p: fs.info(p)["ETag"] for p in fs.find("my-bucket/bench/starter")}
    second = json.loads(run_cli("export", str(folder), "s3://my-bucket/bench/starter", "--json", env=env,
                                check=True).stdout)
    assert second["uploaded"] == 0 and second["uploaded_files"] == []
    fs.invalidate_cache()
    assert {p: fs.info(p)["ETag"] for p in fs.find("my-bucket/bench/starter")} == etags
    report = fs.cat_file("my-bucket/bench/starter/BENCHMARK_REPORT.md").decode()
    local = (folder / "BENCHMARK_REPORT.md").read_text()
    plot = next(line for line in local.splitlines() if line.startswith("![")).split("](")[1].rstrip(")")
    assert f"](https://my-bucket.s3.amazonaws.com/bench/starter/{plot})" in report
    assert f"]({plot})" not in report
    # BENCHMARKS.md's score and run links too, each to the uploaded run folder.
    board = fs.cat_file("my-bucket/bench/starter/BENCHMARKS.md").decode()
    links = _links(board)
    assert links and len(links) == len(_links((folder / "BENCHMARKS.md").read_text()))
    for link in links:
        assert link.startswith("https://my-bucket.s3.amazonaws.com/bench/starter/runs/"), link
        key = "my-bucket/bench/starter/" + link.removeprefix("https://my-bucket.s3.amazonaws.com/bench/starter/")
        assert link.endswith("/index.html") and fs.exists(key), key  # S3 serves files, not folders
        assert fs.exists(key.removesuffix("index.html") + "config.yaml"), key
    # What was uploaded is what the manifest says, byte for byte.
    manifest = json.loads(fs.cat_file("my-bucket/bench/starter/.benchlab-export.json"))
    body = fs.cat_file("my-bucket/bench/starter/results.csv")
    assert manifest["files"]["results.csv"]["sha256"] == hashlib.sha256(body).hexdigest()
    assert "testing" not in (folder / "exports.json").read_text() + (folder / "EXPORTS.md").read_text()
    # docs/publishing.md shows these two exports' last lines (its counts aside).
    doc = (Path(__file__).resolve().parents[2] / "docs" / "publishing.md").read_text()
    shown = [line for line in doc.splitlines() if line.startswith("s3://my-bucket/bench/starter: ")]
    third = run_cli("export", str(folder), "s3://my-bucket/bench/starter", env=env, check=True)
    assert re.sub(r"\d+", "N", third.stdout.splitlines()[-1]) == re.sub(r"\d+", "N", shown[1])
    (folder / "results.csv").write_text((folder / "results.csv").read_text() + "\n")
    fourth = run_cli("export", str(folder), "s3://my-bucket/bench/starter", env=env, check=True)
    assert fourth.stdout.splitlines()[0].startswith("uploaded results.csv (")
    assert re.sub(r"\d+", "N", fourth.stdout.splitlines()[-1]) == re.sub(r"\d+", "N", shown[0])


def _links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _score_cells(text: str) -> dict[str, str]:
    """The score cells of BENCHMARKS.md's row of t1, by config (a, b)."""
    row = next(line for line in text.splitlines() if line.startswith("| t1 |"))
    return dict(zip(("a", "b"), [c.strip() for c in row.strip("|").split("|")][2:4], strict=True))


def test_benchmarks_md_has_a_settings_line_per_task_and_links_each_score_to_its_run_folders(results, tmp_path):
    text = (results / "BENCHMARKS.md").read_text()
    assert "- **t1**: base 0.5, max_frame 1e7, num_envs 16" in text
    # Each score links to its median seed's run folder: scores base + seed/100 over seeds
    # 0, 1, 2 put seed 1 in the middle for both configs.
    for config, cell in _score_cells(text).items():
        shown, href = unlink_score(cell)
        base = 0.5 if config == "a" else 0.6
        assert shown == f"{base + 0.01:.3f} ± 0.010"  # mean base + 0.01, std 0.01
        run = linked_run(results, href)
        assert (run["task"], run["config"], run["seed"]) == ("t1", config, 1)
    runs = [line for line in text.splitlines() if line.startswith("- t1 / ")]
    assert len(runs) == 2
    for line in runs:
        config = line.split(" / ")[1].split(":")[0]
        links = re.findall(r"\[(\d+)\]\((runs/[0-9a-f]+/)\)", line)
        assert [int(seed) for seed, _ in links] == [0, 1, 2]
        for seed, href in links:  # each link is that seed's run folder
            config_yaml = (results / href / "config.yaml").read_text()
            assert f"seed: {seed}\n" in config_yaml and f"config: {config}\n" in config_yaml
    # Exported, the links point to the target's public URL.
    folder = _copy(results, tmp_path)
    export(folder, "memory://links/x", what="report", public="https://example.org/bench")
    import fsspec

    published = fsspec.filesystem("memory").cat_file("/links/x/BENCHMARKS.md").decode()
    href = re.search(r"\[0\]\((runs/[0-9a-f]+/)\)", text).group(1)
    assert f"[0](https://example.org/bench/{href}index.html)" in published
    for config, cell in _score_cells(published).items():
        _, local = unlink_score(_score_cells(text)[config])
        assert unlink_score(cell)[1] == f"https://example.org/bench/{local}index.html"
    assert all(link.startswith("https://example.org/bench/runs/") for link in _links(published))


def test_every_link_of_benchmarks_md_resolves_on_disk_wherever_the_report_is_written(results, tmp_path):
    text = (results / "BENCHMARKS.md").read_text()
    links = _links(text)
    assert len(links) == 2 * (1 + 1 + 3)  # per config: the score, the Runs list's score, 3 seeds
    for link in links:
        assert (results / link / "config.yaml").is_file(), link
    # A report written outside the results folder links back into it.
    elsewhere = tmp_path / "reports" / "today"
    run_cli("report", str(results), "--out", str(elsewhere), "--no-plots", "--no-html", check=True)
    moved = (elsewhere / "BENCHMARKS.md").read_text()
    assert sorted(_links(moved)) == sorted(
        Path(os.path.relpath(results, elsewhere), link).as_posix() + "/" for link in links)
    for link in _links(moved):
        assert (elsewhere / link / "config.yaml").is_file(), link
    # Exported with its runs to a local folder, the copy's links resolve inside the copy.
    target = tmp_path / "public"
    run_cli("export", str(_copy(results, tmp_path)), str(target), check=True)
    copied = (target / "BENCHMARKS.md").read_text()
    assert len(_links(copied)) == len(links)
    for link in _links(copied):
        assert link.endswith("/index.html") and (target / link).is_file(), link
        assert (target / link).parent.joinpath("config.yaml").is_file(), link


def test_settings_named_by_the_spec_come_from_params_then_variables():
    spec = {"variables": {"max_frame": 3e6, "lr": 0.1}, "settings": ["max_frame", "num_envs", "missing"],
            "command": "python x.py {lr}",
            "tasks": [{"name": "pong", "params": {"num_envs": 16}}, {"name": "lunar", "params": {}}]}
    assert task_settings(spec) == {"pong": "max_frame 3e6, num_envs 16", "lunar": "max_frame 3e6"}


def test_public_urls_of_s3_and_hugging_face_targets():
    assert public_url("s3://bucket/a/b") == "https://bucket.s3.amazonaws.com/a/b/"
    assert public_url("s3://bucket") == "https://bucket.s3.amazonaws.com/"
    assert public_url("hf://datasets/org/bench") == "https://huggingface.co/datasets/org/bench/resolve/main/"
    assert public_url("hf://datasets/org/bench@v2/runs") == \
        "https://huggingface.co/datasets/org/bench/resolve/v2/runs/"
    assert public_url("hf://spaces/org/app") == "https://huggingface.co/spaces/org/app/resolve/main/"
    assert public_url("hf://org/model") == "https://huggingface.co/org/model/resolve/main/"
    assert public_url("/tmp/x") is None and public_url("memory://x") is None
    assert public_url("s3://bucket/a", "https://cdn.example.org/bench") == "https://cdn.example.org/bench/"
    with pytest.raises(DataError, match="expected hf://datasets/ORG/NAME"):
        public_url("hf://datasets/org")


def test_links_are_rewritten_only_where_relative():
    text = ("[a](runs/x/) ![p](plots/p.png) [w](https://example.org/) [h](#top) [abs](/etc/x) "
            '<a href="runs/y/">y</a> <img src="data:image/png;base64,AA"> [d](./BENCHMARKS.md)')
    out = rewrite_links(text, "https://h/b/")
    assert out == ("[a](https://h/b/runs/x/index.html) ![p](https://h/b/plots/p.png) [w](https://example.org/) "
                   '[h](#top) [abs](/etc/x) <a href="https://h/b/runs/y/index.html">y</a> '
                   '<img src="data:image/png;base64,AA"> [d](https://h/b/BENCHMARKS.md)')


def test_credentials_in_a_url_are_not_logged():
    assert safe_url("s3://key:secret@bucket/x") == "s3://bucket/x"
    assert safe_url("s3://bucket/x") == "s3://bucket/x"


def test_links_published_for_a_hugging_face_target_name_files_the_hub_serves(results, tmp_path):
    import fsspec

    # The Hub's /resolve/ URLs serve files, never folders: every link must name a published file.
    base = public_url("hf://datasets/org/bench")
    folder = _copy(results, tmp_path)
    export(folder, "memory://hub/bench", public=base)
    fs = fsspec.filesystem("memory")
    for page in ("BENCHMARKS.md", "BENCHMARK_REPORT.md"):
        links = _links(fs.cat_file(f"/hub/bench/{page}").decode())
        assert links
        for link in links:
            assert link.startswith("https://huggingface.co/datasets/org/bench/resolve/main/"), link
            path = link.removeprefix(base)
            assert not path.endswith("/") and fs.isfile(f"/hub/bench/{path}"), link
