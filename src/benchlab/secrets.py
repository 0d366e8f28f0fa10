"""Secrets: kept out of every file benchlab writes, and looked for in every file it publishes.

Three kinds of value are secret:

- a spec variable listed under ``secrets:`` (its value from ``variables:`` or ``-s``). In a
  command it becomes a reference to an environment variable (:func:`env_name`), whose value the
  run's process receives; the command text, the spec as recorded, the ledger and the reports
  hold only the reference;
- an environment variable a command names (``$HF_TOKEN``): recorded by name and a short hash,
  never its value (``execute/version.py``);
- any text in a well-known credential format (Hugging Face, OpenAI ``sk-``, AWS access keys,
  GitHub and Slack tokens, W&B API keys, private key blocks).

What a published file may not contain is decided here (:func:`scan_text`): the formats are
detect-secrets' detectors where it has one, and a small pattern of ours where it has none
(Hugging Face, W&B, the newer ``sk-proj-`` keys). The values of the first two kinds are found
through :class:`Fingerprint`: a salted SHA-256 and the length, so that a results folder can be
checked for a token without holding the token.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets as _random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchlab.errors import UserError
from benchlab.json_types import JsonObject
from benchlab.run_files import VERSION_FILE, VERSION_SPEC_FILE, VERSIONS_DIR

#: The prefix of the environment variable a secret spec variable reaches its run through.
ENV_PREFIX = "BENCHLAB_SECRET_"
#: What a secret's value is shown as, wherever the value itself would have been.
MASK = "<secret>"

# Candidate tokens for the fingerprint check: runs of characters a token is made of, cut at
# whitespace, quotes and the separators of ``key=value`` / ``key: value`` / URLs' ``@``.
_TOKEN = re.compile(r"[^\s\"'`=:,;@<>()\[\]{}|]+")


def env_name(variable: str) -> str:
    """The environment variable through which a secret spec variable reaches its run."""
    return ENV_PREFIX + re.sub(r"[^A-Z0-9_]", "_", variable.upper())


def short_hash(value: str) -> str:
    """A change detector for a value that must not be stored: 16 hex digits of its SHA-256."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Fingerprint:
    """What is kept of a secret value to find it later: ``sha256(salt + value)`` and its length."""

    name: str
    salt: str
    sha256: str
    length: int

    @classmethod
    def of(cls, name: str, value: str) -> Fingerprint:
        salt = _random.token_hex(8)
        return cls(name, salt, hashlib.sha256((salt + value).encode("utf-8")).hexdigest(), len(value))

    def matches(self, candidate: str) -> bool:
        return len(candidate) == self.length and \
            hashlib.sha256((self.salt + candidate).encode("utf-8")).hexdigest() == self.sha256

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: JsonObject) -> Fingerprint:
        return cls(str(data["name"]), str(data["salt"]), str(data["sha256"]), int(data["length"]))


#: Values shorter than this are not fingerprinted: a 3-character "secret" would match words.
MIN_SECRET_LENGTH = 8


def fingerprints(values: dict[str, str | None]) -> list[Fingerprint]:
    """A fingerprint of each value long enough to be told apart from ordinary text."""
    return [Fingerprint.of(name, v) for name, v in values.items() if v and len(v) >= MIN_SECRET_LENGTH]


def known_fingerprints(results: Path) -> list[Fingerprint]:
    """The fingerprints of every secret value the folder's versions recorded, and of the current
    values of the environment variables their commands named (a token may have changed since):
    what export looks for, and what a kept log tail has masked."""
    out: list[Fingerprint] = []
    names: set[str] = set()
    for path in sorted((results / VERSIONS_DIR).glob(f"*/{VERSION_FILE}")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for f in data.get("secret_fingerprints") or []:
            out.append(Fingerprint.from_json(f))
            if str(f.get("name", "")).startswith("$"):
                names.add(f["name"][1:])
        try:  # the spec's own env: values are written in the spec; the rest came from the shell
            spec_env = json.loads((path.parent / VERSION_SPEC_FILE).read_text())["spec"].get("env") or {}
        except (OSError, ValueError, KeyError, AttributeError):
            spec_env = {}
        names |= {n for n in (data.get("env") or {}) if n not in spec_env}
    current = {f"${n}": os.environ.get(n) for n in sorted(names)}
    return out + fingerprints(current)


@dataclass(frozen=True)
class Finding:
    """A secret found in a file: where (1-based line) and what kind; never the value itself."""

    path: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}"


