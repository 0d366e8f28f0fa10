"""A benchmark with secrets planted in every shape export must see through (a password holding '@'
and ':' in a URL, a token in a long URL's query, a secret in a .gz, a text file named .png, an hf_
token inside a .gz and inside a tar.gz, a token in a binary file) and given the three ways a run
gets one (a variable of the shell, named by the command or not; a `-s` value of a secret spec
variable; a secret variable's value written in the spec): the export refuses each finding and
uploads nothing, and once the flagged lines and files are taken out, the folder and moto's S3
server (on 127.0.0.1) receive none of the values."""

from __future__ import annotations

import gzip
import json
import re
import socket
import textwrap
from pathlib import Path

import pytest

from benchlab.history.export import export
from benchlab.secrets import SecretFound
from benchlab_testing import run_cli

DB_PASSWORD = "p@ss:word-Planted-71"  # a secret spec variable's value written in the spec
SET_TOKEN = "hf_" + "GivenWithDashSPlanted0123456789ab"  # -s hub_token=...
ENV_NAMED = "named-shell-secret-4d3c2b1a0f"  # $SERVICE_PASSWORD, named by the command
ENV_UNNAMED = "unnamed-shell-token-9e8d7c6b5a"  # $EXTRA_API_TOKEN, in the shell only
QUERY_TOKEN = "ya29Planted0Query1Token2Value3abc"  # ?access_token=... of a long URL
GZ_KEY = "sk-proj-" + "PlantedInsideAGzip0123456789ABCDEFGHIJKL"  # OpenAI-style key in out.txt.gz
PNG_TOKEN = "hf_" + "PlantedInATextFileNamedPng0123456"  # in notes.png, a text file
TAR_TOKEN = "hf_" + "PlantedInATarGzMember0123456789ab"
BIN_TOKEN = "hf_" + "PlantedInABinaryCheckpoint0123456"
PLANTED = {"spec variable (URL password)": DB_PASSWORD, "-s value": SET_TOKEN, "named env": ENV_NAMED,
           "unnamed env": ENV_UNNAMED, "URL query token": QUERY_TOKEN, "key in .gz": GZ_KEY,
           "text file named .png": PNG_TOKEN, "hf_ in tar.gz": TAR_TOKEN, "hf_ in binary": BIN_TOKEN}
SHELL = {"SERVICE_PASSWORD": ENV_NAMED, "EXTRA_API_TOKEN": ENV_UNNAMED}

SPEC = """
name: planted
variables: {db_password: "p@ss:word-Planted-71", hub_token: null}
secrets: [db_password, hub_token]
tasks: [{name: t1}]
configs: [{name: ok}, {name: failing}]
seeds: 1
retries: 0
command: python run.py cfg={config} db=${db_password} hub=${hub_token} svc=$SERVICE_PASSWORD
metrics: {primary: score}
baseline: ok
"""

SCRIPT = '''
import gzip, io, json, os, pickle, sys, tarfile
args = dict(a.split("=", 1) for a in sys.argv[1:])
out = os.environ["BENCHLAB_RUN_DIR"]
print("db: postgresql://bench:" + args["db"] + "@db.internal:5432/results", flush=True)
print("fetch https://storage.example.net/b/ckpt/model.bin?versionId=3&access_token=QUERY&x=1", flush=True)
print("hub token", args["hub"], "service", args["svc"], "extra", os.environ["EXTRA_API_TOKEN"], flush=True)
with open(os.path.join(out, "out.txt.gz"), "wb") as f:
    f.write(gzip.compress(("OPENAI_API_KEY=GZKEY\\n").encode()))
with open(os.path.join(out, "notes.png"), "w") as f:
    f.write("not an image\\ntoken PNGTOKEN\\n")
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tf:
    data = b"cache\\nHF_TOKEN=TARTOKEN\\n"
    info = tarfile.TarInfo("cache/env.txt"); info.size = len(data); tf.addfile(info, io.BytesIO(data))
open(os.path.join(out, "cache.tar.gz"), "wb").write(buf.getvalue())
pickle.dump({"w": bytes(range(256)), "token": "BINTOKEN"}, open(os.path.join(out, "ckpt.pkl"), "wb"))
if args["cfg"] == "failing":
    sys.exit("could not reach postgresql://bench:" + args["db"] + "@db.internal/results")
json.dump({"score": 1.0}, open(os.path.join(out, "metrics.json"), "w"))
'''


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    script = SCRIPT
    for mark, value in (("QUERY", QUERY_TOKEN), ("GZKEY", GZ_KEY), ("PNGTOKEN", PNG_TOKEN),
                        ("TARTOKEN", TAR_TOKEN), ("BINTOKEN", BIN_TOKEN)):
        script = script.replace(mark, value)
    (root / "run.py").write_text(script)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    proc = run_cli("run", "bench.yaml", "-s", f"hub_token={SET_TOKEN}", cwd=root, env=SHELL)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # `failing` fails, as written
    return root / "results" / "planted"


