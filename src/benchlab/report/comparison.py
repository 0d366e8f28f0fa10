"""``benchlab.compare``: a candidate config against the baseline, the library call behind
``benchlab compare``.

One function assembles a results folder's (or a long-format CSV's) comparison: the spec's
baseline, primary metric, goals, reference scores and metric ranges, every planned seed accounted
for, or the per-question records where the runs kept them. The command prints what it returns;
a notebook shows the same object as a table (:meth:`Comparison._repr_html_`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchlab.errors import DataError
from benchlab.names.benchmark_info import goal_of
from benchlab.names.results_files import RESULTS_CSV

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.stats.question_table import QuestionAnalysis
    from benchlab.stats.results_analysis import ResultsAnalysis

Level = Literal["auto", "seeds", "questions"]


@dataclass(frozen=True)
class Comparison:
    """A comparison at one level: over seeds (``seeds``, the one
    :class:`~benchlab.stats.results_analysis.ResultsAnalysis` narrowed to the pair)
    or paired over questions (``questions``, a :class:`~benchlab.stats.question_table.QuestionAnalysis`).

    ``to_json()`` is exactly what ``benchlab compare --json`` prints (without the final newline)."""

    level: Literal["seeds", "questions"]
    seeds: ResultsAnalysis | None = None
    questions: QuestionAnalysis | None = None
    goal: str = "max"

    def to_json(self) -> str:
        if self.seeds is not None:
            return self.seeds.to_json()
        assert self.questions is not None
        return json.dumps(self.questions.to_json(), indent=2, default=str, allow_nan=False)

    @property
    def warnings(self) -> list[str]:
        """The analysis's warnings, as the command prints them."""
        inner = self.seeds if self.seeds is not None else self.questions
        return list(inner.warnings) if inner is not None else []

    def _repr_html_(self) -> str:
        from benchlab.report.notebook import comparison_html

        return comparison_html(self)