class SecretFound(UserError):
    """Files about to be published hold credentials or secret values; nothing was published."""

    def __init__(self, findings: list[Finding], hint: str = ""):
        self.findings = findings
        shown = "; ".join(str(f) for f in findings[:10])
        more = f" (and {len(findings) - 10} more)" if len(findings) > 10 else ""
        super().__init__(f"refusing to publish what looks like a secret: {shown}{more}. Nothing was uploaded"
                         + (f"; {hint}" if hint else ""))


def _detectors() -> list[Any]:
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.slack import SlackDetector

    # Formats detect-secrets 1.5 has no detector for.
    class HuggingFaceDetector(RegexBasedDetector):
        secret_type = "Hugging Face token"
        denylist = (re.compile(r"\bhf_[A-Za-z0-9]{30,}"),)

    class OpenAIStyleDetector(RegexBasedDetector):
        secret_type = "OpenAI-style API key"
        denylist = (re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),)

    class WandbDetector(RegexBasedDetector):
        secret_type = "W&B API key"
        # A W&B key is 40 hex digits, like a git commit, so it is recognised by its name or host.
        denylist = (re.compile(r"(?i)wandb[_-]?api[_-]?key\W{0,3}[0-9a-f]{40}\b"),
                    re.compile(r"(?i)api\.wandb\.ai\s+login\s+\S+\s+password\s+[0-9a-f]{40}\b"),
                    re.compile(r"\bwandb_v1_[A-Za-z0-9_]{20,}"))

    return [AWSKeyDetector(), GitHubTokenDetector(), OpenAIDetector(), PrivateKeyDetector(), SlackDetector(),
            HuggingFaceDetector(), OpenAIStyleDetector(), WandbDetector()]


_DETECTORS: list[Any] | None = None


def scan_text(text: str, path: str, known: Iterable[Fingerprint] = ()) -> list[Finding]:
    """Every line of ``text`` that holds a credential format or a fingerprinted value (one
    finding per line and kind)."""
    global _DETECTORS
    if _DETECTORS is None:
        from benchlab.extras import require

        require("export", "the secret scan of benchlab export", ("detect_secrets",))
        _DETECTORS = _detectors()
    known = list(known)
    lengths = {f.length for f in known}
    out: list[Finding] = []
    for number, line in enumerate(text.splitlines(), 1):
        kinds: list[str] = []
        for detector in _DETECTORS:
            if any(True for _ in detector.analyze_string(line)):
                kinds.append(str(detector.secret_type))
        kinds += [f"the value of secret {hit.name}" for _, _, hit in _known_values(line, known, lengths)]
        out += [Finding(path, number, k) for k in dict.fromkeys(kinds)]
    return out


def _known_values(line: str, known: list[Fingerprint],
                  lengths: set[int]) -> Iterable[tuple[int, int, Fingerprint]]:
    """``(start, end, fingerprint)`` of each fingerprinted value in ``line``, left to right."""
    if not known:
        return
    for token in _TOKEN.finditer(line):
        text, offset = token.group(), token.start()
        for size in sorted(lengths, reverse=True):
            # A secret inside a longer token (``--token=VALUE`` cut at '=' or not)
            # is found by trying each window of the secret's length.
            if len(text) < size:
                continue
            # Bounded: a long blob (base64 of a figure) is tried at its two ends only.
            starts = range(len(text) - size + 1) if len(text) <= 4 * size else (0, len(text) - size)
            for start in starts:
                hit = next((f for f in known if f.matches(text[start:start + size])), None)
                if hit is not None:
                    yield offset + start, offset + start + size, hit
                    break


def redact(text: str, known: Iterable[Fingerprint]) -> str:
    """``text`` with every fingerprinted secret value in it replaced by :data:`MASK`: what
    benchlab keeps of a run's log (the failure tail in the ledger, the dashboard's log view)."""
    known = list(known)
    if not known:
        return text
    lengths = {f.length for f in known}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        kept: list[tuple[int, int]] = []
        for start, end, _ in sorted(_known_values(line, known, lengths), key=lambda h: (h[0], -h[1])):
            if not kept or start >= kept[-1][1]:  # one secret inside another: mask the outer
                kept.append((start, end))
        for start, end in reversed(kept):
            line = line[:start] + MASK + line[end:]
        lines[i] = line
    return "\n".join(lines)


def mask(text: str, values: Iterable[str]) -> str:
    """``text`` with each of ``values`` (long enough to be a secret) replaced by :data:`MASK`."""
    for value in sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


__all__ = ["ENV_PREFIX", "MASK", "MIN_SECRET_LENGTH", "Finding", "Fingerprint", "SecretFound", "env_name",
           "fingerprints", "known_fingerprints", "mask", "redact", "scan_text", "short_hash"]
