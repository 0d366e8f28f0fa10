"""Every error benchlab raises on purpose.

The library raises, the CLI prints: each class below carries what it is about,
and the CLI turns it into one line and an exit code (2 for the user's input,
1 otherwise)::

    BenchlabError                    root of everything benchlab raises
    ├── UserError                    the user's input is wrong -> exit code 2
    │   ├── SpecError                a spec is invalid; .problems lists every problem found
    │   ├── OverrideError            a `-s key=value` names no variable, or is malformed
    │   ├── ResultsNotFound          no results folder / ledger where one was expected
    │   ├── ResultsLocked            another `benchlab run` holds the results folder
    │   ├── ResultsOfOtherSpec       the results folder holds the runs of another spec file
    │   ├── BackendUnavailable       a backend is named that does not exist or cannot be reached
    │   ├── UsageError               a command's arguments are invalid or do not go together
    │   │                            (the CLI's own checks, before the library is called)
    │   ├── MissingExtra             an optional dependency is not installed; says which extra brings it
    │   ├── DataError                a table or file given to analyse is unusable
    │   │   └── BadArgument          an argument of a statistics function has no valid value;
    │   │                            .argument names it (the CLI shows it as its flag)
    │   ├── BenchmarkChanged         on resume, a dataset or the code differs from what the runs
    │   │                            began with (execute/version.py)
    │   ├── SecretFound              a file to publish holds a credential or a secret value;
    │   │                            .findings names each file and line (secrets.py)
    │   ├── SearchError              a search cannot go on as asked (its study was made by another
    │   │                            search section, a promoted config's name is taken, no trial finished)
    │   └── YamlProblem              a spec's text cannot be read as YAML; becomes a SpecError
    │                                (spec/yaml_reader.py)
    ├── StoreError                   the SQLite ledger is unreadable or from another benchmark
    │   ├── LedgerLost               the ledger was deleted, replaced or damaged, or is missing
    │   │                            while run directories show finished runs
    │   ├── NewerLedger              the ledger was written by a newer benchlab (a higher schema
    │   │                            version): refused, never read or written -> exit code 2
    │   └── LedgerError              SQLite failed on a ledger (damaged, locked past the timeout,
    │                                a full disk): what sqlite3 raised, translated at the ledger's
    │                                door (ledger/door.py); .code is SQLite's error code
    ├── DiskFull                     a write found no space left on the results folder's disk
    ├── CannotWrite                  a file benchlab was asked to write cannot be written there
    ├── ExtractFailed                a run's metric could not be read; the run is recorded as
    │                                failed with the reason (collect/extractors/)
    ├── SmiUnavailable               nvidia-smi is missing or failed (execute/gpus.py)
    ├── NotFound                     a dashboard address names nothing, or a path outside the
    │                                results folders: served as a 404 (ui/library.py)
    ├── BrokenFigureWorkers          a report's figure worker ended before its jobs were done;
    │                                the figures are then drawn in the report's process (report/plots.py)
    └── EvaluationError              the evaluation service could not do what was asked
        ├── ModelCallError           the model endpoint failed after retries (evaluate/model.py)
        └── ApiError                 a request the service refuses, answered with an HTTP status
                                     (evaluate/protocol.py)

Classes that live next to the code that raises them are listed with their module;
``tests/test_error_tree.py`` checks that every exception class under ``benchlab``
is in this tree. Two stand outside it on purpose: ``evaluate/_jail.py`` runs as a
stdlib-only script in its own process, and ``execute/gpu_double.py``'s ``NVMLError``
must derive from ``Exception`` exactly as ``pynvml.NVMLError`` does.

Messages follow one form: where (file:line field), what was expected, what was
found, and what the valid choices are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class BenchlabError(Exception):
    """Root of every error benchlab raises on purpose."""

    exit_code: int = 1


class UserError(BenchlabError):
    """The user's input (a spec, a flag, a file) is wrong; nothing was run."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One problem in a spec: where it is and what is wrong there."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class SpecError(UserError):
    """A spec failed validation. ``problems`` holds every problem found, not only the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    @property
    def location(self) -> str:
        first = self.problems[0]
        return first.file if first.line is None else f"{first.file}:{first.line}"


class OverrideError(UserError):
    """A command-line override (`-s key=value`) is malformed or names no variable."""

    def __init__(self, override: str, message: str):
        self.override = override
        super().__init__(f"-s {override}: {message}")


class ResultsNotFound(UserError):
    """No results folder or ledger was found where one was expected."""

    def __init__(self, path: Path | str, message: str):
        self.path = Path(path)
        super().__init__(message)


class ResultsLocked(UserError):
    """Another `benchlab run` is working on this results folder."""

    def __init__(self, path: Path | str, holder: str):
        self.path = Path(path)
        self.holder = holder
        super().__init__(
            f"{path} is in use by another benchlab run ({holder}); "
            "wait for it to finish, or watch it with `benchlab status`"
        )


class ResultsOfOtherSpec(UserError):
    """A results folder already holds the runs of another spec file."""

    def __init__(self, path: Path | str, owner: str, owner_name: str, spec: str, name: str):
        self.path = Path(path)
        self.owner = owner
        self.spec = spec
        same = "the same benchmark name" if owner_name == name else f"another benchmark ({owner_name!r})"
        super().__init__(
            f"{path} holds the runs of {owner} ({owner_name!r}); {spec} ({name!r}) is another spec file "
            f"with {same}: give it its own folder with --results, or run {owner}"
        )


class BackendUnavailable(UserError):
    """A backend was asked for whose optional dependency is missing."""

    def __init__(self, backend: str, hint: str):
        self.backend = backend
        super().__init__(f"backend {backend!r} is not available: {hint}")


class UsageError(UserError):
    """A command's arguments are invalid or do not go together; nothing was done.

    Raised by the CLI's own checks (the library's arguments have their own classes); the
    message names the flags and says what they accept.
    """


class MissingExtra(UserError):
    """What was asked needs an optional dependency that is not installed (see ``benchlab.names.extras``)."""

    def __init__(self, module: str, extra: str, message: str):
        self.module = module
        self.extra = extra
        super().__init__(message)


class DataError(UserError):
    """A results table or file handed to benchlab cannot be used as it is."""


class BadArgument(DataError):
    """An argument of a library function is not one of its valid values.

    The message names the argument as the function spells it (``summary``); the CLI,
    which knows its flags, shows it with :meth:`message_for` (``--summary``).
    """

    def __init__(self, argument: str, value: object, choices: tuple[str, ...] | list[str],
                 what: str | None = None) -> None:
        self.argument = argument
        self.value = value
        self.choices = tuple(choices)
        self.what = what  # e.g. "goal of metric 'loss'": said instead of the argument's name
        super().__init__(self.message_for(argument))

    def message_for(self, name: str) -> str:
        """The message with the argument called ``name`` (a flag, in the CLI)."""
        return (f"{self.what or name} must be one of {', '.join(self.choices)}; "
                f"got {self.value!r}")


class SearchError(UserError):
    """`benchlab search` cannot do what was asked; ``study`` names the study it is about."""

    def __init__(self, study: str, message: str):
        self.study = study
        super().__init__(message)


class StoreError(BenchlabError):
    """The SQLite ledger is unreadable, or belongs to another benchmark."""


class LedgerLost(StoreError):
    """The ledger is gone or is not the one a sweep opened; ``path`` is where it was expected.

    Run directories still hold every finished run: ``benchlab collect --rebuild``
    recreates the ledger from them.
    """

    def __init__(self, path: Path | str, message: str):
        self.path = Path(path)
        super().__init__(message)


class NewerLedger(StoreError):
    """The ledger's schema version is higher than this benchlab's: it was written by a newer
    benchlab, whose tables this one might misread and whose records it might overwrite; ``schema``
    is the ledger's version. Upgrading benchlab is the way on."""

    exit_code = 2

    def __init__(self, path: Path | str, schema: int):
        self.path = Path(path)
        self.schema = schema
        super().__init__(f"{path}: written by a newer benchlab (schema {schema}); upgrade benchlab")


class LedgerError(StoreError):
    """SQLite failed on a ledger: the file is damaged, locked for longer than the timeout, on a
    full disk, or was made read-only. Raised by :mod:`benchlab.ledger` in place of ``sqlite3``'s
    errors, which never leave the package; the message is SQLite's own, the sqlite3 error is its
    ``__cause__`` and ``code`` its extended error code (None where SQLite gave none)."""

    def __init__(self, message: str, code: int | None = None):
        self.code = code
        super().__init__(message)

    def __reduce__(self) -> tuple[type[LedgerError], tuple[str, int | None]]:
        return type(self), (str(self), self.code)


class DiskFull(BenchlabError):
    """A write found no space left; ``path`` is the folder it was writing to."""

    def __init__(self, path: Path | str, message: str):
        self.path = Path(path)
        super().__init__(message)


class CannotWrite(BenchlabError):
    """A file benchlab was asked to write cannot be written where it was asked (permissions, a
    read-only file system); ``.path`` is where."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(message)


class EvaluationError(BenchlabError):
    """The evaluation service could not carry out a request."""
