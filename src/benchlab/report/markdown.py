"""BENCHMARK_REPORT.md: the report a reviewer reads, rendered from a Jinja2 template."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np
import yaml

from benchlab.report.tables import describe, fmt
from benchlab.results import BenchmarkInfo

if TYPE_CHECKING:
    import pandas as pd

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("benchlab.report", "templates"),
    autoescape=False,
    keep_trailing_newline=True,
    trim_blocks=False,
    lstrip_blocks=False,
    undefined=jinja2.StrictUndefined,
)


@dataclass
class ReportData:
    """Everything the report is made from, gathered once."""

    info: BenchmarkInfo
    finals: pd.DataFrame
    failures: list[dict[str, Any]] = field(default_factory=list)
    hardware: str = "unknown"
    git: dict[str, Any] = field(default_factory=dict)
    benchlab_version: str = ""
    plots: list[dict[str, str]] = field(default_factory=list)
    analysis: dict[str, Any] | None = None  # the output of benchlab.stats, when available


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _verdict(row: dict[str, Any], goal: str) -> str:
    """'better' / 'worse' only when the comparison is significant, else 'none' / 'undetermined'."""
    if row.get("significant") is None:
        return "undetermined"
    if not row["significant"] or row.get("mean_diff") is None:
        return "none"
    up = row["mean_diff"] > 0
    return "better" if up == (goal == "max") else "worse"


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _summary_sentences(data: ReportData, desc: pd.DataFrame) -> str:
    info = data.info
    goal = info.goal.get(info.primary, "max")
    prim = desc[desc["is_primary"]]
    if prim.empty:
        return "No run has completed yet, so there is nothing to compare."
    best = prim[prim["rank"] == 1]
    wins = best.groupby("config", sort=False)["task"].apply(list).to_dict()
    n_tasks = prim["task"].nunique()
    top_cfg, top_tasks = max(wins.items(), key=lambda kv: len(kv[1]))
    where = f" ({', '.join(top_tasks)})" if len(top_tasks) <= 4 else ""
    parts = [
        f"**{top_cfg}** has the best mean {info.primary} on {len(top_tasks)} of {n_tasks} "
        f"task{'s' if n_tasks != 1 else ''}{where}."
    ]
    comparisons = [
        r for r in (data.analysis or {}).get("comparisons", []) if r.get("metric") == info.primary
    ]
    if comparisons and top_cfg != info.baseline:
        mine = [r for r in comparisons if r["candidate"] == top_cfg]
        groups: dict[str, list[str]] = {"better": [], "worse": [], "none": [], "undetermined": []}
        for r in mine:
            p = f" (Holm-adjusted p={_p(r['p_holm'])})" if r.get("p_holm") is not None else ""
            groups[_verdict(r, goal)].append(r["task"] + p)
        clauses = []
        for key, text in (
            ("better", "is significantly better"),
            ("worse", "is significantly worse"),
            ("none", "shows no significant difference"),
            ("undetermined", "has an undetermined difference (too few seeds or no variance)"),
        ):
            if groups[key]:
                shown = groups[key] if len(groups[key]) <= 4 else [f"{len(groups[key])} tasks"]
                clauses.append(f"{text} on " + _list(shown))
        if clauses:
            parts.append(
                f"Against the baseline **{info.baseline}**, **{top_cfg}** " + _list(clauses) + "."
            )
    elif comparisons:
        parts.append(f"The baseline **{info.baseline}** itself is best there.")
    if comparisons:
        counts = {"better": 0, "worse": 0, "none": 0, "undetermined": 0}
        for r in comparisons:
            counts[_verdict(r, goal)] += 1
        if len({r["candidate"] for r in comparisons}) > 1:
            tail = (
                f"Over all {len(comparisons)} comparisons with the baseline, "
                f"{counts['better']} are significantly better, {counts['worse']} "
                f"significantly worse and {counts['none'] + counts['undetermined']} show "
                "no significant difference"
            )
            parts.append(tail + _failures_clause(data) + ".")
            return " ".join(parts)
    elif info.baseline and not data.analysis:
        parts.append("No statistical test was run (the statistics package is unavailable).")
    if data.failures:
        n = len(data.failures)
        parts.append(f"{n} run{'s' if n != 1 else ''} failed (see the failure log).")
    return " ".join(parts)


def _failures_clause(data: ReportData) -> str:
    n = len(data.failures)
    return f"; {n} run{'s' if n != 1 else ''} failed (see the failure log)" if n else ""


def _task_tables(data: ReportData, desc: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    info = data.info
    secondary = [
        m
        for m in desc["metric"].unique()
        if m != info.primary and (not info.goal or m in info.goal)
    ]
    summary_rows = {}
    if data.analysis:
        for row in data.analysis.get("summary", []):
            if row.get("metric") == info.primary:
                summary_rows[(row["task"], row["config"])] = row
    tables = []
    for task in [t for t in info.tasks if t in set(desc["task"])] + sorted(
        set(desc["task"]) - set(info.tasks)
    ):
        sub = desc[desc["task"] == task]
        prim = sub[sub["is_primary"]].sort_values("rank")
        rows = []
        for _, r in prim.iterrows():
            extra = summary_rows.get((task, r["config"]), {})
            sec_vals = []
            for m in secondary:
                s = sub[(sub["config"] == r["config"]) & (sub["metric"] == m)]
                sec_vals.append(
                    "—" if s.empty else f"{fmt(s['mean'].iloc[0])} ± {fmt(s['std'].iloc[0], 2)}"
                )
            ci = ""
            if extra:
                ci = f"[{fmt(extra.get('ci_low'))}, {fmt(extra.get('ci_high'))}]"
            rows.append(
                {
                    "rank": "—" if r["rank"] is None or r["rank"] is np.nan else int(r["rank"]),
                    # stats ranks every config whose CI overlaps the best one's as 1.
                    "tied": " (tied)" if extra.get("rank") == 1 and r["rank"] != 1 else "",
                    "config": r["config"] + (" (baseline)" if r["config"] == info.baseline else ""),
                    "flag": " ⚠" if extra.get("high_variance") else "",
                    "n": int(r["n"]),
                    "mean_std": f"{fmt(r['mean'])} ± {fmt(r['std'], 2)}",
                    "ci": ci,
                    "min": fmt(r["min"]),
                    "max": fmt(r["max"]),
                    "secondary": sec_vals,
                }
            )
        tables.append(
            {
                "name": task,
                "target": info.targets.get(task),
                "rows": rows,
                "has_ci": bool(summary_rows),
            }
        )
    return tables, secondary


def _clean(x: float | None, *scale: float | None) -> float | None:
    """0 for the rounding noise of an exact zero (a zero mean difference comes out as 1e-17).

    Noise is judged against the largest of ``scale`` (e.g. the CI bounds, in the metric's
    units), or absolutely for a dimensionless effect size.
    """
    if x is None:
        return None
    ref = max([abs(s) for s in scale if s is not None], default=1.0)
    return 0.0 if abs(x) < 1e-12 * max(ref, 1e-300) else x


def _comparison_rows(data: ReportData, rows: list[dict[str, Any]]) -> list[str]:
    info = data.info
    tasks = [t for t in info.tasks if any(r["task"] == t for r in rows)]
    tasks += sorted({r["task"] for r in rows} - set(tasks))
    lines = [
        "| task | candidate | design (n) | mean diff [95% CI] | test p | rank-test p "
        "| Holm p | Cohen's d | Hedges' g | P(improvement) | significant |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for task in tasks:
        for r in (r for r in rows if r["task"] == task):
            design = f"paired ({r['n']})" if r["paired"] else f"unpaired ({r['n']})"
            test = f"t {_p(r['t_pvalue'])}" if r["paired"] else f"Welch {_p(r['welch_pvalue'])}"
            rank_test = (
                f"Wilcoxon {_p(r['wilcoxon_pvalue'])}"
                if r["paired"]
                else f"MWU {_p(r['mannwhitney_pvalue'])}"
            )
            diff = (
                f"{fmt(_clean(r['mean_diff'], r['diff_ci_low'], r['diff_ci_high']))} "
                f"[{fmt(r['diff_ci_low'])}, {fmt(r['diff_ci_high'])}]"
                if r.get("mean_diff") is not None
                else "—"
            )
            sig = {True: "✓", False: "✗", None: "—"}[r.get("significant")]
            lines.append(
                f"| {task} | {r['candidate']} | {design} | {diff} | {test} | {rank_test} | "
                f"{_p(r.get('p_holm'))} | {fmt(_clean(r.get('cohens_d')), 3)} | "
                f"{fmt(_clean(r.get('hedges_g')), 3)} | "
                f"{fmt(r.get('prob_improvement'), 3)} | {sig} |"
            )
    return lines


def _comparisons_text(data: ReportData, desc: pd.DataFrame) -> str:
    info = data.info
    goal = info.goal.get(info.primary, "max")
    if not info.baseline:
        return "No baseline is named in the spec, so no config is compared against one."
    rows = [
        r for r in (data.analysis or {}).get("comparisons", []) if r.get("metric") == info.primary
    ]
    if data.analysis is not None:
        lines = []
        if rows:
            lines += [
                f"Each config against the baseline **{info.baseline}** on the final "
                f"{info.primary}. Mean diff is candidate − baseline "
                f"({'higher' if goal == 'max' else 'lower'} "
                "is an improvement) with a bootstrap 95% CI. Runs are paired by seed where both "
                "configs have at least two seeds in common (paired t-test and Wilcoxon "
                "signed-rank), otherwise compared unpaired (Welch t-test and Mann–Whitney U). "
                "Holm p is the t-test p-value adjusted by Holm–Bonferroni over all comparisons "
                "below; ✓ significant means Holm p < 0.05 and the CI of the difference excludes "
                "0. P(improvement) is the probability that a run of the candidate beats one of "
                "the baseline.",
                "",
            ]
            lines += _comparison_rows(data, rows)
        else:
            lines.append(f"No config could be compared with the baseline **{info.baseline}**.")
        agg = data.analysis.get("aggregate") or []
        if agg:
            lines += [
                "",
                f"Across tasks (normalised {info.primary}, after rliable: "
                "interquartile mean, median, mean and optimality gap with stratified "
                "bootstrap 95% CIs):",
                "",
                "| config | IQM | median | mean | optimality gap |",
                "|---|---|---|---|---|",
            ]
            for a in agg:
                cells = [
                    f"{fmt(a.get(k))} [{fmt(a.get(k + '_ci_low'))}, {fmt(a.get(k + '_ci_high'))}]"
                    for k in ("iqm", "median", "mean", "optimality_gap")
                ]
                lines.append(f"| {a['config']} | " + " | ".join(cells) + " |")
        warnings = data.analysis.get("warnings") or []
        if warnings:
            lines += ["", "Warnings from the analysis:", ""]
            lines += [f"- {w}" for w in warnings[:20]]
            if len(warnings) > 20:
                lines.append(f"- … and {len(warnings) - 20} more")
        return "\n".join(lines)
    prim = desc[desc["is_primary"]]
    base = prim[prim["config"] == info.baseline].set_index("task")
    lines = [
        "The statistics package is not available, so only differences of means are shown "
        "(no intervals or tests).",
        "",
        f"Difference of means against the baseline **{info.baseline}** on {info.primary}:",
        "",
        "| task | config | mean diff | baseline n | config n |",
        "|---|---|---:|---:|---:|",
    ]
    for _, r in prim[prim["config"] != info.baseline].iterrows():
        if r["task"] not in base.index:
            continue
        b = base.loc[r["task"]]
        lines.append(
            f"| {r['task']} | {r['config']} | {fmt(r['mean'] - b['mean'])} | "
            f"{int(b['n'])} | {int(r['n'])} |"
        )
    return "\n".join(lines)


def _reproduce(data: ReportData) -> list[str]:
    info = data.info
    lines = []
    commit = data.git.get("commit")
    if commit:
        lines.append(
            f"git checkout {commit}"
            + ("  # the runs used uncommitted changes too" if data.git.get("dirty") else "")
        )
    lines.append(f"pip install 'benchlab=={data.benchlab_version}'")
    spec = info.spec_path or "<spec.yaml>"
    sets = " ".join(
        f"-s {k}={json.dumps(v) if not isinstance(v, str) else v}"
        for k, v in info.overrides.items()
    )
    lines.append(f"benchlab run {spec}" + (f" {sets}" if sets else ""))
    lines.append("benchlab report")
    return lines


def _seeds_text(info: BenchmarkInfo, prim: pd.DataFrame) -> str:
    """Completed/planned seeds per config: ``3/3`` when every config and task has the same count,
    else per config (``a 3/3, b 1–3/3``: a range over its tasks)."""
    done = {(str(t), str(c)): int(n) for t, c, n in zip(prim["task"], prim["config"], prim["n"], strict=True)}
    configs = list(info.configs) or sorted({c for _, c in done})
    tasks = list(info.tasks) or sorted({t for t, _ in done})
    per_config = {c: sorted({done.get((t, c), 0) for t in tasks}) for c in configs}
    planned = f"/{len(info.seeds)}" if info.seeds else ""

    def counts(ns: list[int]) -> str:
        return (str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}") + planned

    distinct = {tuple(ns) for ns in per_config.values()}
    if len(distinct) <= 1:
        text = counts(next(iter(per_config.values()), [0]))
    else:
        text = ", ".join(f"{c} {counts(ns)}" for c, ns in per_config.items())
    return text + (f" (seeds {info.seeds[0]}–{info.seeds[-1]})" if info.seeds else "")


def render_markdown(data: ReportData) -> str:
    """The text of BENCHMARK_REPORT.md."""
    info = data.info
    desc = describe(data.finals, info.goal, info.primary)
    tables, secondary = _task_tables(data, desc)
    prim = desc[desc["is_primary"]]
    seeds_text = _seeds_text(info, prim)
    spec_configs = {c["name"]: c for c in info.spec.get("configs", [])}
    configs = []
    for name in info.configs:
        c = spec_configs.get(name, {"name": name})
        body = {k: v for k, v in c.items() if k not in ("name", "description")}
        configs.append(
            {
                "name": name,
                "description": c.get("description"),
                "yaml": yaml.safe_dump(body or {"params": {}}, sort_keys=False).rstrip(),
            }
        )
    legend = "Rank 1 is the best mean over seeds; std is the sample standard deviation (n−1)"
    if data.analysis:
        legend += (
            "; 95% CI is the Student-t interval of the mean; ⚠ marks high variance "
            "(std above 1% of |mean|); (tied) marks a config whose CI overlaps the best "
            "one's"
        )
    legend += "; n is the number of seeds that completed."
    return _ENV.get_template("BENCHMARK_REPORT.md.j2").render(
        name=info.name,
        date=_dt.date.today().isoformat(),
        tasks=info.tasks,
        primary=info.primary,
        goal=info.goal.get(info.primary, "max"),
        seeds_text=seeds_text,
        hardware=data.hardware,
        description=info.description,
        summary=_summary_sentences(data, desc),
        task_tables=tables,
        secondary=secondary,
        legend=legend,
        plots=data.plots,
        comparisons=_comparisons_text(data, desc),
        configs=configs,
        command=info.spec.get("command", "(per config)"),
        failures=data.failures,
        reproduce=_reproduce(data),
    )


def write_markdown(data: ReportData, path: Path) -> Path:
    path.write_text(render_markdown(data), encoding="utf-8")
    return path