def compare(
    results: Path | str,
    *,
    candidate: str,
    baseline: str | None = None,
    metric: str | None = None,
    goal: str | None = None,
    summary: str = "final",
    align: str | None = None,
    normalize: str = "none",
    reps: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    failed_as: str = "exclude",
    level: Level = "auto",
    drop_changed: bool = False,
    effect: float | None = None,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` on a results folder (or a long-format CSV).

    Paired by seed; or paired by question where the runs kept per-question records (lm-eval
    samples, Inspect AI logs, NeMo-Skills outputs) and ``level`` is ``auto`` or ``questions``.
    Defaults come from the spec the folder ran: baseline, primary metric, goals, reference
    scores, declared metric ranges. Raises :class:`~benchlab.errors.DataError` for a config the
    folder does not hold (naming those it does).
    """
    folder = Path(results)
    if level != "seeds":
        from benchlab.collect.samples import holds_question_records

        if level == "questions" or holds_question_records(
                folder, None if baseline is None else [baseline, candidate]):
            return _compare_questions(folder, baseline=baseline, candidate=candidate, metric=metric, goal=goal,
                                      alpha=alpha, drop_changed=drop_changed, effect=effect)
    from benchlab.stats.results_analysis import analyze_table
    from benchlab.stats.table import AnalysisOptions

    df, info = load_table(folder)
    goals: str | dict[str, str] = goal if goal is not None else "max"
    references = None
    planned = None
    failed_runs: list[Any] = []
    ranges = None
    assume_normal: list[str] = []
    if info is not None:
        from benchlab.results import ledger_seeds
        from benchlab.stats.ranges import metric_ranges, normal_metrics

        metric = metric or info.primary
        baseline = baseline or info.baseline
        goals = goal if goal is not None else dict(info.goal)
        references = dict(info.references)
        planned, failed_runs = ledger_seeds(folder)
        ranges = metric_ranges(info.spec)
        assume_normal = normal_metrics(info.spec)
    if baseline is None:
        raise DataError(f"{folder}: no baseline in the spec; give --baseline")
    pair = [baseline, candidate]
    if info is not None:
        refuse_not_in_spec(df, pair, folder)
    check_configs(df, pair, folder, failed=[c for _, c, _ in failed_runs])
    # Every config of the folder is analysed, then the pair kept: Holm's family is then the one
    # `analyze` and the report use (every task and candidate of the metric against the baseline),
    # and a curve summary is taken on one step range per task, whichever config it is compared with.
    options = AnalysisOptions(
        baseline=baseline, metric=metric, goal=goals, reps=reps, seed=seed,  # type: ignore[arg-type]
        summary=summary, alpha=alpha, normalize=normalize, align=align,  # type: ignore[arg-type]
        references=references, source=str(folder), ranges=ranges, assume_normal=assume_normal)
    analysis = analyze_table(df, info, planned=planned or None, failed_runs=failed_runs, failed_as=failed_as,
                             options=options)
    return Comparison("seeds", seeds=analysis.of_pair(baseline, candidate), goal=analysis.goal)


def _compare_questions(folder: Path, *, baseline: str | None, candidate: str, metric: str | None,
                       goal: str | None, alpha: float, drop_changed: bool, effect: float | None) -> Comparison:
    from benchlab.collect.samples import check_pairing, read_samples
    from benchlab.results import DB_NAME
    from benchlab.stats.question_table import analyze_questions

    goals: str | dict[str, str] = goal if goal is not None else "max"
    if folder.is_dir() and (folder / DB_NAME).exists():
        from benchlab import results as results_module

        info = results_module.info(folder)
        baseline = baseline or info.baseline
        metric = metric or info.primary
        goals = goal if goal is not None else dict(info.goal)
    if baseline is None:
        raise DataError(f"{folder}: give --baseline (the config the candidate is compared with)")
    if effect is not None and effect <= 0:
        raise DataError(f"--effect: expected a difference > 0 in the metric's units, got {effect}")
    table, notes = read_samples(folder)
    table, pairing = check_pairing(table, drop=drop_changed)
    # Every candidate is compared, so that Holm's family is the one `analyze` and the report use
    # (every task and candidate of the metric); the comparison then keeps the one asked for.
    result = analyze_questions(table, baseline=baseline, candidates=None, metric=metric, goal=goals,
                               alpha=alpha, effect=effect)
    have = sorted({r.config for r in result.summary})
    if candidate not in have:
        raise DataError(f"no config {candidate!r} in the samples; configs are {', '.join(have)}")
    result.comparisons = [c for c in result.comparisons if c.candidate == candidate]
    result.warnings[:0] = [*notes, *pairing]
    chosen = goal_of(goals, metric or "")
    return Comparison("questions", questions=result, goal=chosen)


def load_table(path: Path) -> tuple[pd.DataFrame, Any]:
    """A table from a long-format CSV file, or from a results folder (with its benchmark info, else None)."""
    if path.is_file() and path.suffix.lower() == ".csv":
        return read_csv(path), None
    from benchlab import results

    return results.load(path), results.info(path)


def read_csv(path: Path) -> pd.DataFrame:
    """A long-format CSV, or a one-line :class:`~benchlab.errors.DataError` naming what is wrong."""
    import pandas as pd

    if path.is_dir():
        hint = f"; its table of runs is {path / RESULTS_CSV}" if (path / RESULTS_CSV).is_file() else ""
        raise DataError(f"{path}: is a folder; expected a long-format CSV{hint}")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty; expected a CSV with a header row") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV ({str(exc).strip()})") from None


def refuse_not_in_spec(df: pd.DataFrame, configs: list[str], results: Path) -> None:
    """A config whose runs the ledger keeps but the spec no longer names is not compared: its
    numbers come from another version of the benchmark."""
    from benchlab.results import outside_spec_runs

    have = set(df["config"].astype(str))
    wanted = [c for c in configs if c not in have]
    if not wanted:
        return
    outside = outside_spec_runs(results)
    for config in wanted:
        n = outside.get(config, 0)
        if n:
            raise DataError(f"{results}: config {config!r} is not in the spec as last run; its {n} runs are "
                            "kept in the ledger but not compared (`benchlab status --all` lists them; "
                            "benchlab.load(..., all_runs=True) reads them)")


def check_configs(df: pd.DataFrame, configs: list[str], source: Path, failed: list[str] | None = None) -> None:
    """A :class:`~benchlab.errors.DataError` naming the configs asked for that the table lacks."""
    from benchlab.stats import validate_table

    if "config" not in df.columns:
        validate_table(df, str(source))  # names the missing columns
    # A config whose every run failed is known to the ledger: it is compared, without a verdict.
    have = list(dict.fromkeys([*df["config"].astype(str), *(failed or [])]))
    missing = [c for c in configs if c not in have]
    if missing:
        raise DataError(f"{source}: no config {', '.join(map(repr, missing))}; configs are "
                        f"{', '.join(have) or 'none (no completed runs)'}")
