"""The search section of ``report.html`` and the text and figures of ``SEARCH_REPORT.md``, from a
study's summary (:class:`benchlab.search.summary.StudySummary`).

It renders typed records the results table carries (:attr:`benchlab.results.Results.searches`):
no ledger, no study file, no Optuna. Figures are drawn like the benchmark report's (matplotlib,
Agg, the same colours).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.names.results_files import PLOTS_DIR

if TYPE_CHECKING:
    from benchlab.search.summary import StudySection, StudySummary, TrialRow

_STATE_MARK = {"complete": "completed", "pruned": "pruned", "fail": "failed", "running": "running",
               "waiting": "queued"}


def search_sections(sections: Sequence[StudySection], out: Path | str, *, plots: bool = True) -> str:
    """The Markdown of ``report.html``'s search sections: one per study ("" when there is none),
    each with its plots drawn into ``<out>/plots/search-<name>/`` (``plots=False``: none).

    The trials stay in their own sections, under their study's name: they never enter the
    benchmark's tables, and BENCHMARK_REPORT.md does not carry these sections.
    """
    parts = []
    for section in sections:
        if section.summary is None:
            parts.append(f"## Search: {section.name}\n\nNot shown: {section.problem}\n")
            continue
        drawn: list[Path] = []
        if plots:
            where = Path(out) / PLOTS_DIR / f"search-{section.name}"
            where.mkdir(parents=True, exist_ok=True)
            drawn = [p.relative_to(out) for p in draw_search_plots(section.summary, where)]
        parts.append(search_markdown(section.summary, drawn, title="## Search: "))
    return "\n".join(parts)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in params.items())


def search_markdown(s: StudySummary, plots: list[Path], *, title: str = "# Search report: ") -> str:
    """The text of ``SEARCH_REPORT.md``; with ``title="## Search: "`` the section of ``report.html``
    (its own headings one level down)."""
    done = s.count("complete") + s.count("pruned")
    sub = "#" * (len(title) - len(title.lstrip("#")) + 1)  # the subsections' heading mark
    lines = [f"{title}{s.study}", ""]
    lines.append(f"Search metric: **{s.metric}** ({s.goal}, {s.summary} of each run's curve, mean over a trial's "
                 f"runs). Sampler {s.sampler or '?'}, pruner {s.pruner or '?'}. "
                 f"{done} trials done of a budget of {s.budget if s.budget is not None else '?'} "
                 f"({s.count('complete')} completed, {s.count('pruned')} pruned, {s.count('fail')} failed"
                 + (f", {s.count('running')} running" if s.count("running") else "") + ").")
    lines += ["", "These trials ran on the search's own seeds and never enter the benchmark's table "
              "(BENCHMARKS.md, BENCHMARK_REPORT.md, `benchlab.load`, `benchlab compare`)."]
    if s.allow_primary_reason:
        lines += ["", f"**Tuned on the benchmark's primary metric**, allowed because: {s.allow_primary_reason}"]
    lines += ["", f"{sub} Best trial", ""]
    if s.best is None:
        lines.append("No trial has completed yet.")
    else:
        b = s.best
        lines.append(f"Trial {b.number}: **{s.metric} = {_fmt(b.value)}** with {_params(b.params)}.")
        lines.append("")
        lines.append(f"Its runs: {', '.join(f'`{r}`' for r in b.runs) or '–'}.")
        lines.append("")
        lines.append("Promote it into the benchmark with `benchlab search SPEC --promote NAME`, then "
                     "`benchlab run` the new spec: the config is then measured on the benchmark's seeds.")
    lines += ["", f"{sub} Pruning", ""]
    pruned = s.count("pruned")
    if s.pruner == "none":
        lines.append("Pruning was off (pruner: none).")
    elif s.pruning_blind is not None:
        lines.append(f"Pruning did not act: {s.pruning_blind}.")
    elif s.saved_step_share is None:
        lines.append(f"{pruned} trials pruned; the saving is not known yet (no completed trial reported a curve).")
    else:
        saved_s = f", about {s.saved_seconds:.1f} s of run time" if s.saved_seconds is not None else ""
        lines.append(f"{pruned} of {done} trials were pruned, saving {s.saved_steps:g} run-steps, "
                     f"{s.saved_step_share:.0%} of the steps the trials would have run without pruning{saved_s}.")
    lines += ["", f"{sub} Parameter importances", ""]
    if s.importances:
        lines += ["| param | importance |", "|---|---:|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in s.importances.items()]
        lines += ["", f"Computed by {s.importance_note}."]
    else:
        lines.append(f"Not computed: {s.importance_note}.")
    if plots:
        lines += ["", f"{sub} Plots", ""]
        lines += [f"![{p.stem}]({p.as_posix()})" for p in plots]
    lines += ["", f"{sub} Trials", "", "| trial | state | " + s.metric + " | params | runs | note |",
              "|---:|---|---:|---|---:|---|"]
    for t in s.trials:
        note = t.reason or (f"asked again for trial {t.retry_of}" if t.retry_of is not None else "")
        value = _fmt(t.value)
        if t.state == "pruned" and t.intermediate:
            # Optuna keeps a pruned trial's last reported value: a value mid-curve, not a final one.
            value = f"{value} at step {max(t.intermediate)}"
        lines.append(f"| {t.number} | {_STATE_MARK.get(t.state, t.state)} | {value} | {_params(t.params)} | "
                     f"{len(t.runs)} | {note.replace('|', '/')} |")
    lines.append("")
    return "\n".join(lines)


def draw_search_plots(s: StudySummary, folder: Path) -> list[Path]:
    """history.png, importances.png, slice.png and curves.png (those there is data for)."""
    out = []
    for draw in (_history, _importances, _slice, _curves):
        path = draw(s, folder)
        if path is not None:
            out.append(path)
    return out


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def _history(s: StudySummary, folder: Path) -> Path | None:
    from benchlab.report.style import OKABE_ITO, new_figure

    done = [t for t in s.trials if t.state == "complete" and t.value is not None]
    if not done:
        return None
    fig = new_figure(6.0, 3.2)
    ax = fig.add_subplot()
    xs = [t.number for t in done]
    ys = [float(t.value) for t in done if t.value is not None]
    ax.scatter(xs, ys, color=OKABE_ITO[0], s=18, label="completed trial")
    pick = max if s.goal == "max" else min
    best, line = None, []
    for y in ys:
        best = y if best is None else pick(best, y)
        line.append(best)
    ax.step(xs, line, where="post", color=OKABE_ITO[1], label="best so far")
    pruned = [t.number for t in s.trials if t.state == "pruned"]
    if pruned:
        ax.scatter(pruned, [min(ys)] * len(pruned), marker="x", color=OKABE_ITO[3], s=18,
                   label="pruned (drawn at the lowest value)")
    ax.set_xlabel("trial")
    ax.set_ylabel(s.metric)
    ax.set_title("optimisation history")
    ax.legend(fontsize=8)
    return _save(fig, folder / "history.png")


def _importances(s: StudySummary, folder: Path) -> Path | None:
    from benchlab.report.style import OKABE_ITO, new_figure

    if not s.importances:
        return None
    names = list(s.importances)[::-1]
    fig = new_figure(5.0, 0.5 + 0.35 * len(names))
    ax = fig.add_subplot()
    ax.barh(names, [s.importances[n] for n in names], color=OKABE_ITO[2])
    ax.set_xlabel("importance (fANOVA)")
    ax.set_title("parameter importances")
    return _save(fig, folder / "importances.png")


def _slice(s: StudySummary, folder: Path) -> Path | None:
    from benchlab.report.style import OKABE_ITO, new_figure

    done = [t for t in s.trials if t.state == "complete" and t.value is not None]
    if not done:
        return None
    names = sorted({k for t in done for k in t.params})
    fig = new_figure(3.0 * len(names), 2.8)
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        pts = [(t.params[name], float(t.value)) for t in done if name in t.params and t.value is not None]
        xs = [p[0] for p in pts]
        if any(isinstance(x, str) or x is None or isinstance(x, bool) for x in xs):
            labels = sorted({str(x) for x in xs})
            xs = [labels.index(str(x)) for x in xs]
            ax.set_xticks(range(len(labels)), labels)
        ax.scatter(xs, [p[1] for p in pts], color=OKABE_ITO[0], s=16)
        numeric = [x for x in xs if isinstance(x, int | float)]
        if numeric and min(numeric) > 0 and max(numeric) / min(numeric) > 100:
            ax.set_xscale("log")
        ax.set_xlabel(name)
        if i == 0:
            ax.set_ylabel(s.metric)
    fig.suptitle("slice: the value against each param")
    return _save(fig, folder / "slice.png")


def _curves(s: StudySummary, folder: Path) -> Path | None:
    from benchlab.report.style import OKABE_ITO, new_figure

    shown: list[TrialRow] = [t for t in s.trials if t.intermediate and t.state in ("complete", "pruned")]
    if not shown:
        return None
    fig = new_figure(6.0, 3.2)
    ax = fig.add_subplot()
    for t in shown:
        steps = sorted(t.intermediate)
        ax.plot(steps, [t.intermediate[k] for k in steps], linewidth=1,
                color=OKABE_ITO[0] if t.state == "complete" else OKABE_ITO[3],
                linestyle="-" if t.state == "complete" else "--")
    ax.set_xlabel("step")
    ax.set_ylabel(s.metric)
    ax.set_title("trials' curves as the pruner saw them (dashed: pruned)")
    return _save(fig, folder / "curves.png")
