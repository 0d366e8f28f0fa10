"""A run given secrets four ways (an environment variable its command names, a ``-s`` value of a
secret variable, a secret variable's value in the spec, a token its log prints) publishes none of
them: not to a local folder, not to a real S3 API (moto's server on 127.0.0.1), and every link of
what is published answers 200 where it was published."""

from __future__ import annotations

import json
import re
import shutil
import socket
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urljoin

import pytest

from benchlab.secrets import Fingerprint, scan_text
from benchlab_testing import run_cli

# Planted secrets, each in a well-known format so that the scan would also recognise it by its form.
ENV_HF = "hf_" + "EnvTokenFromTheShell0123456789abcd"  # $HF_TOKEN, named in the command
ENV_AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # $AWS_SECRET_ACCESS_KEY, named in the command
SET_TOKEN = "hf_" + "GivenWithDashS98765432109876543zy"  # -s hf_token=..., a secret variable
SPEC_SECRET = "correct-horse-battery-staple-42"  # a secret variable's value written in the spec
LOG_TOKEN = "sk-proj-" + "LoggedByTheRun0123456789ABCDEFGHIJKLMNOPQ"  # printed into train.log
ALL = {"$HF_TOKEN": ENV_HF, "$AWS_SECRET_ACCESS_KEY": ENV_AWS, "-s hf_token": SET_TOKEN,
       "variables.db_password": SPEC_SECRET, "train.log line": LOG_TOKEN}

SPEC = """
name: leaky
description: A benchmark whose runs need credentials.
variables: {hf_token: null, db_password: correct-horse-battery-staple-42, steps: 3}
secrets: [hf_token, db_password]
tasks: [{name: t1}]
configs: [{name: a, params: {base: 0.5}}, {name: b, params: {base: 0.6}}]
seeds: 2
command: >-
  python run.py base={base} steps={steps} token=${hf_token} db=${db_password}
  env_hf=$HF_TOKEN env_aws=$AWS_SECRET_ACCESS_KEY
metrics: {primary: score}
baseline: a
"""

SCRIPT = '''
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
# The run received every secret (it would fail its job otherwise), and says so without the values.
ok = all(len(args[k]) > 8 for k in ("token", "db", "env_hf", "env_aws"))
print("credentials received:", ok, flush=True)
print("debug: calling the API with key LOGGED", flush=True)
seed = int(os.environ["BENCHLAB_SEED"])
score = float(args["base"]) + seed / 100
json.dump({"score": score, "lengths": sum(len(args[k]) for k in ("token", "db", "env_hf", "env_aws"))},
          open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
'''


def _env() -> dict[str, str]:
    return {"HF_TOKEN": ENV_HF, "AWS_SECRET_ACCESS_KEY": ENV_AWS}


