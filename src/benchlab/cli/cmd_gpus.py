"""`benchlab gpus`: every GPU, who uses it, and which ones a sweep would take."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from benchlab.cli.app import app, console, err_console, print_json

if TYPE_CHECKING:
    from benchlab.execute.gpus import Inventory


def _gib(mib: int | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.1f}"


@app.command()
def gpus(
    json: bool = typer.Option(False, "--json", help="Print a JSON list (one object per device)."),
    window: float = typer.Option(
        2.0, "--window", min=0.0, help="Seconds to watch utilisation before calling a device idle."
    ),
    reclaim: bool = typer.Option(
        False, "--reclaim", help="End your own processes on idle-held GPUs (SIGTERM, then SIGKILL), after asking."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --reclaim: do not ask (for scripts)."),
    grace: float = typer.Option(
        5.0, "--grace", min=0.0, help="With --reclaim: seconds between SIGTERM and SIGKILL."
    ),
) -> None:
    """Show each GPU as free, busy, or idle-held (memory held at 0% utilisation: a likely zombie).

    For an idle-held device it prints the pids, their owner and the `kill` command
    you may run yourself. `--reclaim` ends the ones that are yours; another user's
    process, or one whose owner cannot be seen from here, is never touched.
    """
    from rich.markup import escape
    from rich.table import Table

    from benchlab.execute.gpus import NoInventory, open_inventory, visible_indices
    from benchlab.execute.placement import GpuSelection, select_devices

    inventory = open_inventory()
    states = inventory.sample(window)
    if reclaim:
        _reclaim(inventory, states, yes=yes, grace=grace, as_json=json)
        return
    if json:
        print_json([s.to_json() for s in states])
    if isinstance(inventory, NoInventory):
        # With --json, stdout holds exactly `[]`; the reason goes beside it on stderr.
        (err_console if json else console).print(escape(inventory.reason))
        return
    if json:
        return
    if not states:
        console.print(f"no NVIDIA GPU found ({escape(inventory.source)}: 0 devices)")
        return

    visible = visible_indices(states)
    style = {"free": "green", "busy": "yellow", "idle-held": "bold red"}
    table = Table(
        title=f"GPUs ({escape(inventory.source)}, {window:g} s window)", title_justify="left"
    )
    for col in ("GPU", "name", "memory GiB", "reserved MiB", "util %", "state", "processes (pid user GiB)"):
        table.add_column(col, justify="right" if col in ("GPU", "util %", "reserved MiB") else "left")
    for s in states:
        procs = ", ".join(
            f"{p.pid} {p.user or '?'} {_gib(p.used_memory_mib)}" for p in s.processes
        ) or ("(not visible from here)" if s.verdict != "free" else "")
        notes = [n for n, on in (("MIG on", s.mig), ("hidden by CUDA_VISIBLE_DEVICES",
                                                       visible is not None and s.index not in visible)) if on]
        table.add_row(
            str(s.index),
            escape(s.name),
            f"{_gib(s.memory_used_mib)} / {_gib(s.memory_total_mib)}",
            "?" if s.memory_reserved_mib is None else str(s.memory_reserved_mib),
            "?" if s.max_utilization_pct is None else str(s.max_utilization_pct),
            f"[{style[s.verdict]}]{s.verdict}[/]" + (f" ({', '.join(notes)})" if notes else ""),
            escape(procs),
        )
    console.print(table)
    free = [str(d.index) for d in select_devices(GpuSelection("auto"), states, visible)]
    console.print(f"free: {', '.join(free) if free else 'none'} (what `--gpus auto` would use)")
    if any(s.mig for s in states):
        console.print("MIG-enabled GPUs are listed as nvidia-smi shows them; benchlab does not place "
                      "runs on MIG instances (`--gpus auto` skips them).")
    for s in states:
        if s.verdict != "idle-held":
            continue
        owners = sorted({p.user or "owner not visible from here" for p in s.processes})
        who = (
            f"pid {' '.join(str(p.pid) for p in s.processes)} ({', '.join(owners)})"
            if s.processes
            else "a process not visible from here"
        )
        msg = (
            f"GPU {s.index} holds {_gib(s.memory_used_mib)} GiB at 0% utilisation over "
            f"{s.samples} reading(s): {who}, likely a zombie."
        )
        if s.kill_hint:
            msg += f" If it is yours and finished, free it with: {s.kill_hint}"
        console.print(escape(msg))
    if any(s.verdict == "idle-held" for s in states):
        console.print("benchlab never kills processes it did not start; `benchlab gpus --reclaim` "
                      "ends your own, after asking.")


def _reclaim(inventory: Inventory, states: list, *, yes: bool, grace: float, as_json: bool) -> None:
    """List the caller's idle-held processes, ask, end the ones the driver still shows holding memory,
    and say what the driver measures as freed."""
    from rich.markup import escape

    from benchlab.execute import reclaim as rc

    out = err_console if as_json else console
    plan = rc.plan(states)
    for h in plan.left:
        out.print(escape(f"left alone: pid {h.process.pid} on GPU {h.device}: {h.refusal}"))
    for i in plan.unseen:
        out.print(f"left alone: GPU {i}: memory held at 0% by processes not visible from here")
    if not plan.mine:
        out.print("nothing to reclaim: no idle-held GPU process of yours")
        if as_json:
            print_json({"freed": [], "left": [_holder_json(h) for h in plan.left]})
        return
    for h in plan.mine:
        out.print(escape(f"yours: pid {h.process.pid} on GPU {h.device}, {_gib(h.process.used_memory_mib)} GiB "
                         f"at 0% utilisation: {h.command or '(command line not readable)'}"))
    if not yes:
        try:
            ok = typer.confirm(f"End {len(plan.mine)} process(es) (SIGTERM, then SIGKILL after {grace:g} s)?",
                               default=False, err=as_json)
        except typer.Abort:
            ok = False
        if not ok:
            out.print("nothing ended (pass --yes to skip the question)")
            raise typer.Exit(1)
    done = rc.end_and_measure(inventory, plan.mine, grace_s=grace)
    for h in done.gone:
        out.print(escape(f"left alone: pid {h.process.pid} on GPU {h.device}: {h.refusal}"))
    for f in done.freed:
        held = _gib(f.holder.process.used_memory_mib)
        if f.how in ("SIGTERM", "SIGKILL"):
            out.print(f"ended pid {f.holder.process.pid} on GPU {f.holder.device} with {f.how} (it held {held} GiB)")
        elif f.how == "gone":
            out.print(f"pid {f.holder.process.pid} on GPU {f.holder.device} had already ended")
        else:
            out.print(escape(f"could not end pid {f.holder.process.pid} on GPU {f.holder.device}: {f.how}"))
    for device, pid in done.lingering:
        out.print(f"the driver still lists pid {pid} on GPU {device} after {rc.RELEASE_WAIT_S:g} s")
    measured = done.measured_freed_mib
    for device in done.devices:
        out.print(f"freed {_gib(measured[device])} GiB on GPU {device}, as the driver measures it "
                  f"(used before: {_gib(done.used_mib(device, after=False))} GiB, "
                  f"after: {_gib(done.used_mib(device, after=True))} GiB)")
    if as_json:
        print_json({"freed": [{**_holder_json(f.holder), "how": f.how} for f in done.freed],
                    "left": [_holder_json(h) for h in [*plan.left, *done.gone]],
                    "measured_freed_mib": {str(d): mib for d, mib in measured.items()}})
    if done.failed:
        raise typer.Exit(1)


def _holder_json(h: object) -> dict:
    from dataclasses import asdict

    d = asdict(h)  # type: ignore[call-overload]
    d.pop("started", None)
    d.pop("command", None)
    return d
