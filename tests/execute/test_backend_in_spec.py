"""A spec may name any backend the registry knows, one installed through the ``benchlab.backends``
entry point included; an unknown name is refused with the registry's list."""

from __future__ import annotations

import os
from pathlib import Path

from benchlab_testing import run_cli

SPEC = """name: eps
tasks: [{name: t}]
configs: [{name: a}]
seeds: 1
command: python -c "print(1)"
metrics: {primary: score}
backend: BACKEND
"""

PLUGIN = '''
from benchlab.execute.local import LocalBackend


class QueueBackend(LocalBackend):
    """A backend of another package: here the local one under another name."""
'''


def _install_plugin(site: Path) -> None:
    """A package with an entry point, laid out as pip installs one (a dist-info folder beside it)."""
    (site / "eps_plugin.py").write_text(PLUGIN)
    info = site / "eps_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eps-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[benchlab.backends]\nqueue = eps_plugin:QueueBackend\n")


def test_a_backend_installed_by_entry_point_is_accepted_in_a_spec(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    (tmp_path / "bench.yaml").write_text(SPEC.replace("BACKEND", "queue"))
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("validate", "bench.yaml", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    # Without the package the same spec is refused, and the message lists what is known.
    proc = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("bench.yaml:7 backend: expected one of 'debug', 'launcher', 'local', 'ray', 'slurm', got 'queue'"
            in proc.stderr)


def test_an_unknown_backend_names_the_line_and_the_choices(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text(SPEC.replace("BACKEND", "lokal"))
    proc = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("bench.yaml:7 backend: expected one of 'debug', 'launcher', 'local', 'ray', 'slurm', got 'lokal'"
            in proc.stderr)
