"""`benchlab gpus`: every GPU, who uses it, and which ones a sweep would take."""

from __future__ import annotations

import typer

from benchlab.cli.app import app, console, err_console, print_json


def _gib(mib: int | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.1f}"


@app.command()
def gpus(
    json: bool = typer.Option(False, "--json", help="Print a JSON list (one object per device)."),
    window: float = typer.Option(
        2.0, "--window", min=0.0, help="Seconds to watch utilisation before calling a device idle."
    ),
) -> None:
    """Show each GPU as free, busy, or idle-held (memory held at 0% utilisation: a likely zombie).

    benchlab never kills a process it did not start; for an idle-held device it
    prints the pids, their owner and the `kill` command you may run yourself.
    """
    from rich.markup import escape
    from rich.table import Table

    from benchlab.execute.gpus import NoInventory, open_inventory

    inventory = open_inventory()
    states = inventory.sample(window)
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

    style = {"free": "green", "busy": "yellow", "idle-held": "bold red"}
    table = Table(
        title=f"GPUs ({escape(inventory.source)}, {window:g} s window)", title_justify="left"
    )
    for col in ("GPU", "name", "memory GiB", "util %", "state", "processes (pid user GiB)"):
        table.add_column(col, justify="right" if col in ("GPU", "util %") else "left")
    for s in states:
        procs = ", ".join(
            f"{p.pid} {p.user or '?'} {_gib(p.used_memory_mib)}" for p in s.processes
        ) or ("(not visible from here)" if s.verdict != "free" else "")
        table.add_row(
            str(s.index),
            escape(s.name),
            f"{_gib(s.memory_used_mib)} / {_gib(s.memory_total_mib)}",
            "?" if s.max_utilization_pct is None else str(s.max_utilization_pct),
            f"[{style[s.verdict]}]{s.verdict}[/]",
            escape(procs),
        )
    console.print(table)
    free = [str(s.index) for s in states if s.verdict == "free"]
    console.print(f"free: {', '.join(free) if free else 'none'} (what `--gpus auto` would use)")
    for s in states:
        if s.verdict != "idle-held":
            continue
        owners = sorted({p.user or "?" for p in s.processes})
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
        console.print("benchlab never kills processes it did not start.")
