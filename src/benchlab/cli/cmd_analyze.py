"""`benchlab analyze`, `compare`, `variance`, `power`: statistics of a CSV or a results folder.

Parse, call :mod:`benchlab.stats`, print: rich tables by default, JSON with ``--json``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from benchlab.cli.app import app, console, err_console, print_json
from benchlab.names.choices import (
    AlignChoice,
    FailedAsChoice,
    GoalChoice,
    LevelChoice,
    MethodChoice,
    NormalizeChoice,
    SummaryChoice,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.stats.results_analysis import ResultsAnalysis
    from benchlab.stats.runvalues import RunValues


def _read_final_values(path: Path) -> RunValues | None:
    """A CSV of final values, one finite value per run, read without pandas (which takes half
    of a quick ``analyze``'s time to import); None for any other table, left to :func:`_read_csv`."""
    from benchlab.stats.runvalues import parse_final_values

    if not path.is_file():
        return None
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return parse_final_values(f)
    except (UnicodeDecodeError, ValueError):  # csv.Error is a ValueError; pandas names the problem
        return None


def _read_csv(path: Path) -> pd.DataFrame:
    from benchlab.report.comparison import read_csv

    return read_csv(path)


def _read_references(path: Path | None) -> dict[str, tuple[float, float]] | None:
    """A CSV with columns ``task, low, high``."""
    if path is None:
        return None
    import pandas as pd

    from benchlab.errors import DataError

    refs = _read_csv(path)
    missing = [c for c in ("task", "low", "high") if c not in refs.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; expected task, low, high")
    out = {}
    for col in ("low", "high"):
        values = pd.to_numeric(refs[col], errors="coerce")
        if values.isna().any():
            row = int(values.isna().to_numpy().nonzero()[0][0])
            raise DataError(f"{path}: column {col!r} must hold numbers; row {row + 1} has "
                            f"{refs[col].iloc[row]!r}")
        refs[col] = values
    for task, low, high in refs[["task", "low", "high"]].itertuples(index=False, name=None):
        out[str(task)] = (float(low), float(high))
    return out


def _load(path: Path) -> tuple[pd.DataFrame, Any]:
    from benchlab.report.comparison import load_table

    return load_table(path)


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _ci(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """A value over its confidence interval, on two lines so that a narrow table wraps no number."""
    return f"{_fmt(value, digits)}\n[{_fmt(low, digits)}, {_fmt(high, digits)}]"


def _boot_header(report: ResultsAnalysis) -> str:
    """The bootstrap column's header, named for its method (bootstrap-t unless --method)."""
    method = report.methods.boot_ci if report.methods is not None else ""
    return "bootstrap-t\nCI" if method.startswith("bootstrap-t") else f"bootstrap\nCI ({method})"


def _print_report(report: ResultsAnalysis, failed_as: str | None = None) -> None:
    from rich.markup import escape

    from benchlab.cli.tables import Column, print_table
    from benchlab.report.columns import COLUMNS

    name = Column
    # The columns every table of a config's numbers shows (report, dashboard, here), then this
    # command's own: the bootstrap interval, the variance flag and the rank.
    rows = [[r.task, r.config, r.metric, *(c.cell(r) for c in COLUMNS),
             f"[{_fmt(r.boot_ci_low)},\n{_fmt(r.boot_ci_high)}]", _fmt(r.high_variance), _fmt(r.rank)]
            for r in report.summary]
    print_table(console, "Per task and config", [
        name("task", numeric=False, key=True), name("config", numeric=False, key=True),
        name("metric", numeric=False, key=True), *(name(c.title(), numeric=c.numeric) for c in COLUMNS),
        name(_boot_header(report)), name("high\nvar"), name("rank")], rows)
    if report.comparisons:
        base = report.comparisons[0].baseline
        rows = []
        caveats = []
        for c in report.comparisons:
            seeds = (f"{c.seeds.baseline_seeds}, {c.seeds.candidate_seeds}"
                     if c.seeds is not None and c.seeds.baseline_seeds else "–")
            signif = "undetermined" if c.significant is None else _fmt(c.significant)
            if c.seeds is not None and c.seeds.caveat:
                signif += "\n(!)"
                caveats.append(f"{c.task} {c.metric}: {c.seeds.caveat}")
            rows.append([c.task, c.metric, c.candidate, signif, seeds,
                         _fmt(c.paired), str(c.n), _ci(c.mean_diff, c.diff_ci_low, c.diff_ci_high),
                         _fmt(c.pvalue, 3), _fmt(c.p_holm, 3),
                         "–" if c.cohens_d is None
                         else f"{'d_z' if c.paired else 'd'} {_fmt(c.cohens_d, 3)}",
                         _fmt(c.prob_improvement, 3)])
        print_table(console, f"Candidate vs baseline {base} (diff = candidate - baseline)", [
            name("task", numeric=False, key=True), name("metric", numeric=False, key=True),
            name("candidate", numeric=False, key=True), name("signif."), name("seeds\n(b, c)"),
            name("paired"), name("n"), name("diff\n[95% CI]"), name("p"), name("p\nHolm"), name("effect"),
            name("P(better)")], rows)
        families = list(dict.fromkeys(c.holm_family for c in report.comparisons if c.holm_family))
        if families:
            console.print(escape("p Holm: adjusted over every task and candidate of the metric against the "
                                 "baseline, one family per metric: " + "; ".join(families)))
        for line in caveats:
            console.print(f"(!) lost seeds: {escape(line)}")
        deciders = dict.fromkeys(c.decided_by for c in report.comparisons if c.decided_by)
        console.print("verdicts decided by: " + (escape("; ".join(deciders)) if deciders else "none (every "
                      "verdict undetermined; the warnings say why)"))
        if failed_as is not None:
            treatment = ("excluded: each verdict rests on the seeds that completed"
                         if failed_as == "exclude" else "scored as the worst value")
            console.print(f"failed seeds: {treatment} (--failed-as {failed_as})")
    if report.aggregate:
        scale = {"none": "raw scores", "references": "scores normalised by reference scores",
                 "observed": "scores min–max normalised over the configs compared",
                 "mixed": "scores normalised by reference or observed values"}
        method = report.normalization.method if report.normalization is not None else None
        print_table(console, f"Across tasks ({scale.get(method or '', 'scores')}, stratified bootstrap CIs)", [
            name("config", numeric=False, key=True), name("IQM"), name("median"), name("mean"),
            name("optimality\ngap")],
            [[a.config, *(_ci(e.value, e.ci_low, e.ci_high)
                          for e in (a.iqm, a.median, a.mean, a.optimality_gap))]
             for a in report.aggregate])
    _print_warnings(report.warnings)


def _output(report: ResultsAnalysis, as_json: bool, failed_as: str | None = None) -> None:
    if as_json:
        sys.stdout.write(report.to_json() + "\n")
    else:
        _print_report(report, failed_as)


def _print_warnings(warnings: Sequence[str]) -> None:
    from rich.markup import escape

    for w in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w)}")


@contextmanager
def _flags() -> Iterator[None]:
    """The library names its arguments (``summary``); the CLI's messages name flags (``--summary``)."""
    from benchlab.errors import BadArgument, DataError

    try:
        yield
    except BadArgument as exc:
        if exc.what is not None:  # about something other than a flag, e.g. a metric's goal in the spec
            raise
        raise DataError(exc.message_for("--" + exc.argument.replace("_", "-"))) from None


TableArg = typer.Argument(
    ..., help="Long-format CSV: task, config, seed, value (optional: metric, step, benchmark)."
)
ResultsArg = typer.Argument(..., help="Results folder (or a long-format CSV).")
CsvOpt = typer.Option(None, "--csv", help="Also write the comparisons table to this CSV file.")


def _write_csv(path: Path | None, report: Any) -> None:
    """The comparisons of ``report`` (one flat row each) as CSV at ``path``."""
    if path is None:
        return
    from benchlab.cli.cmd_diff import write_csv

    rows = [c.to_json() for c in report.comparisons]
    columns = list(dict.fromkeys(k for row in rows for k in row)) or ["task", "metric", "baseline", "candidate"]
    write_csv(path, rows, columns)
PilotArg = typer.Argument(None, help="Pilot results folder or CSV (not needed with --effect).")
ReferencesOpt = typer.Option(
    None, help="CSV task,low,high normalising the aggregate (default: --normalize)."
)
SUMMARY_HELP = "Learning curves to one number: final|auc|max|slope."
ALIGN_HELP = ("Curves summarised on each run's own curve (own; default for final, max) or on the "
              "step range all runs cover (common; default for auc, slope).")
NORMALIZE_HELP = ("Tasks without reference scores: none (raw scores, default) or observed "
                  "(min-max over the configs compared).")
METHOD_HELP = "Bootstrap CI of a mean: studentized (bootstrap-t)|percentile|bca."
FAILED_AS_HELP = ("Failed seeds (NaN values, failed runs): exclude (judge on the completed ones, "
                  "with a caveat) or worst (score them as the worst value).")


DROP_CHANGED_HELP = ("Questions whose document or prompt hash differs between configs: leave them out with a "
                     "warning (default: refuse to compare).")
LEVEL_HELP = ("What the comparison pairs: seeds (runs), questions (per-question records), or auto: questions "
              "when RESULTS holds per-question records and the configs have one seed each.")


RANGE_HELP = ("Values a metric can take, METRIC=LOW,HIGH (or LOW,HIGH for every metric, or "
              "TASK/METRIC=LOW,HIGH for one task); its intervals are cut there. Repeatable.")


ASSUME_NORMAL_HELP = ("Accept the t-test's verdict for METRIC (TASK/METRIC, or * for every metric) without a "
                      "range, assuming its values are close to normal; without a range or this, a significant "
                      "t verdict is withheld (docs/statistics.md). Repeatable.")


def _ranges(values: list[str] | None, table: pd.DataFrame | RunValues) -> dict[str, tuple[float, float]]:
    """``--range acc=0,1`` / ``--range 0,1`` into ``{metric: (low, high)}``."""
    from benchlab.errors import DataError
    from benchlab.stats.runvalues import RunValues

    out: dict[str, tuple[float, float]] = {}
    if isinstance(table, RunValues):
        metrics = list(dict.fromkeys(table.metric))
    else:
        metrics = (list(dict.fromkeys(table["metric"].astype(str))) if "metric" in table.columns
                   else ["value"])
    for text in values or []:
        name, _, bounds = text.rpartition("=")
        try:
            low, high = (float(x) for x in bounds.split(","))
        except ValueError:
            raise DataError(f"--range: expected METRIC=LOW,HIGH or LOW,HIGH; got {text!r}") from None
        if not low < high:
            raise DataError(f"--range {text}: expected LOW < HIGH")
        for metric in [name] if name else metrics:
            out[metric] = (low, high)
    return out


def _analyze_pairs(source: Path, pairs_csv: Path, *, metric: str | None, goal: str, summary: str, alpha: float,
                   reps: int, seed: int, as_json: bool, csv: Path | None, value_range: list[str] | None = None,
                   assume_normal: list[str] | None = None) -> None:
    """``analyze --pairs``: each metric over explicit control/candidate pairs of runs."""
    from benchlab.errors import DataError
    from benchlab.report.pairs import compare_pairs, read_pairs

    goals: str | dict[str, str] = goal
    assumed = list(assume_normal or [])
    ranges: dict[str, tuple[float, float]] = {}
    if source.is_dir():
        from benchlab import results
        from benchlab.stats.ranges import metric_ranges, normal_metrics

        table = results.load(source, all_runs=True)
        info = results.info(source)
        goals = {**info.goal}
        ranges, assumed = metric_ranges(info.spec), [*normal_metrics(info.spec), *assumed]
    else:
        table = _read_csv(source)
        if "run_id" not in table.columns and "run" in table.columns:
            table = table.rename(columns={"run": "run_id"})
    if table.empty:
        raise DataError(f"{source}: no completed run")
    if "metric" not in table.columns:
        table = table.assign(metric="value")
    ranges.update(_ranges(value_range, table))
    rows = compare_pairs(table, read_pairs(pairs_csv), metric=metric, goal=goals, summary=summary, alpha=alpha,
                         reps=reps, seed=seed, ranges=ranges, assume_normal=assumed)
    if csv is not None:
        from benchlab.cli.cmd_diff import write_csv

        data = [r.to_json() for r in rows]
        write_csv(csv, data, [k for k in (data[0] if data else {"metric": 0}) if k != "warnings"])
    if as_json:
        print_json({"pairs": [r.to_json() for r in rows]})
        return
    from benchlab.cli.tables import Column, print_table

    print_table(console, f"{len(read_pairs(pairs_csv))} explicit pairs (candidate - control, paired)",
                [Column("metric", numeric=False, key=True), Column("n"), Column("control"), Column("candidate"),
                 Column("diff\n[95% CI]"), Column("p (Holm)"), Column("significant", numeric=False),
                 Column("decided by", numeric=False)],
                [[r.metric, str(r.n), _fmt(r.mean_control), _fmt(r.mean_candidate),
                  _ci(r.mean_diff, r.diff_ci_low, r.diff_ci_high), _fmt(r.p_holm),
                  "undetermined" if r.significant is None else _fmt(r.significant), r.decided_by or "–"]
                 for r in rows])
    _print_warnings([w for r in rows for w in r.warnings])


@app.command()
def analyze(
    table: Path = TableArg,
    baseline: str | None = typer.Option(None, help="Config to compare the others with."),
    metric: str | None = typer.Option(None, help="Analyse only this metric (default: all)."),
    goal: GoalChoice = typer.Option(GoalChoice.MAX, help="max: higher is better; min: lower is better."),
    summary: SummaryChoice = typer.Option(SummaryChoice.FINAL, help=SUMMARY_HELP),
    align: AlignChoice | None = typer.Option(None, help=ALIGN_HELP),
    references: Path | None = ReferencesOpt,
    normalize: NormalizeChoice = typer.Option(NormalizeChoice.NONE, help=NORMALIZE_HELP),
    reps: int = typer.Option(10_000, min=100, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Seed of every random procedure."),
    method: MethodChoice = typer.Option(MethodChoice.STUDENTIZED, help=METHOD_HELP),
    alpha: float = typer.Option(0.05, min=0.0, max=1.0, help="Significance level."),
    failed_as: FailedAsChoice = typer.Option(FailedAsChoice.EXCLUDE, "--failed-as", help=FAILED_AS_HELP),
    value_range: list[str] = typer.Option(None, "--range", help=RANGE_HELP),
    assume_normal: list[str] = typer.Option(None, "--assume-normal", help=ASSUME_NORMAL_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    csv: Path | None = CsvOpt,
    pairs: Path | None = typer.Option(None, "--pairs", help="CSV of explicit control,candidate pairs of runs "
                                      "(run ids or names such as digits/mlp/s3); TABLE may then be a results "
                                      "folder, or a CSV with a run_id or run column."),
    drop_changed: bool = typer.Option(False, "--drop-changed", help=DROP_CHANGED_HELP),
) -> None:
    """Statistics of any long-format CSV (W&B, MLflow, a paper's table), or of per-question records
    (lm-eval samples, Inspect AI logs, NeMo-Skills outputs, a samples CSV with a question column)."""
    if pairs is None:
        from benchlab.collect.samples import is_samples_source

        if is_samples_source(table):
            from benchlab.cli.questions import run_questions

            run_questions(table, baseline=baseline, candidates=None, metric=metric, goal=goal.value, alpha=alpha,
                          drop_changed=drop_changed, as_json=as_json, csv=csv)
            return
    if pairs is not None:
        _analyze_pairs(table, pairs, metric=metric, goal=goal.value, summary=summary.value, alpha=alpha,
                       reps=reps, seed=seed, as_json=as_json, csv=csv, value_range=value_range,
                       assume_normal=assume_normal)
        return
    from benchlab.names.long_format import split_status

    final = _read_final_values(table) if summary == SummaryChoice.FINAL else None
    df = final if final is not None else _read_csv(table)
    planned: dict[tuple[str, str], list[int]] | None = None
    failed_runs: list[tuple[str, str, int]] = []
    if final is None:
        # A published results.csv lists failed and missing runs too: every seed is accounted for.
        df, planned, failed_runs = split_status(df)
    from benchlab.stats import AnalysisOptions, analyze_table

    with _flags():
        options = AnalysisOptions(
            baseline=baseline, metric=metric, goal=goal.value,  # type: ignore[arg-type]
            reps=reps, seed=seed, summary=summary.value, alpha=alpha,  # type: ignore[arg-type]
            method=method.value, normalize=normalize.value, align=align and align.value,  # type: ignore[arg-type]
            references=_read_references(references), source=str(table),
            ranges=_ranges(value_range, df), assume_normal=list(assume_normal or []))
        report = analyze_table(df, None, planned=planned, failed_runs=failed_runs, failed_as=failed_as.value,
                               options=options)
    _write_csv(csv, report)
    _output(report, as_json, failed_as.value)


@app.command()
def compare(
    results: Path = ResultsArg,
    baseline: str | None = typer.Option(None, help="Baseline config (default: the spec's)."),
    candidate: str = typer.Option(..., help="Candidate config."),
    metric: str | None = typer.Option(None, help="Metric (default: the primary one)."),
    goal: GoalChoice | None = typer.Option(None, help="max|min (default: the spec's, else max)."),
    summary: SummaryChoice = typer.Option(SummaryChoice.FINAL, help=SUMMARY_HELP),
    align: AlignChoice | None = typer.Option(None, help=ALIGN_HELP),
    normalize: NormalizeChoice = typer.Option(NormalizeChoice.NONE, help=NORMALIZE_HELP),
    reps: int = typer.Option(10_000, min=100, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Seed of every random procedure."),
    alpha: float = typer.Option(0.05, min=0.0, max=1.0, help="Significance level."),
    failed_as: FailedAsChoice = typer.Option(FailedAsChoice.EXCLUDE, "--failed-as", help=FAILED_AS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    csv: Path | None = CsvOpt,
    level: LevelChoice = typer.Option(LevelChoice.AUTO, help=LEVEL_HELP),
    drop_changed: bool = typer.Option(False, "--drop-changed", help=DROP_CHANGED_HELP),
    effect: float | None = typer.Option(None, help="With per-question records: the questions (or samples "
                                        "per question) needed to detect a difference this large."),
) -> None:
    """Compare a candidate config with the baseline, paired by seed, or paired by question on
    per-question records (lm-eval samples, Inspect AI logs, NeMo-Skills outputs, a samples CSV)."""
    from benchlab.report.comparison import compare as compare_configs

    with _flags():
        comparison = compare_configs(
            results, candidate=candidate, baseline=baseline, metric=metric,
            goal=goal.value if goal is not None else None, summary=summary.value,
            align=align and align.value, normalize=normalize.value, reps=reps, seed=seed, alpha=alpha,
            failed_as=failed_as.value, level=level.value, drop_changed=drop_changed, effect=effect)
    if comparison.questions is not None:
        from benchlab.cli.questions import show_questions

        show_questions(comparison.questions, as_json=as_json, csv=csv)
        return
    assert comparison.seeds is not None
    _write_csv(csv, comparison.seeds)
    _output(comparison.seeds, as_json, failed_as.value)


@app.command()
def variance(
    results: Path = ResultsArg,
    config: str = typer.Option(..., help="Config whose pilot seeds to analyse."),
    metric: str | None = typer.Option(None, help="Metric (default: the primary one)."),
    threshold: float = typer.Option(0.05, min=0.0, help="Target coefficient of variation."),
    # Kept so existing scripts still run; the CV is now a closed form with no resampling.
    reps: int = typer.Option(2_000, min=100, hidden=True, help="Ignored."),
    seed: int = typer.Option(0, hidden=True, help="Ignored."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    output: Path | None = typer.Option(None, "--output", help="Write the two-panel figure (AUC and slope: "
                                       "CV of the mean vs seeds) to this file (.png, .pdf, .svg)."),
) -> None:
    """Coefficient of variation of the mean vs number of seeds, of the final value, the AUC and
    the slope; the smallest N under a threshold."""
    from rich.table import Table

    from benchlab.stats import variance_analysis

    df, info = _load(results)
    if info is not None:
        metric = metric or info.primary
    report = variance_analysis(df, config, metric, threshold, reps, seed, source=str(results))
    plot_notes: list[str] = []
    if output is not None:
        from benchlab.report.variance_plot import plot_variance

        plot_notes = plot_variance(report, output)
    if as_json:
        print_json(report.to_json())
        return
    table = Table(title=f"{config} {report.metric}: CV of the mean vs seeds "
                  f"(threshold {threshold:g})", title_justify="left")
    for col in ("task", "seeds", "summary", "CV at N = 1, 2, …", "smallest N"):
        table.add_column(col)
    for row in report.tasks:
        for name, part in (("final", row.final), ("auc", row.auc), ("slope", row.slope)):
            if part is None:
                continue
            cvs = ", ".join(_fmt(c, 2) for c in part.cv)
            table.add_row(row.task, str(row.n_seeds), name, cvs, _fmt(part.smallest_n))
    console.print(table)
    if output is not None:
        console.print(f"figure: {output}")
    _print_warnings([*report.warnings, *plot_notes])


@app.command()
def power(
    results: Path | None = PilotArg,
    effect: float | None = typer.Option(None, help="Standardised paired effect d_z = mean "
                                        "difference / sd of the differences."),
    baseline: str | None = typer.Option(None, help="Pilot baseline config."),
    candidate: str | None = typer.Option(None, help="Pilot candidate config."),
    metric: str | None = typer.Option(None, help="Metric (default: the primary one)."),
    summary: str = typer.Option("final", help=SUMMARY_HELP),
    alpha: float = typer.Option(0.05, min=0.0, max=1.0, help="Two-sided significance level."),
    target: float = typer.Option(0.8, "--power", min=0.0, max=1.0, help="Wanted power."),
    min_effect: float | None = typer.Option(None, "--min-effect", help="Smallest difference of "
                                            "interest, in the metric's units: sizes the "
                                            "experiment with the pilot's spread."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
) -> None:
    """Paired seeds needed to detect an effect (given, or estimated from pilot runs)."""
    from rich.table import Table

    from benchlab.errors import DataError
    from benchlab.stats import power_analysis

    df = None
    if effect is None:
        if results is None:
            raise DataError(
                "power: give --effect, or a pilot RESULTS with --baseline and --candidate"
            )
        df, info = _load(results)
        if info is not None:
            metric = metric or info.primary
            baseline = baseline or info.baseline
    report = power_analysis(effect, df, baseline, candidate, metric, summary, alpha, target,
                            source=str(results), min_effect=min_effect)
    if as_json:
        print_json(report.to_json())
        return
    table = Table(title=f"Paired seeds for power {target:g} at alpha {alpha:g}",
                  title_justify="left")
    for col in ("task", "effect d_z", "95% CI of d_z", "pilot pairs", "seeds needed",
                "at the CI's end nearest 0"):
        table.add_column(col)
    if any(row.sd_used is not None for row in report.rows):
        table.add_column("sd used (pilot's)")
    for row in report.rows:
        extra = [] if row.sd_used is None else [f"{_fmt(row.sd_used, 4)} ({_fmt(row.sd_observed, 4)})"]
        table.add_row(_fmt(row.task), _fmt(row.effect, 3),
                      "–" if row.effect_ci_low is None
                      else f"[{_fmt(row.effect_ci_low, 3)}, {_fmt(row.effect_ci_high, 3)}]",
                      _fmt(row.pilot_pairs), _fmt(row.seeds), _fmt(row.seeds_conservative), *extra)
    console.print(table)
    _print_warnings(list(report.warnings))
