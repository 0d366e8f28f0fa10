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

from benchlab.errors import DataError, UserError
from benchlab.json_types import JsonObject
from benchlab.names.results_files import VERSION_FILE, VERSION_SPEC_FILE, VERSIONS_DIR, SavedSpec

#: The prefix of the environment variable a secret spec variable reaches its run through.
ENV_PREFIX = "BENCHLAB_SECRET_"
#: What a secret's value is shown as, wherever the value itself would have been.
MASK = "<secret>"

# Candidate runs for the fingerprint check: cut at whitespace, quotes and angle brackets only, so
# that a password holding '@' or ':' (``https://user:p@ss:word@host``) stays inside one run.
_RUN = re.compile(r"[^\s\"'`<>]+")
# Where a value may begin or end inside a long run: after or before one of these (``key=VALUE``,
# ``?token=VALUE&``, ``user:VALUE@host``).
_SEPARATOR = re.compile(r"[^A-Za-z0-9_+/.~-]")
# Environment variable names whose values are credentials by the name's own words (a run gets
# the whole environment of the shell that started the sweep, not only what its command names).
_CREDENTIAL_WORDS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "CREDENTIAL",
                     "CREDENTIALS"}
_CREDENTIAL_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("SECRET", "KEY"), ("PRIVATE", "KEY"), ("AUTH", "KEY")}
# ...unless the name says the value is where a credential is kept, not the credential.
_LOCATION_WORDS = {"FILE", "PATH", "DIR", "SOCK", "SOCKET", "URL_FILE", "ID", "TYPE", "NAME", "USER"}


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


def is_credential_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a credential (``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``OPENAI_API_KEY``), not where one is kept
    (``GOOGLE_APPLICATION_CREDENTIALS_FILE``, ``SSH_AUTH_SOCK``) nor benchlab's own."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    if name.upper().startswith("BENCHLAB_") and not name.upper().startswith(ENV_PREFIX):
        return False
    if any(w in _LOCATION_WORDS for w in words[-1:]):
        return False
    return any(w in _CREDENTIAL_WORDS for w in words) or any(pair in _CREDENTIAL_PAIRS
                                                             for pair in zip(words, words[1:], strict=False))


