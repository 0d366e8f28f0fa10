"""Replacing report files so that a reader never sees a half-written or missing one.

Each file is written beside its final name and renamed over it (a rename within a
folder is atomic). Figures are drawn into a staging folder of their own, moved
into ``plots/`` one rename each once all are drawn, and figures the new report no
longer has are removed only after the new Markdown and HTML point elsewhere: a
report killed at any moment leaves the previous one whole.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from benchlab.names.results_files import write_text_atomic

__all__ = ["STAGING_PREFIX", "publish_plots", "remove_stale_plots", "staging_dir", "write_text_atomic"]

STAGING_PREFIX = ".plots-"


def staging_dir(out_dir: Path) -> Path:
    """A fresh folder to draw this report's figures into; those of killed reports are removed."""
    import psutil

    for old in out_dir.glob(f"{STAGING_PREFIX}*"):
        pid = old.name[len(STAGING_PREFIX):]
        if not (pid.isdigit() and psutil.pid_exists(int(pid))) or int(pid) == os.getpid():
            shutil.rmtree(old, ignore_errors=True)
    staging = out_dir / f"{STAGING_PREFIX}{os.getpid()}"
    staging.mkdir(parents=True, exist_ok=True)
    return staging


def publish_plots(staging: Path, plot_dir: Path) -> set[str]:
    """Move the staged figures into ``plot_dir`` (each replacing its namesake); their names."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    names = set()
    for png in sorted(staging.glob("*.png")):
        os.replace(png, plot_dir / png.name)
        names.add(png.name)
    shutil.rmtree(staging, ignore_errors=True)
    return names


def remove_stale_plots(plot_dir: Path, keep: set[str]) -> None:
    """Remove the figures of an earlier report that this one did not draw again."""
    for png in plot_dir.glob("*.png"):
        if png.name not in keep:
            png.unlink(missing_ok=True)
