"""The export's scan reads what a file really holds: archives unpacked (within bounds), text told by
its bytes and not its name, the images report.html embeds decoded as images, credentials found
inside URLs, secret values found wherever they are; and ``--allow-secret`` lets one finding
through, never a file."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import lzma
import pickle
import tarfile
import zipfile
from pathlib import Path

import pytest

from benchlab.errors import UsageError
from benchlab.history.export import export, scan
from benchlab.history.scan import Limits, scan_bytes
from benchlab.secrets import Fingerprint, SecretFound

HF = "hf_" + "Zq8RkT2wLm5NvB7cX4yJ9pD3sF6gH1aKe0"
PASSWORD = "p@ss:word-Wx7Qz"  # '@' and ':' inside, as URL passwords have
URL = f"https://alice:{PASSWORD}@db.example.org:5432/bench"
LONG_URL = ("https://storage.example.net/bucket/checkpoints/run-17/model.safetensors?versionId=3&"
            "X-Goog-Date=20261128T000000Z&X-Goog-Expires=3600&access_token=ya29Abc0Def1Ghi2Jkl3Mno4Pqr5Stu6Vwx7"
            "&response-content-disposition=attachment")
SIGNED = "https://acct.blob.core.example.net/c/f.bin?sv=2022-11-02&se=2026-12-01&sp=r&sig=Q2Fa9bXk7LmN3pRs5TvW8yZ0%3D"
VALUE = "Spec-Variable-Value-9f8e7d6c"  # a secret spec variable's value: no format to know it by


def _png(payload: bytes) -> bytes:
    """Bytes that start like a PNG and hold ``payload``; no NUL-free text, as images are not."""
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00" + payload + b"\x00\x00IEND"  # 18 bytes: aligned


def _gz(data: bytes) -> bytes:
    return gzip.compress(data)


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out.getvalue()


def _tar(files: dict[str, bytes], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _kinds(name: str, data: bytes, known: list[Fingerprint] | None = None) -> list[tuple[str, int, str]]:
    return [(f.path, f.line, f.kind) for f in scan_bytes(name, data, known or [])]


# ---------------------------------------------------------------------------- benchlab's own images

def test_a_report_embedding_a_plot_whose_base64_reads_like_an_aws_key_is_not_refused():
    # Flat areas of a PNG encode to runs like ASIAESIAESIAESIAESIA: built here on purpose.
    image = _png(base64.b64decode("ASIAESIAESIAESIAESIA" * 3 + "AAAA"))
    uri = base64.b64encode(image).decode()
    assert "ASIAESIAESIAESIAESIA" in uri
    html = f'<html>\n<body>\n<h1>report</h1>\n<img src="data:image/png;base64,{uri}">\n</body>\n</html>\n'
    assert scan_bytes("report.html", html.encode()) == []


def test_a_token_written_in_the_report_text_is_still_found_at_its_line():
    uri = base64.b64encode(_png(b"pixels" * 50)).decode()
    html = (f'<html>\n<img src="data:image/png;base64,{uri}">\n<p>note: {HF}</p>\n'
            f'<img src="data:image/png;base64,{uri}">\n</html>\n')
    assert _kinds("report.html", html.encode()) == [("report.html", 3, "Hugging Face token")]


def test_an_embedded_payload_that_decodes_to_text_is_scanned_as_that_text():
    svg = f'<svg><text>{URL}</text></svg>'.encode()
    html = f'<p>plot</p>\n<img src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">\n'
    assert _kinds("report.html", html.encode()) == [("report.html!image/svg+xml@2", 1, "password in a URL")]


# ---------------------------------------------------------------------------- the five shapes

@pytest.mark.parametrize(("line", "kind"), [
    (f"connecting to {URL}", "password in a URL"),
    (f"fetched {LONG_URL}", "token in a URL's query"),
    (f"GET {SIGNED}", "token in a URL's query"),
    (f"export HF_TOKEN={HF}", "Hugging Face token"),
])
def test_credentials_inside_urls_and_tokens_are_found(line, kind):
    assert _kinds("train.log", f"start\n{line}\nend\n".encode()) == [("train.log", 2, kind)]


@pytest.mark.parametrize("text", [
    "http://localhost:8000/v1/chat/completions", "ssh://git@github.com/org/repo.git",
    "git@github.com:org/repo.git", "postgres://bench:${DB_PASSWORD}@db/bench", "https://user:<secret>@host/",
    "https://example.org/search?q=benchmark&page=2&key=v", "commit 0123456789abcdef0123456789abcdef01234567",
    "run 5267b0b2a7f1 seed=3 lr=0.001 frame:1.00e+07 | total_reward_ma:816.18",
])
def test_urls_without_a_credential_are_not_findings(text):
    assert scan_bytes("train.log", text.encode()) == []


def test_a_secret_in_a_gzipped_log_is_found_inside_it():
    data = _gz(f"epoch 1\nHF_TOKEN={HF}\n".encode())
    assert _kinds("runs/x/train.log.gz", data) == [("runs/x/train.log.gz!train.log", 2, "Hugging Face token")]


def test_a_text_file_named_png_is_scanned_as_text():
    assert _kinds("plots/curve.png", f"not an image\n{URL}\n".encode()) == [
        ("plots/curve.png", 2, "password in a URL")]


@pytest.mark.parametrize(("name", "pack"), [
    ("logs.zip", lambda files: _zip(files)),
    ("logs.tar", lambda files: _tar(files)),
    ("logs.tar.gz", lambda files: _tar(files, "w:gz")),
    ("logs.tar.bz2", lambda files: _tar(files, "w:bz2")),
    ("logs.tar.xz", lambda files: _tar(files, "w:xz")),
    ("logs.bin", lambda files: _zip({"inner.tar.gz": _tar(files, "w:gz")})),  # nested, named by nothing
])
def test_archives_are_opened_whatever_their_name(name, pack):
    files = {"a/ok.txt": b"nothing here\n", "a/env.txt": f"x\ny\ntoken={HF}\n".encode()}
    found = scan_bytes(name, pack(files))
    assert [(f.path.split("!")[-1], f.line, f.kind) for f in found] == [("a/env.txt", 3, "Hugging Face token")]
    assert found[0].path.startswith(name + "!")


def test_bzip2_and_xz_streams_are_decompressed():
    for data in (bz2.compress(URL.encode()), lzma.compress(URL.encode())):
        assert [f.kind for f in scan_bytes("dump", data)] == ["password in a URL"]


def test_a_secret_value_is_found_by_its_fingerprint_in_any_file_and_inside_urls():
    known = [Fingerprint.of("variables.db_password", PASSWORD), Fingerprint.of("variables.key", VALUE)]
    text = f"ok\nusing {URL}\nkey is {VALUE}.\n"
    kinds = {(f.path, f.line, f.kind) for f in scan_bytes("log.txt", _zip({"in.txt": _gz(text.encode())}), known)}
    assert ("log.txt!in.txt!in.txt", 2, "the value of secret variables.db_password") in kinds
    assert ("log.txt!in.txt!in.txt", 3, "the value of secret variables.key") in kinds


def test_a_secret_in_a_binary_file_is_found_in_its_printable_runs():
    blob = pickle.dumps({"weights": bytes(range(256)) * 4, "config": {"token": HF}})
    assert b"\x00" in blob
    assert _kinds("runs/x/checkpoint.pkl", blob) == [("runs/x/checkpoint.pkl", 0, "Hugging Face token")]


def test_an_archive_that_expands_beyond_the_bounds_is_a_finding_not_a_pass():
    bomb = _gz(b"\n" * (8 * 1024 * 1024) + f"{HF}\n".encode())
    assert len(bomb) < 64 * 1024
    found = scan_bytes("runs/x/out.gz", bomb, limits=Limits(expanded_bytes=1024 * 1024))
    assert [(f.path, f.line) for f in found] == [("runs/x/out.gz", 0)]
    assert "not scanned whole" in found[0].kind
    deep = b"secret-free"
    for _ in range(6):
        deep = _gz(deep)
    assert [f.line for f in scan_bytes("deep.gz", deep, limits=Limits(depth=3))] == [0]
    many = _zip({f"f{i}.txt": b"x" for i in range(20)})
    assert [f.line for f in scan_bytes("many.zip", many, limits=Limits(members=10))] == [0]


# ---------------------------------------------------------------------------- --allow-secret

def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    (folder / "runs" / "r1").mkdir(parents=True)
    (folder / "runs" / "r1" / "train.log").write_text(f"one\nHF_TOKEN={HF}\nthree\n{URL}\n")
    return folder


def test_allow_secret_names_one_finding_by_line_or_fingerprint_never_a_file(tmp_path):
    folder = _folder(tmp_path)
    contents = {"runs/r1/train.log": (folder / "runs/r1/train.log").read_bytes()}
    both = scan(folder, contents)
    assert [(f.line, f.kind) for f in both] == [(2, "Hugging Face token"), (4, "password in a URL")]
    with pytest.raises(UsageError, match="never a whole file"):
        scan(folder, contents, allow=["runs/r1/train.log"])
    assert [f.line for f in scan(folder, contents, allow=["runs/r1/train.log:2"])] == [4]
    assert [f.line for f in scan(folder, contents, allow=[both[1].digest])] == [2]
    assert scan(folder, contents, allow=["runs/r1/train.log:2", both[1].digest]) == []


def test_the_refusal_names_file_line_and_fingerprint_and_uploads_nothing(tmp_path):
    folder = _folder(tmp_path)
    with pytest.raises(SecretFound) as refused:
        export(folder, str(tmp_path / "pub"), what="runs")
    message = str(refused.value)
    assert "runs/r1/train.log:2: Hugging Face token [sha256:" in message
    assert "runs/r1/train.log:4: password in a URL [sha256:" in message
    assert HF not in message and PASSWORD not in message
    assert not (tmp_path / "pub").exists()
    done = export(folder, str(tmp_path / "pub"), what="runs", allow=[f.digest for f in refused.value.findings])
    assert {f.path for f in done.files} >= {"runs/r1/train.log"}
