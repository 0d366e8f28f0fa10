"""The long-format results table that everything downstream of execution reads.

Columns: ``benchmark, task, config, seed, metric, step, value``; ``step`` is NaN
for a run's final scalars and a number for each point of a logged curve.
Only the completed runs of the spec as ``benchlab run`` last ran it appear: runs
the spec no longer names (a removed config or seed, a changed definition) stay
in the ledger but not in the table, unless asked for with ``all_runs=True``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.benchmark_info import BenchmarkInfo
from benchlab.errors import ResultsNotFound
from benchlab.long_format import COLUMNS as LONG_COLUMNS
from benchlab.store import DB_NAME, Store, find_db

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from benchlab.spec import Spec

COLUMNS = list(LONG_COLUMNS)  # the long format (benchlab.long_format), as a list for pandas


def find_results(path: Path | str | None = None) -> Path:
    """The results folder meant by ``path``; with None: ./benchlab.db's folder, or the only one under ./results."""
    if path is not None:
        p = Path(path)
        find_db(p)
        return p if p.is_dir() else p.parent
    here = Path.cwd()
    if (here / DB_NAME).exists():
        return here
    candidates = sorted(p.parent for p in (here / "results").glob(f"*/{DB_NAME}"))
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ResultsNotFound(here, "no results folder given and none found here "
                                    "(looked for ./benchlab.db and ./results/*/benchlab.db)")
    raise ResultsNotFound(here, "several results folders here; name one: "
                                + ", ".join(str(c.relative_to(here)) for c in candidates))


def load(results: Path | str | None = None, *, series: bool = True, all_runs: bool = False,
         search: bool = False) -> pd.DataFrame:
    """The results table of a results folder, as a pandas DataFrame in long format.

    It holds the completed runs of the spec as ``benchlab run`` last ran it.
    ``series=False`` leaves out the logged curves (only final scalars), which is
    much smaller for large sweeps. ``all_runs=True`` adds the runs kept in the
    ledger that the spec no longer names, with two more columns to tell them
    apart: ``run_id`` and ``in_spec`` (False for those runs).

    Search trials (``benchlab search``) are never part of it. ``search=True`` reads them
    instead: the completed runs of every study under ``<results>/search/`` (or of the one study
    folder given), with two more columns, ``study`` and ``trial`` (the trial's number).
    """
    if search:
        return _load_search(results, series=series)
    folder = find_results(results)
    return _load_folder(folder, series=series, all_runs=all_runs)


def _load_folder(folder: Path, *, series: bool, all_runs: bool, trials: bool = False) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    columns = [*COLUMNS, "run_id", "in_spec"] if all_runs else COLUMNS
    with Store.open(folder) as store:
        meta = store.meta()
        if SEARCH_META in meta and not trials:
            raise ResultsNotFound(folder, f"{folder} holds the trials of a search ({meta[SEARCH_META].get('study')}), "
                                          "which never enter a benchmark table; read them with "
                                          "benchlab.load(..., search=True) or `benchlab search --report`")
        name = meta.get("name", folder.name)
        finals = store.metric_rows(current_only=not all_runs)
        in_spec = store.in_spec_ids() if all_runs else set()
        frames = []
        if finals:
            rid, task, cfg, seed, metric, value = zip(*finals, strict=True)
            frames.append(pd.DataFrame({
                "benchmark": name, "task": task, "config": cfg, "seed": seed, "metric": metric,
                "step": np.nan, "value": np.asarray(value, dtype=float),
                **({"run_id": rid, "in_spec": [r in in_spec for r in rid]} if all_runs else {})}))
        if series:
            rows = list(store.series_rows(current_only=not all_runs))
            if rows:
                lengths = np.array([len(r[5]) for r in rows])
                extra = {}
                if all_runs:
                    extra = {"run_id": _repeated([r[0] for r in rows], lengths),
                             "in_spec": np.repeat([r[0] in in_spec for r in rows], lengths)}
                frames.append(pd.DataFrame({
                    "benchmark": name,
                    "task": _repeated([r[1] for r in rows], lengths),
                    "config": _repeated([r[2] for r in rows], lengths),
                    "seed": np.repeat([r[3] for r in rows], lengths),
                    "metric": _repeated([r[4] for r in rows], lengths),
                    "step": np.concatenate([r[5] for r in rows]),
                    "value": np.concatenate([r[6] for r in rows]),
                    **extra,
                }))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("step", "value") else
                                          bool if c == "in_spec" else object) for c in columns})
    table = pd.concat(frames, ignore_index=True)
    table["seed"] = table["seed"].astype(int)
    return table[columns]


#: The ledger's meta key that marks a search study's folder (``benchlab.search``).
SEARCH_META = "search"
SEARCH_DIR = "search"


def search_folders(results: Path | str | None = None) -> list[Path]:
    """The study folders of a results folder (``<results>/search/<name>``), or the one study folder given."""
    if results is not None and (Path(results) / SEARCH_DIR).is_dir():
        folder = Path(results)  # a search alone makes no benchmark ledger beside its own
    else:
        folder = find_results(results)
        with Store.open(folder) as store:
            if SEARCH_META in store.meta():
                return [folder]
    return sorted(p.parent for p in (folder / SEARCH_DIR).glob(f"*/{DB_NAME}"))


def _load_search(results: Path | str | None, *, series: bool) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for folder in search_folders(results):
        table = _load_folder(folder, series=series, all_runs=False, trials=True)
        with Store.open(folder) as store:
            study = store.meta()[SEARCH_META].get("study", folder.name)
        table["study"] = study
        table["trial"] = table["config"].str.extract(r"\[trial=(\d+)\]$", expand=False).astype(float)
        frames.append(table)
    if not frames:
        columns = [*COLUMNS, "study", "trial"]
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("step", "value", "trial") else object)
                             for c in columns})
    return pd.concat(frames, ignore_index=True)


def _repeated(names: list[str], lengths: np.ndarray) -> Any:
    """``names[i]`` repeated ``lengths[i]`` times, as the column pandas makes of strings.

    Curves have a row per point, and turning each row's string into pandas' own
    string type costs more than reading the points; with pyarrow behind that type,
    the column is built from codes in one cast instead.
    """
    import numpy as np
    import pandas as pd

    uniques, codes = np.unique(np.array(names, dtype=object), return_inverse=True)
    codes = np.repeat(codes, lengths)
    dtype = pd.Series(["x"]).dtype
    if getattr(dtype, "storage", None) == "pyarrow":
        import pyarrow as pa

        column = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                                pa.array(list(uniques), type=pa.string()))
        return pd.array(column.cast(pa.string()), dtype=dtype)
    return uniques[codes]


def info(results: Path | str | None = None) -> BenchmarkInfo:
    """The benchmark's metadata: primary metric and goals, baseline, tasks, configs, targets."""
    folder = find_results(results)
    with Store.open(folder) as store:
        recorded = store.benchmark()
    if recorded is None:
        raise ResultsNotFound(folder, f"{folder}: the ledger holds no benchmark yet")
    return recorded


def write_benchmark_meta(store: Store, spec: Spec, results_dir: Path) -> None:
    """Record the benchmark of ``spec`` in the ledger, and the spec itself next to it
    (``benchmark.json``, read back when the ledger is rebuilt)."""
    record = BenchmarkInfo.from_spec(spec)
    store.set_benchmark(record)
    (results_dir / "benchmark.json").write_text(json.dumps(
        {"spec": record.spec, "spec_path": record.spec_path, "overrides": record.overrides},
        indent=1, default=str))
