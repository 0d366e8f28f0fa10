"""Agent skill files for benchlab's five workflows (``benchlab skills install``).

Each workflow is a folder holding one ``SKILL.md`` (a YAML front matter with ``name`` and
``description``, then the commands and the rules an agent must not break), the layout coding agents
read skills from. ``install`` copies them into each skills folder named (``.claude/skills/`` and
``.agents/skills/`` under a project by default), never overwriting a file the user changed unless
asked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from benchlab.errors import UsageError

#: The folders agents read skills from, relative to a project's root.
AGENT_FOLDERS = (".claude/skills", ".agents/skills")
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    """One workflow's skill: its folder name, the ``name`` and ``description`` of its front
    matter, and the whole text."""

    folder: str
    name: str
    description: str
    text: str


@dataclass(frozen=True)
class Installed:
    """What ``install`` did with one file: ``written``, ``unchanged`` or ``kept`` (the user's edit)."""

    path: Path
    action: str


def skills() -> list[Skill]:
    """The shipped skills, in folder order."""
    root = resources.files(__name__)
    found = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        skill_md = entry / SKILL_FILE
        if not entry.is_dir() or not skill_md.is_file():
            continue
        text = skill_md.read_text(encoding="utf-8")
        front = _front_matter(text, entry.name)
        found.append(Skill(entry.name, front["name"], front["description"], text))
    return found


def _front_matter(text: str, where: str) -> dict[str, str]:
    import yaml

    if not text.startswith("---\n"):
        raise ValueError(f"skill {where}: no front matter")
    head = text[4:].split("\n---\n", 1)[0]
    data = yaml.safe_load(head)
    if not isinstance(data, dict) or not {"name", "description"} <= set(data):
        raise ValueError(f"skill {where}: the front matter needs name and description")
    return {"name": str(data["name"]), "description": str(data["description"])}


def install(root: Path, folders: tuple[str, ...] = AGENT_FOLDERS, *, force: bool = False) -> list[Installed]:
    """Write every skill into ``root/<folder>/<skill>/SKILL.md`` for each folder.

    A file that already holds another text is the user's edit and is kept (``kept``), unless
    ``force``; one that holds this text is ``unchanged``. Raises :class:`UsageError` when ``root``
    is a file."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: is a file; give the project folder to install the skills into")
    done: list[Installed] = []
    for folder in folders:
        for skill in skills():
            path = root / folder / skill.folder / SKILL_FILE
            if path.is_file():
                current = path.read_text(encoding="utf-8")
                if current == skill.text:
                    done.append(Installed(path, "unchanged"))
                    continue
                if not force:
                    done.append(Installed(path, "kept"))
                    continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(skill.text, encoding="utf-8")
            done.append(Installed(path, "written"))
    return done


def fingerprint() -> str:
    """A short hash of every shipped skill's text (shown by ``skills list``)."""
    digest = hashlib.sha256()
    for skill in skills():
        digest.update(skill.text.encode())
    return digest.hexdigest()[:12]