def credential_env(environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """The variables of ``environ`` (default: this process's) whose names are credentials'
    (:func:`is_credential_name`), as ``$NAME -> value``: what every run of a sweep receives
    without its command naming it."""
    environ = dict(os.environ) if environ is None else environ
    return {f"${k}": v for k, v in sorted(environ.items()) if is_credential_name(k)}


def _spec_env(path: Path) -> JsonObject:
    """The ``env`` of the spec a version kept in ``path`` ({} if it cannot be read)."""
    try:
        saved = SavedSpec.read(path)
    except (OSError, DataError):
        return {}
    env = saved.spec.get("env") if saved is not None else None
    return env if isinstance(env, dict) else {}


def known_fingerprints(results: Path) -> list[Fingerprint]:
    """The fingerprints of every secret value the folder's versions recorded, and of the current
    values of the environment variables their commands named and of this process's variables
    named as credentials (a token may have changed since; the shell that exports may hold one
    the runs also had): what export looks for, and what a kept log tail has masked."""
    out: list[Fingerprint] = []
    names: set[str] = set()
    for path in sorted((results / VERSIONS_DIR).glob(f"*/{VERSION_FILE}")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for f in data.get("secret_fingerprints") or []:
            try:
                out.append(Fingerprint.from_json(f))
            except (KeyError, TypeError, ValueError):
                continue
            if str(f.get("name", "")).startswith("$"):
                names.add(f["name"][1:])
        # The spec's own env: values are written in the spec; the rest came from the shell.
        spec_env = _spec_env(path.parent / VERSION_SPEC_FILE)
        names |= {n for n in (data.get("env") or {}) if n not in spec_env}
    current = {f"${n}": os.environ.get(n) for n in sorted(names)}
    current.update(credential_env())
    return out + fingerprints(current)


@dataclass(frozen=True)
class Finding:
    """A secret found in a file: where (1-based line; 0 in a binary payload, or for a file that
    could not be read whole) and what kind; never the value itself. ``digest`` is
    :func:`short_hash` of the value found: what ``export --allow-secret`` names to let this one
    value through (``where`` names this one place)."""

    path: str
    line: int
    kind: str
    digest: str = ""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.kind}" + (f" [{self.digest}]" if self.digest else "")


class SecretFound(UserError):
    """Files about to be published hold credentials or secret values; nothing was published."""

    def __init__(self, findings: list[Finding], hint: str = ""):
        self.findings = findings
        shown = "; ".join(str(f) for f in findings[:10])
        more = f" (and {len(findings) - 10} more)" if len(findings) > 10 else ""
        super().__init__(f"refusing to publish what looks like a secret: {shown}{more}. Nothing was uploaded"
                         + (f"; {hint}" if hint else ""))


# A value written where a credential goes that is a placeholder, not a credential: ``${PASS}``,
# ``{password}``, ``<secret>`` (benchlab's own mask, also as HTML and URLs escape it), ``%(pw)s``, ``****``.
_PLACEHOLDER = re.compile(r"^(?:\$\{?\w*\}?|\{\w*\}|<[^>]*>|&lt;\w*&gt;|%3C\w*%3E|%\(\w+\)s|\*+|x+|\.\.\.)$",
                          re.I)


@dataclass(frozen=True)
class Pattern:
    """A credential format benchlab knows itself: the regex, and the group holding the secret
    (0: the whole match)."""

    kind: str
    regex: re.Pattern[str]
    group: int | str = 0

    def values(self, line: str) -> Iterable[tuple[int, int, str]]:
        """``(start, end, value)`` of each credential of this format in ``line``."""
        for m in self.regex.finditer(line):
            value = m.group(self.group)
            if value and not _PLACEHOLDER.match(value):
                yield m.start(self.group), m.end(self.group), value


#: The formats benchlab finds itself: where detect-secrets has no detector (credentials inside
#: URLs, Hugging Face, the newer OpenAI and W&B keys), and detect-secrets' own well-known formats
#: again, so that what benchlab keeps of a log is masked without the ``export`` extra.
PATTERNS: tuple[Pattern, ...] = (
    # scheme://user:password@host: the password runs to the last '@' before the host, so that it
    # may hold '@' and ':' itself.
    Pattern("password in a URL", re.compile(
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#\"'`<>@:]*:(?P<pw>[^\s/?#\"'`<>]+)@[A-Za-z0-9\[]"), "pw"),
    Pattern("token in a URL's query", re.compile(
        r"(?i)[?&;](?:(?:access|refresh|id|auth|api|session|private|bearer|upload|download)[_-]?)?"
        r"(?:token|key|secret|sig|signature|password|passwd|pwd|credential)s?"
        r"=(?P<value>[^\s&#;\"'`<>]{6,})"), "value"),
    Pattern("token in a URL's query", re.compile(
        r"(?i)[?&;](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|"
        r"client_secret|code_verifier)=(?P<value>[^\s&#;\"'`<>]{16,})"),
        "value"),
    Pattern("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    Pattern("OpenAI-style API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}")),
    Pattern("W&B API key", re.compile(r"(?i)wandb[_-]?api[_-]?key\W{0,3}(?P<key>[0-9a-f]{40})\b"), "key"),
    Pattern("W&B API key", re.compile(r"(?i)api\.wandb\.ai\s+login\s+\S+\s+password\s+(?P<key>[0-9a-f]{40})\b"),
            "key"),
    Pattern("W&B API key", re.compile(r"\bwandb_v1_[A-Za-z0-9_]{20,}")),
    Pattern("AWS Access Key", re.compile(r"\b(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}\b")),
    Pattern("GitHub Token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    Pattern("Slack Token", re.compile(r"\bxox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+", re.I)),
    Pattern("Private Key", re.compile(r"BEGIN[ A-Z]*PRIVATE KEY")),
)
_PRIVATE_BLOCK = re.compile(r"-----BEGIN[ A-Z]*PRIVATE KEY-----.*?(?:-----END[ A-Z]*PRIVATE KEY-----|\Z)", re.S)


def _detectors() -> list[Any]:
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.slack import SlackDetector

    return [AWSKeyDetector(), GitHubTokenDetector(), OpenAIDetector(), PrivateKeyDetector(), SlackDetector()]


_DETECTORS: list[Any] | None = None


def scan_text(text: str, path: str, known: Iterable[Fingerprint] = ()) -> list[Finding]:
    """Every line of ``text`` that holds a credential format (detect-secrets' detectors and
    :data:`PATTERNS`) or a fingerprinted value: one finding per line, kind and value."""
    global _DETECTORS
    if _DETECTORS is None:
        from benchlab.names.extras import require

        require("export", "the secret scan of benchlab export", ("detect_secrets",))
        _DETECTORS = _detectors()
    known = list(known)
    lengths = {f.length for f in known}
    out: list[Finding] = []
    for number, line in enumerate(text.splitlines(), 1):
        found: dict[tuple[str, str], None] = {}
        for detector in _DETECTORS:
            for value in detector.analyze_string(line):
                found[(str(detector.secret_type), short_hash(str(value)))] = None
        for pattern in PATTERNS:
            for _, _, value in pattern.values(line):
                found[(pattern.kind, short_hash(value))] = None
        for start, end, hit in _known_values(line, known, lengths):
            found[(f"the value of secret {hit.name}", short_hash(line[start:end]))] = None
        out += [Finding(path, number, kind, digest) for kind, digest in found]
    return out


def _starts(text: str, size: int) -> Iterable[int]:
    """Where a value of ``size`` characters may begin in the run ``text``: anywhere in a short
    run; in a long one (a URL, base64) at its ends and next to a separator only."""
    last = len(text) - size
    if len(text) <= 4 * size:
        return range(last + 1)
    seps = [m.start() for m in _SEPARATOR.finditer(text)]
    return sorted({0, last, *(i + 1 for i in seps if i + 1 <= last), *(i - size for i in seps if i - size >= 0)})


def _known_values(line: str, known: list[Fingerprint],
                  lengths: set[int]) -> Iterable[tuple[int, int, Fingerprint]]:
    """``(start, end, fingerprint)`` of each fingerprinted value in ``line``, left to right."""
    if not known:
        return
    for run in _RUN.finditer(line):
        text, offset = run.group(), run.start()
        for size in sorted(lengths, reverse=True):
            if len(text) < size:
                continue
            for start in _starts(text, size):
                hit = next((f for f in known if f.matches(text[start:start + size])), None)
                if hit is not None:
                    yield offset + start, offset + start + size, hit
                    break


def redact(text: str, known: Iterable[Fingerprint] = ()) -> str:
    """``text`` with every fingerprinted secret value and every credential of a known format
    (:data:`PATTERNS`; a private key's whole block) replaced by :data:`MASK`: what benchlab keeps
    of a run's log (the failure tail in the ledger, ``status``, the dashboard's log view)."""
    known = list(known)
    lengths = {f.length for f in known}
    text = _PRIVATE_BLOCK.sub(MASK, text)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        spans = [(start, end) for start, end, _ in _known_values(line, known, lengths)]
        spans += [(start, end) for pattern in PATTERNS for start, end, _ in pattern.values(line)]
        kept: list[tuple[int, int]] = []
        for start, end in sorted(spans, key=lambda h: (h[0], -h[1])):
            if not kept or start >= kept[-1][1]:  # one secret inside another: mask the outer
                kept.append((start, end))
            elif end > kept[-1][1]:  # overlapping: mask both as one
                kept[-1] = (kept[-1][0], end)
        for start, end in reversed(kept):
            line = line[:start] + MASK + line[end:]
        lines[i] = line
    return "\n".join(lines)


def mask(text: str, values: Iterable[str]) -> str:
    """``text`` with each of ``values`` (long enough to be a secret) replaced by :data:`MASK`."""
    for value in sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


__all__ = ["ENV_PREFIX", "MASK", "MIN_SECRET_LENGTH", "PATTERNS", "Finding", "Fingerprint", "Pattern", "SecretFound",
           "credential_env", "env_name", "fingerprints", "is_credential_name", "known_fingerprints", "mask", "redact",
           "scan_text", "short_hash"]
