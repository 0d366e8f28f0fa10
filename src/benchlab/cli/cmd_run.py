"""`benchlab run`, `benchlab validate`, `benchlab init`: from a spec to runs."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from benchlab.cli.app import app, backend_option, console, print_json

if TYPE_CHECKING:
    from benchlab.execute.base import BackendOptions

SpecArg = typer.Argument(..., help="The benchmark spec (YAML).", show_default=False)
SetOpt = typer.Option(None, "--set", "-s", help="Override a spec variable (-s max_frame=1e6) or, Hydra-style, any "
                      "field of the spec (-s configs.mlp.params.lr=1e-3; a comma list sweeps it as a grid: "
                      "-s configs.mlp.params.lr=1e-3,1e-4); repeatable.",
                      metavar="KEY=VALUE")
OverridesArg = typer.Argument(None, help="Hydra-style overrides after the spec, as -s takes them: "
                              "configs.mlp.params.lr=1e-3 seeds=3 (a comma list sweeps a config's param).",
                              metavar="[KEY=VALUE]...", show_default=False)
ResultsOpt = typer.Option(None, "--results", "-r",
                          help="Results folder [default: results/<benchmark name> beside the spec file].")


def with_overrides(sets: list[str] | None, overrides: list[str] | None) -> list[str]:
    """``-s`` values and the ``KEY=VALUE`` words after the spec (Hydra's spelling), in that order;
    a word after the spec that is no ``KEY=VALUE`` is a usage error naming it."""
    from benchlab.errors import UsageError

    for word in overrides or []:
        key, sep, _ = word.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"unexpected argument {word!r} after the spec: overrides are KEY=VALUE "
                             "(configs.mlp.params.lr=1e-3, seeds=3), as -s takes them")
    return [*(sets or []), *(overrides or [])]


def default_results(spec: Any) -> Path:
    """``results/<benchmark>`` in the spec file's folder (:func:`benchlab.execute.api.default_results`)."""
    from benchlab.execute.api import default_results as library_default

    return library_default(spec)


def search_line(spec: Any) -> str:
    """What `benchlab search` would do with the spec's search section, in one line."""
    search = spec.search
    budget = (f"{search.budget} trials" if search.budget is not None else
              f"{search.trial_budget} trials (4 × {len(search.space)} dimensions)")
    metric = search.metric
    tasks = ", ".join(search.tasks) if search.tasks else "every task"
    base = search.base_config or spec.baseline or spec.configs[0].name
    from benchlab.spec.search import pruning_blind

    blind = pruning_blind(spec)
    return (f"search {search.name}: budget {budget} tuning {', '.join(search.space)} of config {base} on "
            f"{metric.name} ({metric.summary}), {tasks}, seeds {search.seed_list(spec.seed_list)}; "
            f"sampler {search.sampler}, pruner {search.pruner}" + (f"; but {blind}" if blind else ""))


@app.command()
def validate(
    spec_path: Path = SpecArg,
    overrides: list[str] = OverridesArg,
    sets: list[str] = SetOpt,
    results: Path = ResultsOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Validate a spec and print the plan: the runs, their resources, and what is already done."""
    from benchlab.evalrules import refuse_incomplete_checkpoints, rule_warnings
    from benchlab.execute.status import run_states
    from benchlab.plan import expand
    from benchlab.spec import load_spec

    spec = load_spec(spec_path, with_overrides(sets, overrides))
    runs = expand(spec)
    folder = results or default_results(spec)
    statuses = run_states(folder, (r.run_id for r in runs))
    states = [statuses[r.run_id] for r in runs]
    refuse_incomplete_checkpoints(spec, runs, lambda: statuses)
    warnings = rule_warnings(spec, runs)
    if as_json:
        print_json({
            "name": spec.name, "results": str(folder), "runs": [
                {"run_id": r.run_id, "name": r.name, "task": r.task, "config": r.config,
                 "seed": r.seed, "params": r.params, "command": r.command, "status": s,
                 "resources": r.resources.model_dump(exclude_defaults=True)}
                for r, s in zip(runs, states, strict=True)],
            "resources": spec.resources.model_dump(), "timeout": spec.timeout,
            "retries": spec.retries, "retry_on": spec.retry_budget, "variables": spec.variables,
            "grids": spec.grids, "warnings": warnings,
        })
        return
    from rich.markup import escape
    from rich.table import Table

    counts = {s: states.count(s) for s in sorted(set(states))}
    console.print(f"[bold]{spec.name}[/]: {len(spec.tasks)} tasks × {len(spec.configs)} configs × "
                  f"{len(spec.seed_list)} seeds = [bold]{len(runs)} runs[/]")
    for base, names in spec.grids.items():
        listed = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        console.print(f"grid {base} = {len(names)} configs: {listed}", highlight=False, markup=False)
    res = spec.resources
    timeout = f"{spec.timeout:g}s" if spec.timeout else "none"
    console.print(f"per run: {res.cpus:g} CPU, {res.gpus:g} GPU"
                  + (f", {res.gpu_memory:g} GiB GPU memory" if res.gpu_memory else "")
                  + f"; timeout {timeout}; retries {spec.retries}"
                  + "".join(f", {k}: {v}" for k, v in spec.retry_budget.items()))
    for cfg in spec.configs:
        own = cfg.resources
        if own is not None:
            console.print(f"  config {escape(cfg.name)}: {own.cpus:g} CPU, {own.gpus:g} GPU"
                          + (f", {own.gpu_memory:g} GiB GPU memory" if own.gpu_memory else ""))
    console.print(f"primary metric: {escape(spec.metrics.primary.name)} ({spec.metrics.primary.goal})"
                  + (f"; baseline: {escape(spec.baseline)}" if spec.baseline else ""))
    console.print(f"results: {folder}  ({', '.join(f'{n} {s}' for s, n in counts.items())})")
    if spec.search is not None:
        console.print(search_line(spec), highlight=False, markup=False)
    for warning in warnings:
        console.print(f"[yellow]warning[/]: {escape(warning)}", highlight=False)
    table = Table("run", "id", "status", "command", box=None, pad_edge=False)
    shown = runs if len(runs) <= 30 else runs[:30]
    for r, s in zip(shown, states, strict=False):
        table.add_row(escape(r.name), r.run_id, s, escape(r.command))
    console.print(table)
    if len(runs) > len(shown):
        console.print(f"... and {len(runs) - len(shown)} more (--json lists all)")


@app.command()
def run(
    spec_path: Path = SpecArg,
    overrides: list[str] = OverridesArg,
    sets: list[str] = SetOpt,
    jobs: int = typer.Option(None, "--jobs", "-j", min=1,
                             help="Runs at once [default: CPU cores / cpus per run]."),
    results: Path = ResultsOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run, run nothing."),
    rerun_failed: bool = typer.Option(False, "--rerun-failed", help="Run failed runs again too."),
    rerun_all: bool = typer.Option(False, "--rerun-all", "--force",
                                   help="Run every run again, finished ones too (after the code under test "
                                        "changed); the earlier attempts stay on record."),
    max_failures: int = typer.Option(None, "--max-failures", min=1,
                                     help="Stop launching after this many failed runs."),
    allow_changed: bool = typer.Option(False, "--allow-changed",
                                       help="Go on where a dataset or the code under test changed since the "
                                            "runs began (the change is recorded); without it, run stops."),
    backend: str = backend_option("Where the runs run: a backend of the registry [default: the spec's, or local]."),
    slurm: list[str] = typer.Option(None, "--slurm", metavar="KEY=VALUE",
                                    help="Slurm backend: partition, account, qos, constraint, array_size or "
                                         "any sbatch option (--slurm partition=gpu --slurm exclude=node3), over "
                                         "the spec's slurm: section."),
    ray_address: str = typer.Option(None, "--ray-address", help="Ray cluster to run on (ray "
                                    "backend) [default: $RAY_ADDRESS, else a local Ray]."),
    shared_fs: bool = typer.Option(False, "--shared-fs", help="Ray nodes see the results folder at "
                                   "the same path: runs write into it directly."),
    gpus: str = typer.Option(None, "--gpus", metavar="auto|none|0,3,5",
                             help="GPUs to pack runs onto: auto (the free ones), none, or indices "
                                  "(used even if other processes hold them) [default: auto when "
                                  "runs ask for GPUs]."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the report at the end."),
    until_decided: bool = typer.Option(False, "--until-decided",
                                       help="After the spec's seeds, add seeds only to the (task, config) pairs "
                                            "whose comparison with the baseline is not decided yet "
                                            "(group-sequential; see docs/statistics.md)."),
    max_seeds: int = typer.Option(None, "--max-seeds", min=2,
                                  help="With --until-decided: the most seeds a pair gets [default: 4 × the "
                                       "spec's seeds]."),
    batch: int = typer.Option(None, "--batch", min=1,
                              help="With --until-decided: seeds added per look [default: the spec's seeds]."),
    margin: float = typer.Option(None, "--margin",
                                 help="With --until-decided: differences within ±MARGIN (metric units) count "
                                      "as equivalent, which also stops a pair [default: no equivalence]."),
    alpha: float = typer.Option(0.05, "--alpha", min=1e-6, max=0.5,
                                help="With --until-decided: the familywise error rate, over every (task, "
                                     "config) pair's decision (each pair gets α / pairs)."),
    spending: str = typer.Option("obrien-fleming", "--spending", metavar="obrien-fleming|pocock",
                                 help="With --until-decided: how α is spent over the looks."),
    as_json: bool = typer.Option(False, "--json", help="With --until-decided: print each pair's seeds "
                                 "and decision as JSON at the end (on stdout; progress goes to stderr)."),
) -> None:
    """Run every (task, config, seed) not done yet; resumable, with a live progress bar."""
    from benchlab.spec import load_spec

    spec = load_spec(spec_path, with_overrides(sets, overrides))
    folder = results or default_results(spec)
    _check_run_flags(gpus=gpus, until_decided=until_decided, max_seeds=max_seeds, batch=batch, margin=margin,
                     as_json=as_json, rerun_all=rerun_all)
    if until_decided or dry_run:
        _warn_rules(spec)
    if until_decided and not dry_run:
        return _run_until_decided(spec, folder, max_seeds=max_seeds, batch=batch, margin=margin, alpha=alpha,
                                  spending=spending, as_json=as_json, jobs=jobs, rerun_failed=rerun_failed,
                                  max_failures=max_failures, backend=backend, ray_address=ray_address,
                                  shared_fs=shared_fs, gpus=gpus, report=report, allow_changed=allow_changed,
                                  slurm=slurm)
    if dry_run:
        planned = None
        if until_decided:  # the runs of the next look: the spec's, or the open pairs' next batch
            from benchlab.execute import sequential as seqrun

            design = seqrun.make_design(spec, max_seeds, batch, alpha, spending, margin)
            planned = seqrun.next_look(spec, folder, design)
        return _print_dry_run(spec, folder, planned, rerun_failed=rerun_failed, rerun_all=rerun_all,
                              allow_changed=allow_changed)
    from benchlab.cli.progress import SweepDisplay
    from benchlab.execute.api import run as run_sweep

    backend = backend or spec.backend
    options = backend_options(backend, jobs, ray_address, shared_fs, slurm)
    display = SweepDisplay(console, primary=spec.metrics.primary.name)
    from rich.markup import escape

    console.print(f"results: {escape(str(folder))}", highlight=False)
    if not rerun_all:
        _say_what_is_kept(spec, folder)

    def with_display(sweep: Any) -> Any:
        _print_warnings(sweep.rule_warnings())  # the sweep's own plan, before it launches anything
        result = _sweep_with_signals(sweep, display)
        display.summary(result)
        return result

    outcome = run_sweep(spec, results=folder, jobs=jobs, rerun_failed=rerun_failed, rerun_all=rerun_all,
                        backend=backend, on_event=display.on_event, max_failures=max_failures, gpus=gpus,
                        backend_options=options, allow_changed=allow_changed, report=report,
                        on_sweep=with_display)
    if outcome.report is not None:
        console.print(f"report: [bold]{outcome.report}[/]")
    raise typer.Exit(outcome.exit_code)


def _warn_rules(spec: Any) -> None:
    """The field's evaluation rules, as `validate` warns of them (``evalrules.rule_warnings``): a run
    that breaks one is told so before it spends its GPUs, not only a validate run before it."""
    from benchlab.evalrules import rule_warnings
    from benchlab.plan import expand

    _print_warnings(rule_warnings(spec, expand(spec)))


def _print_warnings(warnings: list[str]) -> None:
    from rich.markup import escape

    for warning in warnings:
        console.print(f"[yellow]warning[/]: {escape(warning)}", highlight=False)


def _say_what_is_kept(spec: Any, folder: Path) -> None:
    """Before a sweep over an existing ledger: refuse one that lost its attempts, and say which
    finished runs beyond the spec's seeds stay."""
    from benchlab.execute.sweep import refuse_without_ledger, sweep_plan
    from benchlab.names.results_files import LEDGER_FILE

    if not (folder / LEDGER_FILE).exists():
        return
    # A ledger that lost its attempts gets the sweep's own refusal, which names the way out.
    refuse_without_ledger(folder)
    kept = sweep_plan(spec, folder).kept  # the sweep plans the same way; here only to say so
    if kept:
        console.print(f"keeping the {kept} finished runs that `run --until-decided` added beyond the "
                      "spec's seeds: they stay in the results and the report (`benchlab status` shows "
                      "each pair's seeds and why it stopped)", highlight=False)


def _check_run_flags(*, gpus: str | None, until_decided: bool, max_seeds: int | None, batch: int | None,
                     margin: float | None, as_json: bool, rerun_all: bool) -> None:
    """A UsageError for flags that do not go together, before anything is read or started."""
    if gpus is not None:
        from benchlab.execute.placement import parse_gpus

        parse_gpus(gpus)  # a bad --gpus is a usage error before anything else happens
    if not until_decided:
        from benchlab.errors import UsageError

        given = [name for name, value in (("--max-seeds", max_seeds), ("--batch", batch), ("--margin", margin),
                                          ("--json", as_json or None)) if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --until-decided")
    else:
        from benchlab.errors import UsageError

        # --spending and the design's other values are checked by make_design, for every caller
        if rerun_all:  # every look would start the design over
            raise UsageError("--rerun-all does not combine with --until-decided; run with a fresh --results folder")


def _print_dry_run(spec: Any, folder: Path, planned: list[Any] | None, *, rerun_failed: bool, rerun_all: bool,
                   allow_changed: bool) -> None:
    """``run --dry-run``: each run that would run, with its command; nothing is started."""
    from rich.markup import escape

    from benchlab.execute.sweep import would_run
    from benchlab.names import run_files

    # What `run` would refuse, the dry run refuses the same way (exit 2, the same message).
    todo = would_run(spec, folder, runs=planned, rerun_failed=rerun_failed, rerun_all=rerun_all,
                     allow_changed=allow_changed)
    runs_dir = run_files.runs_dir(folder)
    if console.is_terminal and len(todo) <= 1000:
        for r in todo:
            command = r.command_for(runs_dir / r.run_id)
            console.print(f"{escape(r.name)}  [dim]{r.run_id}[/]  {escape(command)}",
                          highlight=False, markup=True)
    else:
        # Plain lines in one write: rich's per-line rendering costs seconds at 100,000 runs, and
        # so does a Path per run (the folder is filled in only where a command names it).
        import os
        import sys

        from benchlab.plan import RUN_DIR_PLACEHOLDER

        inside = f"{runs_dir}{os.sep}"
        sys.stdout.write("".join(
            f"{r.name}  {r.run_id}  "
            f"{r.command_for(inside + r.run_id) if RUN_DIR_PLACEHOLDER in r.command else r.command}\n"
            for r in todo))
        sys.stdout.flush()
    console.print(f"{len(todo)} runs would run (dry run: nothing was started)")


def backend_options(backend: str, jobs: int | None, ray_address: str | None, shared_fs: bool,
                    slurm: list[str] | None) -> BackendOptions | None:
    """The backend's own options from the flags that belong to it (None: it has none; a usage
    error for the flags of another backend)."""
    from benchlab.errors import UsageError

    if backend != "ray" and (ray_address or shared_fs):
        raise UsageError("--ray-address and --shared-fs need the ray backend (--backend ray)")
    if backend != "slurm" and slurm:
        raise UsageError("--slurm needs the slurm backend (--backend slurm)")
    if backend == "ray":
        from benchlab.execute.ray import RayOptions

        return RayOptions(address=ray_address, shared_fs=shared_fs, max_inflight=jobs)
    if backend == "slurm":
        pairs = {}
        for item in slurm or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--slurm {item}: expected KEY=VALUE, such as partition=gpu")
            pairs[key.strip()] = value
        if "array_size" in pairs and not pairs["array_size"].isdigit():
            raise UsageError(f"--slurm array_size={pairs['array_size']}: expected a whole number")
        from benchlab.execute.slurm import SlurmOptions, check_available

        check_available()  # no submitit, no sbatch: exit 2 before the results folder is touched
        return SlurmOptions(jobs=jobs, slurm=pairs)
    return None


def _run_until_decided(spec: Any, folder: Path, *, max_seeds: int | None, batch: int | None,
                       margin: float | None, alpha: float, spending: str, as_json: bool, jobs: int | None,
                       rerun_failed: bool, max_failures: int | None, backend: str | None,
                       ray_address: str | None, shared_fs: bool, gpus: str | None, report: bool,
                       allow_changed: bool = False, slurm: list[str] | None = None) -> None:
    """``run --until-decided``: the looks are :func:`benchlab.execute.until_decided.run_until_decided`'s;
    here each look's progress is shown and the decisions printed."""
    from rich.markup import escape

    from benchlab.cli.app import err_console
    from benchlab.cli.progress import SweepDisplay
    from benchlab.execute import sequential as seqrun
    from benchlab.execute.until_decided import run_until_decided

    design = seqrun.make_design(spec, max_seeds, batch, alpha, spending, margin)
    out = err_console if as_json else console
    backend = backend or spec.backend
    options = backend_options(backend, jobs, ray_address, shared_fs, slurm)
    looks = ", ".join(map(str, design.sizes))
    out.print(f"results: {escape(str(folder))}", highlight=False)
    how = "betting confidence sequences" if design.method == "betting" else f"{design.spending} α-spending"
    out.print(f"until decided: looks at {looks} seeds, {how}, α = {design.alpha:g} over "
              f"the {design.pairs} comparison(s) with {escape(str(spec.baseline))} "
              f"(Bonferroni: {design.pair_alpha:.3g} each)"
              + (f", equivalence margin ±{design.margin:g}" if design.margin is not None else ""), highlight=False)
    out.print(("" if design.method == "betting" else "[yellow]warning:[/] ")
              + f"the error rate rests on {escape(design.guarantee)}", highlight=False)

    def run_look(sweep: Any, state: Any) -> Any:
        if state is not None and state.open:
            seeds = sorted({state.wanted[(p.task, p.config)] for p in state.open})
            out.print(f"look at {', '.join(map(str, seeds))} seeds: {len(state.open)} of {len(state.pairs)} "
                      f"comparisons still open", highlight=False)
        display = SweepDisplay(out, primary=spec.metrics.primary.name)
        sweep.on_event = display.on_event
        result = _sweep_with_signals(sweep, display)
        display.summary(result)
        return result

    outcome = run_until_decided(spec, folder, design, run_look=run_look, rerun_failed=rerun_failed,
                                max_failures=max_failures, jobs=jobs, backend=backend, gpus=gpus,
                                backend_options=options, allow_changed=allow_changed)
    if outcome.stopped:
        raise typer.Exit(outcome.exit_code)
    _print_decisions(out, outcome.state, design)
    if as_json:
        print_json(outcome.to_json())
    if report:
        from benchlab.report import write_report

        files = write_report(folder)
        out.print(f"report: [bold]{files.markdown}[/]")
    raise typer.Exit(outcome.exit_code)


def _sweep_with_signals(sweep: Any, display: Any) -> Any:
    """Run ``sweep`` with SIGINT and SIGTERM asking it to stop cleanly."""
    previous = {}

    def stop(signum: int, frame: Any) -> None:
        sweep.request_stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, stop)
    try:
        with display:
            return sweep.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _print_decisions(out: Any, state: Any, design: Any) -> None:
    """One line per comparison: its seeds and why it stopped getting more."""
    from rich.markup import escape
    from rich.table import Table

    if state is None:
        return
    table = Table("task", "config", "seeds", "mean diff", "repeated CI", "stopped because", box=None,
                  pad_edge=False, title=None)
    for p in state.pairs:
        ci = f"[{p.low:.4g}, {p.high:.4g}]" if p.low is not None and p.high is not None else "-"
        failed = f" ({p.failed} without a value)" if p.failed else ""
        table.add_row(escape(p.task), escape(p.config), f"{p.seeds}{failed}",
                      f"{p.mean:+.4g}" if p.mean is not None else "-", ci, escape(p.reason))
    out.print(table)


_STARTER_SPEC = '''\
# A benchlab spec: every config runs on every task with every seed.
# Run it with:  benchlab run {spec}
# Check it (and see the plan) with:  benchlab validate {spec}
name: starter
description: A starter benchmark; replace train.py's toy objective with your training script.

variables:
  steps: 50                 # override from the command line: -s steps=200

tasks:                      # what is evaluated: environments, datasets, eval sets
  - name: easy
    params: {{noise: 0.05}}
    target: 0.9             # the score that counts as "solved" in BENCHMARKS.md
  - name: hard
    params: {{noise: 0.2}}
    target: 0.8

configs:                    # what is compared: algorithms, hyperparameters, checkpoints
  - name: slow
    params: {{lr: 0.02}}
  - name: fast
    params: {{lr: 0.1}}

seeds: 5                    # seeds 0..4, shared by every config so comparisons are paired

# {{task}}, {{config}}, {{seed}}, {{run_dir}}, every param and every variable can be used here.
command: python train.py --lr {{lr}} --noise {{noise}} --steps {{steps}} --seed {{seed}}

# assume: normal: each final score averages fifty noisy steps, so its seeds are close to normal and
# the t-test's verdict stands (without it, or a range, a verdict from few seeds is withheld: docs/statistics.md).
metrics:
  primary: {{name: score, goal: max, assume: normal}}
  secondary: [{{name: loss, goal: min, assume: normal}}]

baseline: slow
resources: {{cpus: 1}}
timeout: 2m
retries: 1
'''

_STARTER_SCRIPT = '''\
"""A toy training script: replace the loop with your own training.

benchlab runs it once per (task, config, seed) with BENCHLAB_RUN_DIR set;
`benchlab.log` records a learning curve, `benchlab.summary` the final scores.
"""

import argparse
import random

from benchlab import log, summary



def count(text):
    """A whole number, also written as 1e2 or 1_000 (benchlab passes -s values as typed)."""
    value = float(text)
    if not value.is_integer() or value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {{text!r}}")
    return int(value)


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--noise", type=float, required=True)
parser.add_argument("--steps", type=count, default=50)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

rng = random.Random(args.seed)
loss = 1.0
for step in range(args.steps):
    loss = loss * (1 - args.lr) + abs(rng.gauss(0, args.noise)) * args.lr
    log(step=step, loss=loss)

summary(score=1 - loss, loss=loss)
print(f"done: score={{1 - loss:.4f}}")
'''


@app.command()
def init(
    directory: Path = typer.Argument(Path("."), help="Where to write benchlab.yaml and train.py."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
) -> None:
    """Write a commented starter spec and a tiny run script that work as written."""
    from benchlab.errors import UsageError

    directory.mkdir(parents=True, exist_ok=True)
    spec, script = directory / "benchlab.yaml", directory / "train.py"
    for path in (spec, script):
        if path.exists() and not force:
            raise UsageError(f"{path} exists; use --force to overwrite it")
    spec.write_text(_STARTER_SPEC.format(spec=spec))
    script.write_text(_STARTER_SCRIPT.format())
    console.print(f"wrote {spec} and {script}")
    console.print(f"next: [bold]benchlab run {spec}[/]")
