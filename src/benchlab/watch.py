"""Evaluate checkpoints as they appear: each new complete checkpoint folder becomes a config.

A trainer writes ``DIR/step-1000/``, ``DIR/step-2000/``, ... ; ``benchlab watch DIR
--spec eval.yaml`` turns each into a config cloned from the spec's first config
(its template), with the parameter ``checkpoint`` set to the folder's path and
the folder's name as the config's name, and runs the spec's tasks on it. Runs of
checkpoints already evaluated are skipped, as in any re-run.

A checkpoint is complete when its marker file exists (``--marker``), or, without
a marker, when none of its files has changed size or modification time for
``settle`` seconds — a checkpoint still being written is never evaluated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchlab.errors import Problem, SpecError, UserError
from benchlab.spec import Config, Spec

_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def config_name(folder: Path) -> str:
    """A config name from a checkpoint folder's name (characters a name may not hold become '-')."""
    name = _SAFE.sub("-", folder.name).strip("-.")
    return name or "checkpoint"


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    sig = []
    for path in sorted(folder.rglob("*")):
        try:
            st = path.stat()
        except OSError:
            continue
        if path.is_file():
            sig.append((str(path.relative_to(folder)), st.st_size, st.st_mtime_ns))
    return tuple(sig)


@dataclass
class CheckpointWatcher:
    """Finds checkpoint folders under ``root`` that are complete."""

    root: Path
    marker: str | None = None
    settle: float = 30.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[Path, tuple[tuple[tuple[str, int, int], ...], float]] = field(default_factory=dict)

    def complete(self) -> list[Path]:
        """Every complete checkpoint folder now, oldest name first (natural order of step numbers)."""
        if not self.root.is_dir():
            raise UserError(f"{self.root}: no such folder to watch")
        done = []
        now = self.clock()
        for folder in sorted((p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                             key=_natural):
            if self.marker is not None:
                if (folder / self.marker).exists():
                    done.append(folder)
                continue
            sig = _signature(folder)
            if not sig:
                continue
            previous = self._seen.get(folder)
            if previous is None or previous[0] != sig:
                self._seen[folder] = (sig, now)
                if self.settle > 0:
                    continue
            if now - self._seen[folder][1] >= self.settle:
                done.append(folder)
        return done


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def spec_for_checkpoints(spec: Spec, checkpoints: list[Path]) -> Spec:
    """The spec with one config per checkpoint, cloned from its first config."""
    template = spec.configs[0]
    if "checkpoint" not in template.params:
        where = str(spec.path) if spec.path else "<spec>"
        raise SpecError([Problem(where, None, "configs[0].params",
                                 "benchlab watch needs a 'checkpoint' param on the first config "
                                 "(the template); each checkpoint folder fills it in")])
    configs = []
    names: set[str] = set()
    for folder in checkpoints:
        name = config_name(folder)
        while name in names:
            name += "_"
        names.add(name)
        configs.append(Config(name=name, params={**template.params, "checkpoint": str(folder.resolve())},
                              command=template.command, description=f"checkpoint {folder}"))
    baseline = configs[0].name if configs else None
    clone = spec.model_copy(update={"configs": configs, "baseline": baseline})
    clone.path, clone.overrides = spec.path, spec.overrides
    return clone