@pytest.fixture(scope="module")
def leaky(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("leaky")
    (root / "run.py").write_text(SCRIPT.replace("LOGGED", LOG_TOKEN))
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    run_cli("run", "bench.yaml", "-s", f"hf_token={SET_TOKEN}", "--no-report", cwd=root, env=_env(), check=True)
    folder = root / "results" / "leaky"
    run_cli("report", str(folder), cwd=root, env=_env(), check=True)
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(folder, out)
    return out


def _found(root: Path) -> list[str]:
    """Which planted secret, as raw bytes, is in which file under ``root``."""
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += [f"{path.relative_to(root)}: {what}" for what, value in ALL.items() if value.encode() in data]
    return out


def _scrub_logs(folder: Path) -> None:
    """What the user does when the export names a log line: take the token out of the log."""
    for log in (folder / "runs").glob("*/train.log"):
        log.write_text(log.read_text().replace(LOG_TOKEN, "[removed]"))


def test_runs_got_their_secrets_and_nothing_benchlab_wrote_holds_one(leaky):
    # The runs were given all four values (each over 8 characters), through their environment.
    lengths = [json.loads(p.read_text())["lengths"] for p in (leaky / "runs").glob("*/metrics.json")]
    assert lengths == [len(SET_TOKEN) + len(SPEC_SECRET) + len(ENV_HF) + len(ENV_AWS)] * 4
    # Only the run's own log line holds a secret: config.yaml, provenance.json, version.json,
    # spec.json, the ledger and every report file hold none.
    found = _found(leaky)
    assert found and all(f.endswith("train.log: train.log line") for f in found), found
    version = json.loads(next((leaky / "versions").glob("*/version.json")).read_text())
    assert set(version["env"]) == {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY"}
    assert all(v.startswith("sha256:") and len(v) == 7 + 16 for v in version["env"].values())
    report = (leaky / "BENCHMARK_REPORT.md").read_text()
    assert "-s 'hf_token=<secret>'" in report  # the reproduce command says the value is to be given
    config = (next((leaky / "runs").glob("*/config.yaml"))).read_text()
    assert "BENCHLAB_SECRET_HF_TOKEN" in config and "BENCHLAB_SECRET_DB_PASSWORD" in config


def test_export_refuses_a_log_line_with_a_token_naming_file_and_line(leaky, tmp_path):
    folder = _copy(leaky, tmp_path)
    target = tmp_path / "public"
    refused = run_cli("export", str(folder), str(target), env=_env())
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert re.search(r"runs/[0-9a-f]+/train\.log:2: OpenAI-style API key", message), message
    assert "Nothing was uploaded" in message and "--allow-secret" in message
    assert not target.exists() and not (folder / "exports.json").exists()
    # A whole file is never let through: a second secret in it would go with the first.
    log = re.search(r"(runs/[0-9a-f]+/train\.log):2", message).group(1)
    whole = run_cli("export", str(folder), str(target), "--allow-secret", log, env=_env())
    assert whole.returncode == 2 and "never a whole file" in " ".join(whole.stderr.split())
    # Told explicitly, the one named finding is let through; the other logs still refuse.
    again = run_cli("export", str(folder), str(target), "--allow-secret", f"{log}:2", env=_env())
    refused_now = " ".join(again.stderr.split()).split("refusing", 1)[1].split(". Nothing")[0]
    assert again.returncode == 2 and log not in refused_now and "train.log:2" in refused_now


def test_scan_finds_each_credential_format_and_fingerprinted_values_but_not_commits():
    lines = {
        "hf": "token hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7",
        "openai": "OPENAI_API_KEY=sk-" + "abcdefghijklmnopqrstuvwxyz0123456789AB",
        "aws": "key AKIA" + "ABCDEFGHIJKLMNOP",
        "github": "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789",
        "slack": "xoxb-" + "123456789012-123456789012-abcdefABCDEF",
        "wandb": "WANDB_API_KEY=" + "0123456789abcdef0123456789abcdef01234567",
        "pem": "-----BEGIN RSA PRIVATE KEY-----",
    }
    for kind, line in lines.items():
        assert scan_text(f"ok\n{line}\n", "f.txt"), kind
        assert scan_text(f"ok\n{line}\n", "f.txt")[0].line == 2, kind
    commit = "commit 0123456789abcdef0123456789abcdef01234567 and sha256 " + "ab" * 32
    assert scan_text(commit, "f.txt") == []
    known = [Fingerprint.of("variables.pw", "hunter2-but-longer")]
    assert [f.where + " " + f.kind for f in scan_text("x\ndb=hunter2-but-longer;\n", "f.txt", known)] == [
        "f.txt:2 the value of secret variables.pw"]
    assert scan_text("hunter2-but-shorter", "f.txt", known) == []


def _serve(folder: Path) -> Iterator[str]:
    handler = partial(SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


_LINK = re.compile(r"""\]\(([^)\s]+)\)|(?:href|src)=["']([^"']+)["']""")


def follow_links(base: str, pages: tuple[str, ...] = ("BENCHMARKS.md", "report.html", "BENCHMARK_REPORT.md")
                 ) -> dict[str, int]:
    """Every link of the published ``pages`` under ``base``, with the status code a GET of it gets."""
    statuses: dict[str, int] = {}
    queue = [base + page for page in pages]
    while queue:
        page = queue.pop(0)
        with urllib.request.urlopen(page, timeout=30) as resp:
            text = resp.read().decode("utf-8")
        for m in _LINK.finditer(text):
            link = m.group(1) or m.group(2)
            if link.startswith(("#", "data:", "mailto:")):
                continue
            url = urljoin(page, link)
            if url in statuses:
                continue
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    statuses[url] = resp.status
            except urllib.error.HTTPError as exc:
                statuses[url] = exc.code
            if url.endswith("/index.html") and statuses[url] == 200:
                queue.append(url)  # a run folder's page: its files' links too
    return statuses


@pytest.mark.slow
def test_planted_secrets_reach_neither_a_folder_nor_s3_and_every_published_link_resolves(leaky, tmp_path, capsys):
    import s3fs
    from moto.server import ThreadedMotoServer

    folder = _copy(leaky, tmp_path)
    _scrub_logs(folder)
    # A local folder, read over HTTP as a web server would serve it.
    target = tmp_path / "public"
    run_cli("export", str(folder), str(target), env=_env(), check=True)
    assert _found(target) == []
    print(f"folder: {sum(p.is_file() for p in target.rglob('*'))} files, planted secrets found: {_found(target)}")
    assert not list(target.glob("versions/*/code.diff"))
    served = _serve(target)
    base = next(served)
    try:
        local = follow_links(base)
    finally:
        next(served, None)
    # moto's S3 API server on 127.0.0.1, links rewritten to its path-style public URL.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
        fs.mkdir("pub")
        # A bucket the world reads, as a published benchmark's is.
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").put_bucket_policy(Bucket="pub", Policy=json.dumps({
                         "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*",
                                                                 "Action": "s3:GetObject",
                                                                 "Resource": "arn:aws:s3:::pub/*"}]}))
        env = {**_env(), "AWS_ACCESS_KEY_ID": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "FSSPEC_S3_ENDPOINT_URL": endpoint, "FSSPEC_S3_SECRET": "testing", "FSSPEC_S3_KEY": "testing"}
        public = f"{endpoint}/pub/leaky/"
        run_cli("export", str(folder), "s3://pub/leaky", "--public-url", public, env=env, check=True)
        fs.invalidate_cache()
        keys = fs.find("pub/leaky")
        leaks = [f"{k}: {what}" for k in keys for what, value in ALL.items() if value.encode() in fs.cat_file(k)]
        assert len(keys) > 10 and leaks == []
        print(f"s3: {len(keys)} objects, planted secrets found: {leaks}")
        remote = follow_links(public)
    finally:
        server.stop()
    with capsys.disabled():
        for where, statuses in (("folder", local), ("s3", remote)):
            print(f"\n{where}: {len(statuses)} links followed")
            for url, code in sorted(statuses.items()):
                print(f"  {code} {url.removeprefix(base if where == 'folder' else public)}")
    assert local and all(code == 200 for code in local.values()), local
    assert remote and all(code == 200 for code in remote.values()), remote
    assert any("/runs/" in url for url in remote)  # the score links, to the run folders' pages
