"""`benchlab skills`: agent skill files for benchlab's five workflows."""

from __future__ import annotations

from pathlib import Path

import typer

from benchlab.cli.app import app, console, print_json

skills_app = typer.Typer(help="Agent skill files (SKILL.md) for benchlab's five workflows.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")


@skills_app.command("list")
def list_skills(as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """The shipped skills: folder, name and what each is for."""
    from benchlab.skills import skills

    found = skills()
    if as_json:
        print_json([{"folder": s.folder, "name": s.name, "description": s.description} for s in found])
        return
    for s in found:
        console.print(f"{s.folder}: {s.description}", markup=False, highlight=False)


@skills_app.command("install")
def install_skills(
    directory: Path = typer.Argument(Path("."), help="The project folder to install into."),
    folder: list[str] = typer.Option(None, "--folder", help="A skills folder under DIRECTORY (repeatable) "
                                     "[default: .claude/skills and .agents/skills]."),
    force: bool = typer.Option(False, "--force", help="Overwrite skill files you changed."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
) -> None:
    """Write a SKILL.md per workflow into the folders coding agents read skills from."""
    from benchlab.skills import AGENT_FOLDERS, install

    done = install(directory, tuple(folder) if folder else AGENT_FOLDERS, force=force)
    if as_json:
        print_json([{"path": str(d.path), "action": d.action} for d in done])
        return
    for d in done:
        console.print(f"{d.action} {d.path}", markup=False, highlight=False)
    kept = sum(d.action == "kept" for d in done)
    if kept:
        console.print(f"{kept} file(s) you changed were kept; --force overwrites them", markup=False,
                      highlight=False)
