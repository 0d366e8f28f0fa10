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
    autoescape=False, keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False,
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


def _summary_sentences(data: ReportData, desc: pd.DataFrame) -> str:
    info = data.info
    prim = desc[desc["is_primary"]]
    if prim.empty:
        return "No run has completed yet, so there is nothing to compare."
    best = prim[prim["rank"] == 1]
    wins = best.groupby("config")["task"].apply(list).to_dict()
    n_tasks = prim["task"].nunique()
    top = max(wins.items(), key=lambda kv: len(kv[1]))
    parts = [f"**{top[0]}** has the best mean {info.primary} on {len(top[1])} of {n_tasks} "
             f"task{'s' if n_tasks != 1 else ''} ({', '.join(top[1])})."]
    if info.baseline and info.baseline in set(prim["config"]):
        base = prim[prim["config"] == info.baseline].set_index("task")["mean"]
        others = prim[prim["config"] != info.baseline]
        goal = info.goal.get(info.primary, "max")
        better = 0
        pairs = 0
        for _, row in others.iterrows():
            if row["task"] in base.index:
                pairs += 1
                delta = row["mean"] - base[row["task"]]
                better += int(delta > 0 if goal == "max" else delta < 0)
        if pairs:
            parts.append(f"Against the baseline **{info.baseline}**, {better} of {pairs} "
                         "(config, task) means are better.")
    if data.failures:
        parts.append(f"{len(data.failures)} run{'s' if len(data.failures) != 1 else ''} failed "
                     "(see the failure log).")
    return " ".join(parts)


def _task_tables(data: ReportData, desc: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    info = data.info
    secondary = [m for m in desc["metric"].unique() if m != info.primary
                 and (not info.goal or m in info.goal)]
    summary_rows = {}
    if data.analysis:
        for row in data.analysis.get("summary", []):
            if row.get("metric") == info.primary:
                summary_rows[(row["task"], row["config"])] = row
    tables = []
    for task in [t for t in info.tasks if t in set(desc["task"])] + sorted(
            set(desc["task"]) - set(info.tasks)):
        sub = desc[desc["task"] == task]
        prim = sub[sub["is_primary"]].sort_values("rank")
        rows = []
        for _, r in prim.iterrows():
            extra = summary_rows.get((task, r["config"]), {})
            sec_vals = []
            for m in secondary:
                s = sub[(sub["config"] == r["config"]) & (sub["metric"] == m)]
                sec_vals.append("—" if s.empty else f"{fmt(s['mean'].iloc[0])} ± {fmt(s['std'].iloc[0], 2)}")
            ci = ""
            if extra:
                ci = f"[{fmt(extra.get('ci_low'))}, {fmt(extra.get('ci_high'))}]"
            rows.append({
                "rank": "—" if r["rank"] is None or r["rank"] is np.nan else int(r["rank"]),
                "tied": " (tied)" if extra.get("tied") else "",
                "config": r["config"] + (" (baseline)" if r["config"] == info.baseline else ""),
                "flag": " ⚠" if extra.get("high_variance") else "",
                "n": int(r["n"]), "mean_std": f"{fmt(r['mean'])} ± {fmt(r['std'], 2)}",
                "ci": ci, "min": fmt(r["min"]), "max": fmt(r["max"]), "secondary": sec_vals,
            })
        tables.append({"name": task, "target": info.targets.get(task), "rows": rows,
                       "has_ci": bool(summary_rows)})
    return tables, secondary


def _comparisons_text(data: ReportData, desc: pd.DataFrame) -> str:
    info = data.info
    if data.analysis and data.analysis.get("comparisons_markdown"):
        return str(data.analysis["comparisons_markdown"])
    if not info.baseline:
        return "No baseline is named in the spec, so no config is compared against one."
    prim = desc[desc["is_primary"]]
    base = prim[prim["config"] == info.baseline].set_index("task")
    lines = [f"Difference of means against the baseline **{info.baseline}** on {info.primary}:", "",
             "| task | config | mean diff | baseline n | config n |", "|---|---|---:|---:|---:|"]
    for _, r in prim[prim["config"] != info.baseline].iterrows():
        if r["task"] not in base.index:
            continue
        b = base.loc[r["task"]]
        lines.append(f"| {r['task']} | {r['config']} | {fmt(r['mean'] - b['mean'])} | "
                     f"{int(b['n'])} | {int(r['n'])} |")
    return "\n".join(lines)


def _reproduce(data: ReportData) -> list[str]:
    info = data.info
    lines = []
    commit = data.git.get("commit")
    if commit:
        lines.append(f"git checkout {commit}" + ("  # the runs used uncommitted changes too"
                                                  if data.git.get("dirty") else ""))
    lines.append(f"pip install 'benchlab=={data.benchlab_version}'")
    spec = info.spec_path or "<spec.yaml>"
    sets = " ".join(f"-s {k}={json.dumps(v) if not isinstance(v, str) else v}"
                    for k, v in info.overrides.items())
    lines.append(f"benchlab run {spec}" + (f" {sets}" if sets else ""))
    lines.append("benchlab report")
    return lines


def render_markdown(data: ReportData) -> str:
    """The text of BENCHMARK_REPORT.md."""
    info = data.info
    desc = describe(data.finals, info.goal, info.primary)
    tables, secondary = _task_tables(data, desc)
    prim = desc[desc["is_primary"]]
    ns = sorted(set(int(n) for n in prim["n"])) if not prim.empty else []
    seeds_text = (str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}") if ns else "0"
    seeds_text += f" (seeds {info.seeds[0]}–{info.seeds[-1]})" if info.seeds else ""
    spec_configs = {c["name"]: c for c in info.spec.get("configs", [])}
    configs = []
    for name in info.configs:
        c = spec_configs.get(name, {"name": name})
        body = {k: v for k, v in c.items() if k not in ("name", "description")}
        configs.append({"name": name, "description": c.get("description"),
                        "yaml": yaml.safe_dump(body or {"params": {}}, sort_keys=False).rstrip()})
    legend = ("Rank 1 is the best mean; ⚠ marks high variance (std above 1% of |mean|); "
              "'tied' marks a config whose CI overlaps the best one's." if data.analysis else
              "Rank 1 is the best mean over seeds; std is the sample standard deviation (n−1).")
    return _ENV.get_template("BENCHMARK_REPORT.md.j2").render(
        name=info.name, date=_dt.date.today().isoformat(), tasks=info.tasks, primary=info.primary,
        goal=info.goal.get(info.primary, "max"), seeds_text=seeds_text, hardware=data.hardware,
        description=info.description, summary=_summary_sentences(data, desc), task_tables=tables,
        secondary=secondary, legend=legend, plots=data.plots,
        comparisons=_comparisons_text(data, desc), configs=configs,
        command=info.spec.get("command", "(per config)"), failures=data.failures,
        reproduce=_reproduce(data),
    )


def write_markdown(data: ReportData, path: Path) -> Path:
    path.write_text(render_markdown(data), encoding="utf-8")
    return path
