"""The report's tables of the benchmarks ``benchlab report`` never kept, computed while the
dashboard starts, in a process of their own.

At 10,000 runs the tables take about two seconds of one core from a fresh interpreter (a second
of imports: pandas, scipy, the statistics; then the analysis), and the server's own start (the
web stack) about one: in one process the first tables page waited for both, one after the
other. :meth:`FirstTables.start`, called by ``benchlab ui`` before it imports the web stack,
starts ``python -m benchlab.ui.first_tables FOLDER...``, which finds the same benchmarks as the
dashboard's :class:`~benchlab.ui.library.Library` and prints, for each, the tables
(:func:`benchlab.names.report_tables.encode`: the numbers with the key of what they were
computed from) or nothing where the report kept current tables. The two processes use two cores.

The dashboard takes a benchmark's tables from it only where their key is the key of the folder
as it is when the page is made (:func:`benchlab.ui.tables.report_numbers`): tables of a folder
that changed meanwhile, or a worker that failed or printed anything else, leave the dashboard to
compute the tables itself, as without the worker. Nothing is written anywhere.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.names.report_tables import NumbersKey, ReportNumbers


class FirstTables:
    """The worker's tables by benchmark folder, as it prints them; each is taken once."""

    def __init__(self, proc: subprocess.Popen[bytes] | None, out: IO[bytes] | None) -> None:
        self._proc = proc
        self._got: dict[Path, bytes | None] = {}
        self._ended = proc is None
        self._changed = threading.Condition()
        if proc is not None and out is not None:
            threading.Thread(target=self._read, args=(out,), name="benchlab-ui-first-tables", daemon=True).start()

    @classmethod
    def start(cls, folders: list[Path]) -> FirstTables:
        """Start the worker on the folders given to ``benchlab ui``; one that cannot start is
        one that printed nothing."""
        try:
            proc = subprocess.Popen([sys.executable, "-m", "benchlab.ui.first_tables", *map(str, folders)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return cls(None, None)
        return cls(proc, proc.stdout)

    def _read(self, out: IO[bytes]) -> None:
        try:
            for line in out:
                try:
                    said = json.loads(line)
                    folder = Path(said["folder"])
                    tables = said["tables"]
                except (ValueError, KeyError, TypeError):
                    continue
                with self._changed:
                    self._got[folder] = tables.encode() if isinstance(tables, str) else None
                    self._changed.notify_all()
        finally:
            out.close()
            if self._proc is not None:
                self._proc.wait()  # reaped as soon as it is done: no zombie for the dashboard's life
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def take(self, folder: Path, key: NumbersKey, timeout: float = 120.0) -> ReportNumbers | None:
        """The tables the worker computed for ``folder`` when they are those of ``key`` (waiting
        for them while the worker runs); None where it computed none, computed others, or ended
        without them. Each folder's are given once."""
        from benchlab.names.report_tables import decode

        folder = folder.resolve()
        with self._changed:
            self._changed.wait_for(lambda: folder in self._got or self._ended, timeout)
            text = self._got.pop(folder, None)
        return decode(text, key) if text is not None else None

    def wait(self, timeout: float = 120.0) -> None:
        """Return once the worker has ended (or after ``timeout`` seconds)."""
        with self._changed:
            self._changed.wait_for(lambda: self._ended, timeout)

    def close(self) -> None:
        """End the worker, if it still runs."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def main(argv: list[str]) -> None:
    """Print a line per benchmark under ``argv``'s folders: its folder and its tables, or null
    where the report kept current tables, nothing completed yet, or they could not be computed."""
    from benchlab.ledger import read_only_ledgers
    from benchlab.names.report_tables import encode
    from benchlab.ui.library import Library
    from benchlab.ui.tables import kept_numbers, keyed_numbers

    with read_only_ledgers():  # as the dashboard's own requests: this process writes no ledger
        for bench in Library([Path(a) for a in argv]).benchmarks():
            tables = None
            try:
                if kept_numbers(bench.folder) is None:
                    computed = keyed_numbers(bench.folder)
                    if computed is not None:
                        tables = encode(*computed)
            except Exception:  # noqa: BLE001 - the dashboard computes these itself, and shows the error there
                tables = None
            sys.stdout.write(json.dumps({"folder": str(bench.folder.resolve()), "tables": tables}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    # A process that lives for one computation of a few seconds: the cyclic garbage collector's
    # passes over the objects the imports and the tables make cost about a tenth of its time
    # (measured at 10,000 runs), and what it would free is freed at exit.
    gc.disable()
    main(sys.argv[1:])
