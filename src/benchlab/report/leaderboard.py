"""BENCHMARKS.md: one row per task, every config's score, the target and a status.

The status rule (``docs/reports.md`` states it too). A config's score on a task
is its mean over seeds of the primary metric, unrounded. With target ``T``:

- goal ``max``: ✅ solved when ``score >= T``; ⚠️ close when
  ``score > T - 0.2·|T|`` (for a positive target: above 80% of it); else ❌ failed.
- goal ``min``: ✅ solved when ``score <= T``; ⚠️ close when
  ``score < T + 0.25·|T|`` (for a positive target: below ``T / 0.8``); else ❌ failed.

The close band is open at its far end and empty for ``T = 0``.

A task without a target gets no status. Every config cell carries its own
status, and the last column gives the best config and its status, which is the
task's status. The best config and its ties are :mod:`benchlab.stats`' ranks (the
report's summary and tables name the same winner, through :func:`leaderboard_rows`): the config
ranked first by mean (of equal means, the first in the spec's order, "tied with" the others),
"CI overlaps" every other config ranked first, its 95% interval overlapping the best one's. A
partial evaluation (lm-eval ``--limit``) is never ranked best: its cell is marked "(partial†)".

Each score links to the run folder of its median seed
(:func:`benchlab.stats.describe.median_member`): a relative link, which
``benchlab export`` rewrites to the target's URL. The Runs list under the table
links every seed's run folder.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from benchlab.report.tables import cell as md_cell
from benchlab.report.tables import fmt, mean_pm
from benchlab.report.tables import prose as md_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from benchlab.json_types import JsonObject
    from benchlab.stats.analysis import SummaryRow
    from benchlab.stats.results_analysis import SeedCount

Status = Literal["solved", "close", "failed"]
CLOSE_FRACTION = 0.8
ICONS: dict[str, str] = {"solved": "✅", "close": "⚠️", "failed": "❌"}


def status(score: float | None, target: float | None, goal: str = "max") -> Status | None:
    """The status of a score against a target (module docstring); None without target or score."""
    if target is None or score is None or not math.isfinite(score):
        return None
    if goal == "min":
        if score <= target:
            return "solved"
        return "close" if score < target + (1 / CLOSE_FRACTION - 1) * abs(target) else "failed"
    if score >= target:
        return "solved"
    return "close" if score > target - (1 - CLOSE_FRACTION) * abs(target) else "failed"


@dataclass
class TaskRow:
    """A task's row: ``cells[config] = (mean, std, status)``; ``best`` is the config ranked first
    by mean (of equal means, the first in the spec's order), ``equal`` the other configs with
    exactly its mean (tied), ``tied`` the configs ranked first through an interval overlapping its
    own. The report's Summary and tables name the same best and ties (one rule, here)."""

    task: str
    target: float | None
    cells: dict[str, tuple[float, float, Status | None]]
    best: str | None
    status: Status | None
    tied: list[str] = field(default_factory=list)
    equal: list[str] = field(default_factory=list)


def leaderboard_rows(
    prim: Sequence[SummaryRow],
    tasks: list[str],
    configs: list[str],
    targets: dict[str, float | None],
    goal: str,
    partial: Collection[tuple[str, str]] = (),
) -> list[TaskRow]:
    """One row per task, in the order of ``tasks``.

    ``prim`` are the primary metric's summary rows (:mod:`benchlab.stats.results_analysis`): their
    ``rank`` and ``mean_rank`` (``stats``' ranks) pick the best config and its ties. A
    ``(task, config)`` in ``partial`` (evaluated on part of the task's samples) is shown but never
    ranked: its score is not the benchmark's. Where stats ranked such a score first, the best full
    evaluation by mean is named best, without ties (stats' ties were to the partial score).
    """
    rows: list[TaskRow] = []
    for task in tasks:
        sub = {r.config: r for r in prim if r.task == task and r.n > 0}
        target = targets.get(task)
        cells: dict[str, tuple[float, float, Status | None]] = {}
        first: list[str] = []  # ranked first by mean
        tied: list[str] = []  # ranked first through an overlapping interval
        for cfg in configs:
            row = sub.get(cfg)
            if row is not None:
                mean = float("nan") if row.mean is None else row.mean
                std = row.std if row.n > 1 and row.std is not None else float("nan")  # one seed: no spread
                cells[cfg] = (mean, std, status(mean, target, goal))
                if row.mean_rank == 1:
                    first.append(cfg)
                elif row.rank == 1:
                    tied.append(cfg)
        ranked_partial = any((task, c) in partial for c in first)
        first = [c for c in first if (task, c) not in partial]
        tied = [c for c in tied if (task, c) not in partial]
        if ranked_partial and not first:
            full = [c for c in cells if (task, c) not in partial and math.isfinite(cells[c][0])]
            if full:
                top = (max if goal == "max" else min)(cells[c][0] for c in full)
                first, tied = [c for c in full if cells[c][0] == top], []
        first = [c for c in configs if c in first]
        best = first[0] if first else None
        # Equal means are exact ties: the first in the spec's order is named best, the others tied.
        tied = [c for c in configs if c in tied and c not in first]
        rows.append(TaskRow(task, target, cells, best, cells[best][2] if best else None, tied, first[1:]))
    return rows


def _runs_section(rows: list[TaskRow], configs: list[str], run_links: dict[tuple[str, str], list[tuple[int, str]]],
                  score_links: dict[tuple[str, str], str]) -> list[str]:
    """The lines of BENCHMARKS.md's "Runs" section: each score with every seed's run folder."""
    # The table links one seed per score; this list gives every seed's run folder.
    lines = ["", "## Runs", "", "Each score and the run folders of its seeds.", ""]
    for row in rows:
        for cfg in configs:
            links = run_links.get((row.task, cfg))
            cell = row.cells.get(cfg)
            if links and cell is not None:
                seeds_text = " ".join(f"[{seed}]({href})" for seed, href in links)
                href = score_links.get((row.task, cfg), links[0][1])
                lines.append(f"- {md_text(row.task)} / {md_text(cfg)}: [{mean_pm(cell[0], cell[1])}]({href}) — "
                             f"seeds {seeds_text}")
    return lines


def render_leaderboard(
    prim: Sequence[SummaryRow],
    tasks: list[str],
    configs: list[str],
    targets: dict[str, float | None],
    goal: str,
    primary: str,
    name: str,
    seeds: dict[tuple[str, str], SeedCount] | None = None,
    failed_as: str = "exclude",
    settings: dict[str, str] | None = None,
    run_links: dict[tuple[str, str], list[tuple[int, str]]] | None = None,
    score_links: dict[tuple[str, str], str] | None = None,
    partial: dict[tuple[str, str], list[str]] | None = None,
    differs: dict[tuple[str, str], str] | None = None,
) -> str:
    """The text of BENCHMARKS.md.

    ``seeds`` (completed/planned per (task, config)) marks every cell whose config lost
    seeds, and a config with no completed seed gets a "failed" cell instead of a blank.
    ``settings`` is each task's Settings line; ``run_links`` the run folder (a relative link)
    of each seed of a (task, config), listed under the table; ``score_links`` the run folder
    each score links to (its median seed's); ``partial`` the notes of the runs of a (task, config)
    evaluated on part of the benchmark (lm-eval's ``--limit``), whose cells are marked;
    ``differs`` the evaluation settings a (task, config) ran with where they are not its task's
    Settings line (:func:`config_settings`), written in its cell and under the line.
    """
    partial = partial or {}
    differs = differs or {}
    rows = leaderboard_rows(prim, tasks, configs, targets, goal, partial or {})
    seeds = seeds or {}
    score_links = score_links or {}
    direction = "higher" if goal == "max" else "lower"
    how = "excluded" if failed_as == "exclude" else "scored as the worst value"

    def lost(task: str, cfg: str) -> str:
        count = seeds.get((task, cfg))
        return f" ({count.label} seeds)" if count is not None and count.lost else ""

    # Names and values come from the spec and the runs: each is written so that it is no markup.
    lines = [
        f"# Benchmarks: {md_text(name)}",
        "",
        f"Score: mean ± std over seeds of **{md_text(primary)}** ({direction} is better)"
        + (", linked to the run folder of its median seed" if score_links else "") + ". "
        "Status: ✅ solved (reaches the target), ⚠️ close "
        + ("(above 80% of the target), " if goal == "max" else "(below the target / 0.8), ")
        + "❌ failed; the last column is the best config's status (of equal means, the first in the "
        "spec's order, tied with the others), and names the configs whose "
        "95% interval overlaps its own (CI overlaps: not a test; overlapping intervals can still "
        "differ significantly, as the report's comparisons say). "
        f"Where a config lost seeds the cell says how many completed of those planned "
        f"(failed seeds {how}, `--failed-as {failed_as}`), and every other score is over all "
        "its planned seeds; ✗ marks a config with no completed seed."
        + (" (partial†) marks a score from runs evaluated on part of their task's samples: "
           "not the full benchmark's score (the note under the table says which), and never "
           "ranked best." if partial else "")
        + (" (setting‡) marks a config that ran its task's evaluation with other settings than the "
           "task's Settings line below: its score is not comparable on those settings." if differs else ""),
        "",
        "| task | target | " + " | ".join(md_cell(c) for c in configs) + " | best |",
        "|---|---:|" + "---|" * len(configs) + "---|",
    ]
    for row in rows:
        cells = []
        for cfg in configs:
            cell = row.cells.get(cfg)
            count = seeds.get((row.task, cfg))
            if cell is None:
                cells.append(f"✗ failed ({count.label} seeds)" if count is not None else "—")
                continue
            mean, std, st = cell
            text = mean_pm(mean, std)
            href = score_links.get((row.task, cfg))
            if href:
                text = f"[{text}]({href})"
            if st:
                text += f" {ICONS[st]}"
            if (row.task, cfg) in partial:
                text += " (partial†)"
            if (row.task, cfg) in differs:
                text += f" ({md_cell(differs[(row.task, cfg)])}‡)"
            cells.append(text + lost(row.task, cfg))
        best = (md_cell(row.best) + lost(row.task, row.best)) if row.best else "—"
        best_text = f"{best} {ICONS[row.status]} {row.status}" if row.status else best
        if row.equal:
            best_text += "; tied with " + ", ".join(md_cell(c) + lost(row.task, c) for c in row.equal) \
                + " (equal means)"
        if row.tied:
            best_text += "; CI overlaps " + ", ".join(md_cell(c) + lost(row.task, c) for c in row.tied)
        target = "—" if row.target is None else fmt(row.target)
        lines.append(f"| {md_cell(row.task)} | {target} | " + " | ".join(cells) + f" | {best_text} |")
    lines += _partial_notes(rows, tasks, configs, partial)
    if run_links:
        lines += _runs_section(rows, configs, run_links, score_links)
    if settings and any(settings.get(t) for t in tasks):
        lines += _settings_section(tasks, configs, settings, differs)
    return "\n".join(lines) + "\n"


def _partial_notes(rows: list[TaskRow], tasks: list[str], configs: list[str],
                   partial: dict[tuple[str, str], list[str]]) -> list[str]:
    """The note under BENCHMARKS.md's table on the scores marked (partial†)."""
    marked = [(t, c) for t in tasks for c in configs if (t, c) in partial and (t, c) in
              {(r.task, k) for r in rows for k in r.cells}]
    if not marked:
        return []
    return ["", "† Partial evaluation: not the full benchmark's score (lm-eval's `--limit` cut the run "
            "short), so not comparable with a full run's:", "",
            *(f"- {md_cell(t)} / {md_cell(c)}: " + "; ".join(md_text(n) for n in partial[(t, c)])
              for t, c in marked)]


def _settings_section(tasks: list[str], configs: list[str], settings: dict[str, str],
                      differs: dict[tuple[str, str], str]) -> list[str]:
    """The lines of BENCHMARKS.md's "Settings" section: each task's line, and the configs that ran
    otherwise (marked ‡ in their cells)."""
    lines = ["", "## Settings", ""]
    for t in tasks:
        if settings.get(t):
            own = [f"{md_text(c)} ran with {md_text(differs[(t, c)])}" for c in configs if (t, c) in differs]
            lines.append(f"- **{md_text(t)}**: {md_text(settings[t])}"
                         + (f" (‡ except: {'; '.join(own)})" if own else ""))
    return lines


def _setting_value(value: object) -> str:
    """A setting as SLM-Lab's tables write it: ``1e7`` for 10,000,000, else as given."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if value != 0 and abs(value) >= 1e5 and float(value).is_integer():
        mantissa, exp = f"{float(value):e}".split("e")
        return f"{float(mantissa):g}e{int(exp)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def task_settings(spec: JsonObject, tool_versions: dict[str, str] | None = None) -> dict[str, str]:
    """Each task's Settings line (``max_frame 1e7, num_envs 16``) from the spec (as JSON): the
    names in the spec's ``settings:``, else the task's params and the variables its command uses;
    a name is looked up in the task's params, then in the spec's variables. A task whose command
    runs lm-eval or vLLM also gets what the field's rules want written down
    (``benchlab.evalrules.settings_line``: seed, temperature, tensor parallelism, batch size and,
    from ``tool_versions``, the tool's version)."""
    import re

    from benchlab.evalrules import fill, settings_line

    variables = dict(spec.get("variables") or {})  # type: ignore[call-overload]
    chosen = spec.get("settings")
    out = {}
    for task in spec.get("tasks") or []:  # type: ignore[attr-defined]
        params = dict(task.get("params") or {})
        if chosen:
            names = list(chosen)  # type: ignore[call-overload]
        else:
            command = str(task.get("command") or spec.get("command") or "")
            used = [n for n in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", command) if n in variables]
            names = list(params) + [n for n in dict.fromkeys(used) if n not in params]
        values = [(n, params[n] if n in params else variables.get(n)) for n in names if n in params or n in variables]
        line = ", ".join(f"{n} {_setting_value(v)}" for n, v in values)
        expanded = _expanded_configs(spec)
        first = next(iter(expanded.values()), {})
        command = fill(str(task.get("command") or spec.get("command") or ""), {**variables, **first, **params})
        seed_list = _seed_list(spec)
        call = settings_line(command, seed_list, None)
        if call:
            tool = call.split(":", 1)[0]
            call = settings_line(command, seed_list, (tool_versions or {}).get(tool))
        out[task["name"]] = "; ".join(p for p in (line, call) if p)
    return out


def _seed_list(spec: dict[str, object]) -> list[int]:
    seeds = spec.get("seeds")
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds or [])  # type: ignore[call-overload]


def _expanded_configs(spec: dict[str, object]) -> dict[str, dict[str, object]]:
    """Each config of the spec (as JSON) by its name in the tables, a grid's combinations each
    (``benchlab.spec.checks.grid_names``' order), with its params."""
    import itertools

    from benchlab.spec.checks import grid_names

    out: dict[str, dict[str, object]] = {}
    for config in spec.get("configs") or []:  # type: ignore[attr-defined]
        params = dict(config.get("params") or {})
        grid = dict(config.get("grid") or {})
        if not grid:
            out[str(config["name"])] = params
            continue
        names = grid_names(str(config["name"]), grid)
        for name, combo in zip(names, itertools.product(*grid.values()), strict=True):
            out[name] = {**params, **dict(zip(grid, combo, strict=True))}
    return out


def config_settings(spec: JsonObject) -> dict[tuple[str, str], str]:
    """(task, config) -> the evaluation settings of a config that runs its task's evaluation tool
    otherwise than the task's Settings line says (:func:`task_settings`, from the first config):
    ``tensor_parallel_size 8``, ``temperature 0.7``. Its BENCHMARKS.md cell is marked with them,
    so that the Settings line is true of every column."""
    from benchlab.evalrules import fill, parse_call

    variables = dict(spec.get("variables") or {})  # type: ignore[call-overload]
    expanded = _expanded_configs(spec)
    if len(expanded) < 2:
        return {}
    out: dict[tuple[str, str], str] = {}
    seeds = ", ".join(str(s) for s in _seed_list(spec))

    def shown(call: object) -> dict[str, str]:
        fields = {"seed": getattr(call, "seed", None), "temperature": getattr(call, "temperature", None),
                  "tensor_parallel_size": getattr(call, "tensor_parallel_size", None) or 1,
                  "batch_size": getattr(call, "batch_size", None)}
        seed = fields["seed"]
        if isinstance(seed, str) and "{seed}" in seed:
            fields["seed"] = seeds
        return {k: "tool default" if v is None else str(v) for k, v in fields.items()}

    for task in spec.get("tasks") or []:  # type: ignore[attr-defined]
        params = dict(task.get("params") or {})
        template = str(task.get("command") or spec.get("command") or "")
        calls = {name: parse_call(fill(template, {**variables, **own, **params})) for name, own in expanded.items()}
        first = next(iter(calls.values()))
        if first is None:
            continue
        line = shown(first)
        for name, call in calls.items():
            if call is None:
                continue
            differ = [f"{k} {v}" for k, v in shown(call).items() if v != line[k]]
            if differ:
                out[(str(task["name"]), name)] = ", ".join(differ)
    return out
