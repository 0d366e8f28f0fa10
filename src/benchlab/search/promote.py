"""Promotion: a new spec file, the original plus a config with the best trial's params.

The new file sits beside the original (``bench.yaml`` -> ``bench.<NAME>.yaml``) and never
replaces a file. Its text is the original's, comments kept, with the new config added at the end
of ``configs:``; a comment at the top and the config's ``origin`` say which study, trial and
metric its params come from. The config keeps the base config's other fields (command,
resources), so ``benchlab run`` on the new file runs exactly one config more, on the benchmark's
own seeds, into the same results folder (``origin`` lets the promoted spec take it over).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchlab.errors import SearchError, SpecError
from benchlab.search.driver import base_config_name, search_folder
from benchlab.search.study import SUMMARY_ATTR, goal_of, read_study
from benchlab.spec import Spec, parse_spec
from benchlab.spec_checks import NAME_RE

_CONFIGS_KEY = re.compile(r"^configs:\s*(#.*)?$")


@dataclass(frozen=True)
class Promoted:
    """What ``promote`` wrote."""

    path: Path
    config: str
    study: str
    trial: int
    metric: str
    value: float
    params: dict[str, Any]


def promoted_path(spec_path: Path, name: str) -> Path:
    return spec_path.with_name(f"{spec_path.stem}.{name}{spec_path.suffix or '.yaml'}")


def promote(spec: Spec, results_dir: Path | str, name: str) -> Promoted:
    """Write the spec with a config ``name`` holding the best trial's params (see the module doc)."""
    if spec.search is None or spec.path is None:
        raise SearchError(spec.name, "promotion needs a spec file with a `search` section")
    study_name = f"{spec.name}:{spec.search.name}"
    if not NAME_RE.match(name):
        raise SearchError(study_name, f"--promote {name!r}: a config name takes letters, digits and . _ + - only")
    taken = {c.name for c in spec.configs} | set(spec.grids)
    if name in taken:
        raise SearchError(study_name, f"--promote {name}: {spec.path} already has a config {name!r}; pick another name")
    target = promoted_path(spec.path, name)
    if target.exists():
        raise SearchError(study_name, f"{target} exists; promotion never overwrites a file: move it away or pick "
                                      "another name")
    study = read_study(search_folder(results_dir, spec))
    try:
        best = study.best_trial
    except ValueError:
        raise SearchError(study_name, f"the study {study.study_name} has no completed trial yet: nothing to "
                                      "promote") from None
    search = spec.search
    base = base_config_name(spec)
    text = spec.path.read_text(encoding="utf-8")
    raw = yaml.safe_load(text) or {}
    raw_base = next((dict(c) for c in raw.get("configs") or [] if isinstance(c, dict) and c.get("name") == base), {})
    raw_base.pop("grid", None)
    raw_base.pop("origin", None)
    params = {k: _plain(v) for k, v in best.params.items()}
    assert best.value is not None  # a completed trial has its value
    value = float(best.value)
    seeds = search.seed_list(spec.seed_list)
    origin = {"spec": os.path.basename(spec.path), "study": study.study_name, "trial": best.number,
              "metric": search.metric.name, "value": value, "goal": goal_of(spec),
              "summary": str(study.user_attrs.get(SUMMARY_ATTR, search.metric.summary)), "seeds": seeds}
    entry = {**raw_base, "name": name, "params": {**(raw_base.get("params") or {}), **params},
             "description": f"{base} tuned by benchlab search (study {study.study_name}, trial {best.number})",
             "origin": origin}
    note = (f"promoted by `benchlab search --promote {name}`: config {name} is trial {best.number} of study "
            f"{study.study_name} ({search.metric.name} = {value:.6g}, {origin['goal']}, {origin['summary']} over "
            f"search seeds {seeds})")
    header = (f"# This file is {spec.path.name} with one config more, {name},\n"
              f"# {note}.\n")
    new_text = header + _with_config(text, entry, note)
    try:
        parse_spec(new_text, file=str(target), path=target)
    except SpecError:
        # A layout the insertion does not know (configs written inline): the spec written out
        # again in full, without the original's comments.
        raw.setdefault("configs", []).append(entry)
        new_text = header + yaml.safe_dump(raw, sort_keys=False, default_flow_style=None, width=100)
        parse_spec(new_text, file=str(target), path=target)
    with open(target, "x", encoding="utf-8") as fh:  # "x": never replaces a file written meanwhile
        fh.write(new_text)
    return Promoted(target, name, study.study_name, best.number, search.metric.name, value, params)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _with_config(text: str, entry: dict[str, Any], note: str) -> str:
    """``text`` with ``entry`` added as the last item of its block-style ``configs:`` list
    (``text`` unchanged when there is none such: the caller then writes the spec out in full)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _CONFIGS_KEY.match(line.rstrip("\n"))), None)
    if start is None:
        return text
    last, indent = start, None
    for j in range(start + 1, len(lines)):
        line = lines[j]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not line[0].isspace() and not line.startswith("-"):
            break  # the next top-level key
        if indent is None and stripped.startswith("- "):
            indent = len(line) - len(line.lstrip())
        last = j
    if indent is None:
        return text
    pad = " " * indent
    item = yaml.safe_dump([entry], sort_keys=False, default_flow_style=None, width=100)
    block = f"{pad}# {note}\n" + "".join(pad + line + "\n" for line in item.splitlines())
    if not lines[last].endswith("\n"):
        lines[last] += "\n"
    return "".join(lines[: last + 1]) + block + "".join(lines[last + 1:])