def _found(blobs: dict[str, bytes]) -> list[str]:
    """Which planted value is in which file (gzip streams read through)."""
    out = []
    for name, data in blobs.items():
        if data[:2] == b"\x1f\x8b":
            data += gzip.decompress(data)
        out += [f"{name}: {what}" for what, value in PLANTED.items() if value.encode() in data]
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


_FINDING = re.compile(r"(runs/[0-9a-f]+/[^\s:!]+)(?:![^\s:]+)?:(\d+): ")


def _export_until_clean(folder: Path, target: str, env: dict[str, str], *extra: str) -> list[str]:
    """Export; where it refuses, take out what it names (the line of a text file, else the file)
    and export again, as a user would. Returns every refusal's findings."""
    refusals: list[str] = []
    for _ in range(6):
        proc = run_cli("export", str(folder), target, *extra, env=env)
        if proc.returncode == 0:
            return refusals
        message = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and "Nothing was uploaded" in message, proc.stderr
        assert not any(v in message for v in PLANTED.values())  # the message never shows a value
        refusals.append(message)
        for path, line in {(m.group(1), int(m.group(2))) for m in _FINDING.finditer(message)}:
            file = folder / path
            if not file.exists():
                continue
            if line == 0 or path.endswith((".gz", ".pkl")):
                file.unlink()
            else:
                lines = file.read_text().splitlines(keepends=True)
                file.write_text("".join(x for i, x in enumerate(lines, 1) if i != line))
    raise AssertionError(f"still refused after 6 rounds: {refusals[-1]}")


def test_nothing_benchlab_wrote_holds_a_planted_value(planted):
    found = _found(_files(planted))
    # Only the run folders' own files hold them (the runs wrote them); config.yaml, provenance.json,
    # the versions, the ledger (failure tails included) hold none.
    assert found and all(re.match(r"runs/[0-9a-f]+/(train\.log|out\.txt\.gz|notes\.png|cache\.tar\.gz|ckpt\.pkl): ",
                                  f) for f in found), found


@pytest.mark.slow
def test_planted_secrets_of_every_shape_reach_neither_a_folder_nor_s3(planted, tmp_path, capsys):
    import shutil

    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    folder = tmp_path / "results"
    shutil.copytree(planted, folder)
    run_cli("report", str(folder), check=True)
    target = tmp_path / "public"
    # Every finding, as the library raises it (the command shows the first ten of them).
    with pytest.raises(SecretFound) as raised:
        export(folder, str(target), dry_run=True)
    kinds = {f.kind for f in raised.value.findings}
    assert {"password in a URL", "token in a URL's query", "OpenAI-style API key", "Hugging Face token",
            "the value of secret variables.db_password", "the value of secret variables.hub_token",
            "the value of secret $SERVICE_PASSWORD", "the value of secret $EXTRA_API_TOKEN"} <= kinds, kinds
    refusals = _export_until_clean(folder, str(target), SHELL)
    first = refusals[0]
    assert "out.txt.gz!out.txt:1" in " ".join(refusals) and "notes.png:2" in " ".join(refusals)
    assert "cache.tar.gz!cache.tar!cache/env.txt:2" in " ".join(refusals)
    assert re.search(r"ckpt\.pkl:0: Hugging Face token", " ".join(refusals))
    assert "report.html" not in first and "BENCHMARK" not in first  # benchlab's own files: no false alarm
    published = _files(target)
    assert len(published) > 10 and _found(published) == []
    assert "ledger-records.json" in published  # the failure tail in it is masked
    with capsys.disabled():
        print(f"\nfolder: {len(refusals)} refusal(s) before publishing; first: {first[:300]}...")
        print(f"folder: {len(published)} files published, planted values found: {_found(published)}")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        # A bucket of its own: moto's buckets live as long as the test process, whichever server made them.
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket="planted-pub")
        env = {**SHELL, "AWS_ACCESS_KEY_ID": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "FSSPEC_S3_ENDPOINT_URL": endpoint, "FSSPEC_S3_SECRET": "testing", "FSSPEC_S3_KEY": "testing"}
        # A fresh copy of the planted folder: refused again, nothing uploaded, then published clean.
        again = tmp_path / "again"
        shutil.copytree(planted, again)
        run_cli("report", str(again), check=True)
        public = f"{endpoint}/planted-pub/planted/"
        refused = run_cli("export", str(again), "s3://planted-pub/planted", "--public-url", public, env=env)
        fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
        assert refused.returncode == 2 and fs.find("planted-pub/planted") == []
        _export_until_clean(again, "s3://planted-pub/planted", env, "--public-url", public)
        fs.invalidate_cache()
        keys = fs.find("planted-pub/planted")
        objects = {k: fs.cat_file(k) for k in keys}
        assert len(objects) > 10 and _found(objects) == []
        with capsys.disabled():
            print(f"s3: {len(objects)} objects published, planted values found: {_found(objects)}")
    finally:
        server.stop()
    # The same folder exported twice uploads nothing new (the records file is stable).
    twice = run_cli("export", str(folder), str(target), "--json", env=SHELL, check=True)
    assert json.loads(twice.stdout)["uploaded"] == 0
