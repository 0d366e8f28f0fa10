"""The jobs of Hydra multiruns: every job folder (``multirun/DATE/TIME/N/``) under the folders named.

Hydra leaves in each job folder the job's composed config (``.hydra/config.yaml``), the overrides
that made it (``.hydra/overrides.yaml``) and Hydra's own settings (``.hydra/hydra.yaml``, which
names the job), beside whatever the job wrote. They are read with Hydra's own tools (OmegaConf
for the files, Hydra's override parser for the overrides). A job's metrics are read from its
folder as a run's are from its run directory (benchlab's ``metrics.json`` / ``metrics.jsonl``,
or the extractor the import names: a regex over the job's log, a JSON or CSV file,
TensorBoard events), by :func:`benchlab.collect.collect_run`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchlab.collect import collect_run
from benchlab.collect.importers import SourceRun
from benchlab.errors import DataError, UsageError
from benchlab.names.extras import require
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE
from benchlab.spec import Metric

_HYDRA_DIR = ".hydra"
#: Hydra's composed config of a job, in its .hydra folder: Hydra spells it as a run's config.yaml is spelt.
_HYDRA_CONFIG = CONFIG_FILE


def job_folders(sources: list[Path]) -> list[Path]:
    """The Hydra job folders (those holding ``.hydra/config.yaml``) under ``sources``, in order."""
    found: list[Path] = []
    for source in sources:
        if not source.is_dir():
            raise DataError(f"{source}: no such folder; name a Hydra multirun folder (multirun/DATE/TIME)")
        jobs = [p.parent.parent for p in source.rglob(f"{_HYDRA_DIR}/{_HYDRA_CONFIG}")]
        found += sorted(jobs, key=lambda p: [int(x) if x.isdigit() else x for x in p.relative_to(source).parts])
    if not found:
        raise DataError(f"no Hydra job under {', '.join(map(str, sources))} (a job folder holds "
                        f"{_HYDRA_DIR}/{_HYDRA_CONFIG} and {_HYDRA_DIR}/overrides.yaml)")
    return list(dict.fromkeys(p.resolve() for p in found))


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def metric_of(name: str, goal: str, source: str | None) -> Metric:
    """The primary metric, read from ``source`` (a metric's ``from:`` as a spec writes it, in YAML) or,
    without one, from benchlab's own metric files."""
    import yaml
    from pydantic import ValidationError

    data: dict[str, Any] = {"name": name, "goal": goal}
    if source:
        try:
            data["from"] = yaml.safe_load(source)
        except yaml.YAMLError as exc:
            raise UsageError(f"--from {source}: not YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Metric.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise UsageError(f"--from {source}: {where}: {error['msg']} (docs/extractors.md)") from None


def read_runs(sources: list[Path], metric: Metric) -> Iterator[SourceRun]:
    """The jobs under ``sources``, each with what its folder reports (``metric`` with its source, if
    it has one, and benchlab's own metric files)."""
    require("import", "benchlab import hydra", ("hydra",))
    for job in job_folders(sources):
        yield _read_job(job, metric)


def _read_job(job: Path, metric: Metric) -> SourceRun:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    hydra_dir = job / _HYDRA_DIR
    try:
        config = OmegaConf.to_container(OmegaConf.load(hydra_dir / _HYDRA_CONFIG), resolve=False)
        written = OmegaConf.to_container(OmegaConf.load(hydra_dir / "overrides.yaml")) \
            if (hydra_dir / "overrides.yaml").exists() else []
        overrides = OverridesParser.create().parse_overrides([str(o) for o in written or []])
        settings = OmegaConf.load(hydra_dir / "hydra.yaml") if (hydra_dir / "hydra.yaml").exists() else None
    except (OSError, OmegaConfBaseException, HydraException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return SourceRun("hydra", str(job), job.name, {}, unfinished=f"its {_HYDRA_DIR} files cannot be read: {first}")
    params: dict[str, Any] = {}
    _flat("", config if isinstance(config, dict) else {}, params)
    swept = []
    for override in overrides:
        if override.is_delete():
            continue
        key = override.key_or_group
        swept.append(key)
        if key not in params:  # a config group's choice (optimizer=adam): its name, not its contents
            params[key] = override.value()
    name = str(OmegaConf.select(settings, "hydra.job.name", default="") or "") if settings is not None else ""
    number = OmegaConf.select(settings, "hydra.job.num", default=None) if settings is not None else None
    collected = collect_run(job, [metric] if metric.source is not None else [], {"job": job.name})
    logs = sorted(job.glob("*.log"))
    log = next((p for p in logs if p.stem == name), logs[0] if logs else None)
    files = {_HYDRA_DIR: hydra_dir, **({LOG_FILE: log} if log is not None else {})}
    stamps = [p.stat().st_mtime for p in (hydra_dir / _HYDRA_CONFIG, log) if p is not None]
    return SourceRun(
        "hydra", str(job), f"{name} #{number}" if number is not None else job.name, params,
        finals=dict(collected.finals), series=dict(collected.series), problems=dict(collected.problems),
        started=min(stamps), ended=max(stamps), files=files, default_task=name or "hydra", swept=tuple(swept),
        origin={"job_folder": str(job), "job": name, "job_num": number, "overrides": [str(o) for o in written or []]})
