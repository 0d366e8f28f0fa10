"""Per-question records of evaluations, read into one long samples table.

Columns (:data:`benchlab.names.long_format.SAMPLE_COLUMNS`): ``benchmark, task, config, seed, repeat,
question, cluster, metric, value, question_hash``. Sources:

- lm-evaluation-harness ``samples_<task>_<date>.jsonl`` (written with ``--log_samples`` beside
  ``results_<date>.json``): one line per (document, filter) with ``doc_id``, ``filter``, the
  names of its ``metrics`` and their values, ``doc_hash`` and ``prompt_hash``. The metric is
  named as in the results file, ``acc,none``; a metric whose value is a list of numbers (one
  per repeat) gives one row per repeat.
- Inspect AI logs (``.eval`` and ``.json``), read with Inspect's own reader (the ``evals``
  extra): every sample and epoch (the repeat), every scorer (the metric), its value as Inspect
  turns it into a number (``C`` 1, ``I`` 0, ``P`` 0.5, ``N`` 0); the cluster is the sample
  metadata key a ``stderr(cluster=...)`` metric of the task names.
- NeMo-Skills ``output-rs<k>.jsonl`` (re-run ``k`` is the repeat; the task is the folder's
  name): each line's boolean or numeric correctness fields (``symbolic_correct``,
  ``judge_correct``, ``is_correct``, ``*_correct``, ``*_eval``...); the question is the line's
  ``id`` when it has one, else its position.
- ``benchlab eval``'s ``<benchmark>.jsonl`` (beside its ``raw_metrics.json``): each item's
  samples' ``correct`` verdicts, metric ``correct``, one repeat per sample.
- a CSV (or Parquet file) of the columns above (at least ``task, config, question, value``).

Two runs pair on a question only if they asked the same thing: :func:`check_pairing` refuses
(or, asked to, drops with a warning) questions whose ``question_hash`` differs between configs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from benchlab.collect.samples_table import read_samples_csv, read_samples_parquet
from benchlab.errors import DataError
from benchlab.names.long_format import SAMPLE_COLUMNS, SAMPLE_REQUIRED
from benchlab.names.run_files import METRICS_FILE, PROVENANCE_FILE, SERIES_FILE

if TYPE_CHECKING:
    import pandas as pd

LM_EVAL_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.:]+)\.jsonl$")
NEMO_OUTPUT = re.compile(r"^output-rs(?P<k>\d+)\.jsonl$")
# NeMo-Skills' correctness fields: math (symbolic_correct, judge_correct), code (is_correct,
# passed), instruction following (prompt_level_strict_acc ...).
_NEMO_SCORE = re.compile(r"(^|_)(correct|acc|accuracy|passed|score)$")


@dataclass
class Samples:
    """What reading found: the rows as columns (:data:`SAMPLE_COLUMNS`), and notes for the user."""

    columns: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in SAMPLE_COLUMNS})
    notes: list[str] = field(default_factory=list)

    def add(self, benchmark: str, task: str, config: str, seed: int, repeat: int, question: str,
            cluster: str | None, metric: str, value: float, question_hash: str | None) -> None:
        c = self.columns
        c["benchmark"].append(benchmark)
        c["task"].append(task)
        c["config"].append(config)
        c["seed"].append(seed)
        c["repeat"].append(repeat)
        c["question"].append(question)
        c["cluster"].append(cluster)
        c["metric"].append(metric)
        c["value"].append(value)
        c["question_hash"].append(question_hash)

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        df = pd.DataFrame(self.columns, columns=list(SAMPLE_COLUMNS))
        df["value"] = df["value"].astype(float)
        df["seed"] = df["seed"].astype(int)
        df["repeat"] = df["repeat"].astype(int)
        return _key_by_hash(df, self.notes)


#: The prefix of a question keyed by the hash of its text (a record without an id).
HASH_KEY = "problem-sha256:"


def _key_by_hash(df: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """Key every question of a task by its text's hash when some of its records had no id.

    A NeMo-Skills file without ``id`` is keyed by its problem's hash; pairing it with another
    config's file that has ids would otherwise see two sets of questions (60 "questions" for 30).
    """
    if df.empty:
        return df
    question = df["question"].astype(str)
    by_hash = question.str.startswith(HASH_KEY)
    if not by_hash.any():
        return df
    tasks = sorted(set(df.loc[by_hash, "task"]))
    fix = df["task"].isin(tasks) & ~by_hash & df["question_hash"].notna()
    if fix.any():
        df.loc[fix, "question"] = HASH_KEY + df.loc[fix, "question_hash"].astype(str).str[:16]
    notes.append(f"{', '.join(tasks)}: some records have no question id; every question of "
                 f"{'this task' if len(tasks) == 1 else 'these tasks'} is keyed by the hash of its problem text")
    return df


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


# ------------------------------------------------------------------------- lm-evaluation-harness


def read_lm_eval_samples(path: Path, out: Samples, *, config: str, seed: int = 0, benchmark: str = "") -> None:
    """One ``samples_<task>_<date>.jsonl`` file into ``out``."""
    m = LM_EVAL_SAMPLES.match(path.name)
    if m is None:
        raise DataError(f"{path}: not an lm-evaluation-harness samples file (expected samples_<task>_<date>.jsonl)")
    task = m["task"]
    skipped: set[str] = set()
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(rec, dict) or "doc_id" not in rec:
                raise DataError(f"{path}:{lineno}: no doc_id; not an lm-evaluation-harness sample record")
            filt = str(rec.get("filter", "none"))
            names = rec.get("metrics")
            if not isinstance(names, list):
                raise DataError(f"{path}:{lineno}: field 'metrics': expected a list of metric names, got {names!r}")
            qhash = f"{rec.get('doc_hash', '')}:{rec.get('prompt_hash', '')}"
            question = str(rec["doc_id"])
            for name in names:
                value = rec.get(name)
                num = _number(value)
                metric = f"{name},{filt}"
                if num is not None:
                    out.add(benchmark, task, config, seed, 0, question, None, metric, num, qhash)
                elif isinstance(value, list) and value and all(_number(v) is not None for v in value):
                    for k, v in enumerate(value):
                        out.add(benchmark, task, config, seed, k, question, None, metric, float(v), qhash)
                else:
                    skipped.add(metric)
    if skipped:
        out.notes.append(f"{path.name}: metric(s) {', '.join(sorted(skipped))} hold no per-question number "
                         "(a corpus-level metric such as BLEU); left out")


def _lm_eval_files(folder: Path) -> list[Path]:
    """The newest samples file of each task in each folder under ``folder``."""
    newest: dict[tuple[Path, str], Path] = {}
    for p in sorted(folder.rglob("samples_*.jsonl")):
        m = LM_EVAL_SAMPLES.match(p.name)
        if m is None:
            continue
        key = (p.parent, m["task"])
        if key not in newest or m["date"] > LM_EVAL_SAMPLES.match(newest[key].name)["date"]:  # type: ignore[index]
            newest[key] = p
    return sorted(newest.values())


def _lm_eval_model(samples_file: Path) -> str:
    """The model an lm-eval samples file belongs to, from its results file (the same date)."""
    m = LM_EVAL_SAMPLES.match(samples_file.name)
    if m is not None:
        results = samples_file.parent / f"results_{m['date']}.json"
        if results.is_file():
            try:
                data = json.loads(results.read_text(encoding="utf-8"))
                args = (data.get("config") or {}).get("model_args")
                if isinstance(args, str) and "pretrained=" in args:
                    return args.split("pretrained=", 1)[1].split(",", 1)[0]
                if data.get("model_name"):
                    return str(data["model_name"])
            except ValueError:
                pass
    return samples_file.parent.name


# ------------------------------------------------------------------------- Inspect AI


def _is_inspect_json(path: Path) -> bool:
    # A run folder's own files and lm-eval's results are never Inspect logs: not opened.
    if path.suffix != ".json" or path.name.startswith("results_") or path.name in _NOT_LOGS:
        return False
    with path.open("rb") as f:
        head = f.read(4096)
    return b'"eval"' in head and b'"version"' in head


def read_inspect_log(path: Path, out: Samples, *, config: str | None = None, seed: int = 0,
                     benchmark: str = "") -> None:
    """One Inspect AI log (``.eval`` or ``.json``) into ``out``; ``config`` defaults to its model."""
    from benchlab.names.extras import load

    log_module = load("inspect_ai.log", "reading Inspect AI logs")
    scorer_module = load("inspect_ai.scorer", "reading Inspect AI logs")
    try:
        log = log_module.read_eval_log(str(path))
    except Exception as exc:  # Inspect raises plain exceptions of several kinds on a bad file
        raise DataError(f"{path}: not a readable Inspect AI log ({type(exc).__name__}: {exc})") from None
    if log.status != "success":
        out.notes.append(f"{path.name}: the evaluation's status is {log.status!r}; its scored samples are read")
    task = str(log.eval.task).split("/")[-1]
    name = config or str(log.eval.model)
    cluster_key = None
    for scorer in log.eval.scorers or []:
        for metric in scorer.metrics or []:
            options = getattr(metric, "options", None) or {}
            if isinstance(options, dict) and options.get("cluster"):
                cluster_key = str(options["cluster"])
    to_float = scorer_module.value_to_float()
    for sample in log.samples or []:
        if not sample.scores:
            continue
        cluster = None
        if cluster_key is not None:
            meta = sample.metadata or {}
            if meta.get(cluster_key) is None:
                raise DataError(f"{path}: sample {sample.id!r} has no metadata {cluster_key!r}, which the task's "
                                "clustered standard error groups by")
            cluster = str(meta[cluster_key])
        asked = json.dumps([_plain(sample.input), _plain(sample.target)], sort_keys=True, default=str)
        qhash = hashlib.sha256(asked.encode()).hexdigest()
        for scorer_name, score in sample.scores.items():
            value = to_float(score.value)
            out.add(benchmark, task, name, seed, int(sample.epoch), str(sample.id), cluster, scorer_name,
                    float(value), qhash)


def _plain(x: Any) -> Any:
    if isinstance(x, str | int | float | bool) or x is None:
        return x
    if isinstance(x, list):
        return [_plain(v) for v in x]
    dump = getattr(x, "model_dump", None)
    return dump(exclude_none=True, exclude={"id"}) if dump is not None else str(x)


# ------------------------------------------------------------------------- NeMo-Skills


def read_nemo_output(path: Path, out: Samples, *, config: str, task: str | None = None, seed: int = 0,
                     benchmark: str = "") -> None:
    """One NeMo-Skills ``output-rs<k>.jsonl`` into ``out`` (repeat ``k``)."""
    m = NEMO_OUTPUT.match(path.name)
    if m is None:
        raise DataError(f"{path}: not a NeMo-Skills output file (expected output-rs<k>.jsonl)")
    repeat = int(m["k"])
    task = task or path.parent.name
    found = False
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object")
            asked = rec.get("problem", rec.get("question", rec.get("prompt")))
            qhash = None if asked is None else hashlib.sha256(str(asked).encode()).hexdigest()
            ident = rec.get("id", rec.get("question_id"))
            if ident is not None:
                question = str(ident)
            elif qhash is not None:
                # No id: the problem itself names the question, wherever it sits in the file.
                question = HASH_KEY + qhash[:16]
            else:
                question = str(lineno - 1)
            for key, value in rec.items():
                num = _number(value)
                if num is not None and _NEMO_SCORE.search(key) and key not in ("id", "question_id"):
                    out.add(benchmark, task, config, seed, repeat, question, None, key, num, qhash)
                    found = True
    if not found:
        out.notes.append(f"{path}: no correctness field (symbolic_correct, is_correct, ...) on any line")


# ------------------------------------------------------------------------- benchlab eval


#: JSON files of a run folder that are benchlab's own.
_NOT_LOGS = frozenset({METRICS_FILE, PROVENANCE_FILE, "raw_metrics.json"})

#: What marks a folder written by ``benchlab eval``: its nested metrics beside one
#: ``<benchmark>.jsonl`` of responses and verdicts per benchmark (evaluate/oneshot.py).
EVAL_MARKER = "raw_metrics.json"


def read_benchlab_eval(path: Path, out: Samples, *, config: str, seed: int = 0, benchmark: str = "") -> None:
    """One ``<benchmark>.jsonl`` of ``benchlab eval`` into ``out``: per item ``id``, its samples'
    ``correct`` verdicts (the repeats; a sample without a verdict, a model error, is left out)."""
    task = path.stem
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(rec, dict) or "id" not in rec or not isinstance(rec.get("correct"), list):
                raise DataError(f"{path}:{lineno}: expected an object with 'id' and a 'correct' list "
                                "(a benchlab eval record)")
            for k, verdict in enumerate(rec["correct"]):
                num = _number(verdict)
                if num is not None:
                    out.add(benchmark, task, config, seed, k, str(rec["id"]), None, "correct", num, None)


# ------------------------------------------------------------------------- any source


def is_samples_source(path: Path) -> bool:
    """Whether ``path`` holds per-question records rather than a results table: a samples CSV
    (it has a ``question`` column), an Inspect log, a harness's samples file, or a folder without
    a ledger that holds any of them."""
    from benchlab.ledger import DB_NAME

    if path.is_file():
        if path.suffix.lower() == ".csv":
            with path.open(encoding="utf-8", errors="replace") as f:
                header = f.readline()
            return "question" in [h.strip().strip('"') for h in header.split(",")]
        return (path.suffix in (".eval", ".parquet") or _is_inspect_json(path) or bool(LM_EVAL_SAMPLES.match(path.name))
                or bool(NEMO_OUTPUT.match(path.name)))
    if path.is_dir() and not (path / DB_NAME).exists():
        return any(True for _ in harness_files(path))
    return False


def holds_question_records(path: Path, configs: list[str] | None = None) -> bool:
    """Whether ``path`` is a samples source, or a results folder whose compared configs have one
    seed each and whose runs kept per-question records (so a seed-level comparison could only
    be undetermined)."""
    from benchlab.ledger import COMPLETED, DB_NAME, Store

    if is_samples_source(path):
        return True
    if not (path.is_dir() and (path / DB_NAME).exists()):
        return False
    from benchlab.names.run_files import run_dir_of

    with Store.open(path) as store:
        runs = [r for r in store.runs() if r.status == COMPLETED and (configs is None or r.config in configs)]
    seeds: dict[tuple[str, str], int] = {}
    for r in runs:
        seeds[(r.task, r.config)] = seeds.get((r.task, r.config), 0) + 1
    if not runs or max(seeds.values()) > 1:
        return False
    return any(True for _ in harness_files(run_dir_of(path, runs[0].run_id)))


def runs_hold_records(runs: Path, look: int = 3) -> bool:
    """Whether the run directories under ``runs`` kept per-question records, judged on the first
    ``look`` of them: an evaluation benchmark's runs all keep them, and a report of 10,000 runs
    of another kind must not walk every folder to find none."""
    import itertools

    if not runs.is_dir():
        return False
    with os.scandir(runs) as entries:
        folders = [Path(e.path) for e in itertools.islice((e for e in entries if e.is_dir()), look)]
    return any(any(True for _ in harness_files(f)) for f in folders)


def records_signature(runs: Path) -> str | None:
    """A SHA-256 (hex) of the per-question record files under the run directories ``runs``: each
    file's path, kind, size and modification time; None where the runs kept no records
    (:func:`runs_hold_records`). A record file rewritten, added or removed changes it, so the
    report's question-level tables computed before are not taken for current
    (:mod:`benchlab.names.report_tables`)."""
    if not runs_hold_records(runs):
        return None
    digest = hashlib.sha256()
    with os.scandir(runs) as entries:
        folders = sorted(e.name for e in entries if e.is_dir())
    for name in folders:
        for kind, path in harness_files(runs / name):
            try:
                st = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(runs).as_posix()}\0{kind}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def harness_files(folder: Path) -> Iterable[tuple[str, Path]]:
    for p in _lm_eval_files(folder):
        yield "lm_eval", p
    for p in sorted(folder.rglob("*.eval")):
        yield "inspect", p
    for p in sorted(folder.rglob("*.json")):
        if _is_inspect_json(p):
            yield "inspect", p
    for p in sorted(folder.rglob("output-rs*.jsonl")):
        if NEMO_OUTPUT.match(p.name):
            yield "nemo", p
    for marker in sorted(folder.rglob(EVAL_MARKER)):
        for p in sorted(marker.parent.glob("*.jsonl")):
            if p.name != SERIES_FILE:  # a run's own logged curves, not an evaluation's records
                yield "benchlab_eval", p


def read_folder(folder: Path, out: Samples, *, config: str | None = None, seed: int = 0,
                benchmark: str = "") -> int:
    """Every harness file under ``folder`` into ``out``; the number of files read.

    The config of a file is ``config`` when given; else the first folder under ``folder`` on
    its path (``out/step20/...`` is ``step20``), else the model the file names.
    """
    count = 0
    for kind, path in harness_files(folder):
        rel = path.relative_to(folder).parts
        name = config or (rel[0] if len(rel) > 1 else None)
        if kind == "lm_eval":
            read_lm_eval_samples(path, out, config=name or _lm_eval_model(path), seed=seed, benchmark=benchmark)
        elif kind == "inspect":
            read_inspect_log(path, out, config=name, seed=seed, benchmark=benchmark)
        elif kind == "benchlab_eval":
            read_benchlab_eval(path, out, config=name or folder.name, seed=seed, benchmark=benchmark)
        else:
            read_nemo_output(path, out, config=name or folder.name, seed=seed, benchmark=benchmark)
        count += 1
    return count


def read_samples(source: Path | str | Mapping[str, Path | str]) -> tuple[pd.DataFrame, list[str]]:
    """The samples table of ``source`` and notes for the user.

    ``source``: a samples CSV; an Inspect log; an lm-eval samples file; a NeMo-Skills output
    file; a folder of harness outputs (configs named by their first subfolder); a results
    folder with a ledger (the completed runs' directories, with their task, config and seed);
    or a mapping ``{config: path}`` naming each config's folder or file.
    """
    import pandas as pd

    from benchlab.ledger import DB_NAME

    out = Samples()
    if isinstance(source, Mapping):
        for name, p in source.items():
            _read_one(Path(p), out, config=name)
        frames = [out.frame()]
    else:
        path = Path(source)
        if path.is_file() and path.suffix.lower() == ".csv":
            return read_samples_csv(path), []
        if path.is_file() and path.suffix.lower() == ".parquet":
            return read_samples_parquet(path), []
        if path.is_dir() and (path / DB_NAME).exists():
            return _read_ledger(path)
        _read_one(path, out, config=None)
        frames = [out.frame()]
    table = pd.concat(frames, ignore_index=True)
    if table.empty:
        raise DataError(f"{source}: no per-question records found (lm-eval samples_*.jsonl written with "
                        "--log_samples, Inspect AI .eval/.json logs, NeMo-Skills output-rs<k>.jsonl, or a CSV "
                        f"with columns {', '.join(SAMPLE_REQUIRED)})")
    return table, out.notes


def _read_one(path: Path, out: Samples, *, config: str | None) -> None:
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if path.is_dir():
        read_folder(path, out, config=config)
    elif path.suffix == ".eval" or _is_inspect_json(path):
        read_inspect_log(path, out, config=config)
    elif LM_EVAL_SAMPLES.match(path.name):
        read_lm_eval_samples(path, out, config=config or _lm_eval_model(path))
    elif NEMO_OUTPUT.match(path.name):
        read_nemo_output(path, out, config=config or path.parent.name)
    elif path.suffix.lower() in (".csv", ".parquet"):
        table = read_samples_csv(path) if path.suffix.lower() == ".csv" else read_samples_parquet(path)
        if config is not None:
            table["config"] = config
        for col in SAMPLE_COLUMNS:
            out.columns[col].extend(table[col].tolist())
    else:
        raise DataError(f"{path}: not a samples file (lm-eval samples_<task>_<date>.jsonl, Inspect AI .eval "
                        "or .json log, NeMo-Skills output-rs<k>.jsonl, or a samples CSV)")


def _read_ledger(folder: Path) -> tuple[pd.DataFrame, list[str]]:
    """The samples of a results folder's completed runs, each with its run's task, config and seed."""
    from benchlab.ledger import COMPLETED, Store

    with Store.open(folder) as store:
        info = store.benchmark()
        name = info.name if info is not None else folder.name
        runs = [SampleRun(r.run_id, r.task, r.config, int(r.seed)) for r in store.runs() if r.status == COMPLETED]
    return read_runs_samples(folder, runs, str(name))


class SampleRun(NamedTuple):
    """A completed run whose directory may hold per-question records."""

    run_id: str
    task: str
    config: str
    seed: int


def read_runs_samples(folder: Path, runs: Iterable[SampleRun], benchmark: str) -> tuple[pd.DataFrame, list[str]]:
    """The samples of ``runs`` (completed runs of the results folder ``folder``, as the ledger
    lists them), each with its run's task, config and seed: what a reader that has already read
    the ledger (the report, through :func:`benchlab.results.read`) reads without opening it again."""
    from benchlab.names.run_files import run_dir_of

    out = Samples()
    for run in runs:
        before = len(out.columns["value"])
        read_folder(run_dir_of(folder, run.run_id), out, config=run.config, seed=run.seed, benchmark=benchmark)
        # The run's task is the spec's; a harness file's own task name goes to the metric's
        # task only when the run evaluated several (one run, many tasks).
        tasks = set(out.columns["task"][before:])
        if len(tasks) == 1:
            out.columns["task"][before:] = [run.task] * (len(out.columns["value"]) - before)
    return out.frame(), out.notes


def _differing_hash(by: pd.Series) -> tuple[str, str]:
    """The part of the configs' question hashes that differs, named, and each config's value.

    lm-eval's hash is ``<doc_hash>:<prompt_hash>``: when the documents agree and the prompts
    differ, showing the (equal) document hash would hide what changed."""
    parts = {str(c): str(h).split(":") for c, h in by.items()}
    names = ["document hash", "prompt hash"]
    widths = {len(p) for p in parts.values()}
    if widths == {2}:
        differ = [i for i in range(2) if len({p[i] for p in parts.values()}) > 1]
        if len(differ) == 1:
            i = differ[0]
            return names[i], "; ".join(f"{c}: {p[i][:16]}" for c, p in parts.items())
        return "document and prompt hash", "; ".join(f"{c}: {p[0][:16]}:{p[1][:16]}" for c, p in parts.items())
    return "question hash", "; ".join(f"{c}: {str(h)[:16]}" for c, h in by.items())


def check_pairing(table: pd.DataFrame, *, drop: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """Refuse questions asked differently by two configs (their ``question_hash`` differs).

    With ``drop=True`` such questions are left out of every config instead, with a warning per
    task. Rows without a hash are trusted.
    """
    if "question_hash" not in table.columns or table["question_hash"].isna().all():
        return table, []
    keyed = table.dropna(subset=["question_hash"])
    counts = keyed.groupby(["task", "question"], sort=False)["question_hash"].nunique()
    bad = counts[counts > 1]
    if bad.empty:
        return table, []
    if not drop:
        task, question = bad.index[0]
        rows = keyed[(keyed["task"] == task) & (keyed["question"] == question)]
        by = rows.groupby("config", sort=True)["question_hash"].first()
        what, shown = _differing_hash(by)
        raise DataError(f"task '{task}' question '{question}' was asked differently by the configs "
                        f"({what} {shown}); {len(bad)} question(s) differ in all. Pairing "
                        "them would compare different questions: re-run on the same data, or "
                        "--drop-changed to leave them out")
    warnings = []
    for task, n in bad.groupby(level=0).size().items():
        warnings.append(f"{task}: {n} question(s) asked differently by the configs (their document or prompt "
                        "hash differs) left out of every config")
    key = table.set_index(["task", "question"]).index
    return table[~key.isin(bad.index)].reset_index(drop=True), warnings


def load_samples(source: Path | str, *, drop_changed: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The samples table of ``source`` (:func:`read_samples`), its questions checked to be asked alike
    by every config (:func:`check_pairing`; ``drop_changed`` leaves out those that are not instead of
    refusing them), and the notes of both, in that order."""
    table, notes = read_samples(source)
    table, warnings = check_pairing(table, drop=drop_changed)
    return table, [*notes, *warnings]
