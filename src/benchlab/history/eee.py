"""Every Eval Ever records of a results folder (``benchlab export --format eee``).

Every Eval Ever (schema 0.3.0) is the shared schema for published evaluation results: one
aggregate record per model and evaluation run, at ``data/<benchmark>/<developer>/<model>/<UUID4>.json``,
each result with its score and its uncertainty. benchlab writes one record per config (a model or
checkpoint) with a result per task and metric:

- ``score``: the mean over the config's completed seeds (the report's number);
- ``uncertainty``: over questions where the runs kept per-question records (the standard error
  and 95% interval the report's question-level section shows, clustered where questions come in
  groups; ``num_samples`` is the number of questions), otherwise over seeds where there are two
  or more (the report's t interval; ``num_samples`` the seeds);
- ``details``: the seeds, and over-seed spread beside the question-level uncertainty.

The numbers are the report's: the seed-level ones from the report's analysis of the primary
metric, the question-level ones from its question analysis. A record's file name is a UUID4
derived from what it holds, so exporting the same results again writes the same files.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.json_types import JsonObject

if TYPE_CHECKING:
    from benchlab.results import Results
    from benchlab.stats.analysis import SummaryRow
    from benchlab.stats.question_table import QuestionSummaryRow

SCHEMA_VERSION = "0.3.0"
#: Config params that name the model a config evaluates, in the order they are looked for.
MODEL_PARAMS = ("model_id", "pretrained", "model", "checkpoint", "model_name")


@dataclass(frozen=True)
class EeeRecord:
    """One aggregate record and where it goes in the datastore (``data/...``)."""

    path: str
    record: JsonObject

    def text(self) -> str:
        return json.dumps(self.record, indent=2, sort_keys=False, allow_nan=False) + "\n"


@dataclass(frozen=True)
class EeeSource:
    """Who publishes: the schema's ``source_metadata``."""

    organization: str = "unknown"
    relationship: str = "other"  # first_party | third_party | collaborative | other
    availability: str = "unknown"  # open_weights | closed_weights | unknown


def _portable(name: str) -> str:
    """A datastore path component: the validator's portable file-name rule."""
    cleaned = "".join(c if c.isalnum() or c in "-_.+" else "-" for c in name).strip(". ")
    return cleaned or "unnamed"


def _model_id(config: str, params: JsonObject) -> str:
    for key in MODEL_PARAMS:
        value = params.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return config


def _uuid4_of(text: str) -> str:
    """A UUID4-shaped name derived from ``text``: the same record gets the same file."""
    return str(uuid.UUID(bytes=hashlib.sha256(text.encode()).digest()[:16], version=4))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _bound(value: float | None, low: bool) -> float | str:
    if value is None or not math.isfinite(value):
        return "-Infinity" if low else "Infinity"
    return value


def _seed_uncertainty(row: SummaryRow) -> JsonObject:
    out: JsonObject = {"num_samples": row.n}
    if row.std is not None and row.n >= 2 and math.isfinite(row.std):
        out["standard_deviation"] = row.std
        out["standard_error"] = {"value": row.std / math.sqrt(row.n), "method": "analytic (over seeds)"}
    if _finite(row.ci_low) is not None and _finite(row.ci_high) is not None:
        out["confidence_interval"] = {"lower": row.ci_low, "upper": row.ci_high, "confidence_level": 0.95,
                                      "method": f"{row.ci_method or 'Student t'} over seeds"}
    return out


def _question_uncertainty(q: QuestionSummaryRow) -> JsonObject:
    r = q.result
    out: JsonObject = {"num_samples": r.n_questions}
    if r.se is not None and math.isfinite(r.se):
        out["standard_error"] = {"value": r.se, "method": f"analytic ({r.se_type})"}
    if _finite(r.ci_low) is not None and _finite(r.ci_high) is not None:
        if r.ci_method == "t":
            method = f"Student t on {r.df:g} df ({r.se_type})" if r.df is not None else r.se_type
        else:  # binary scores: the Wilson score interval, as the report's question-level section shows
            method = f"{r.ci_method} score interval ({r.se_type})"
        out["confidence_interval"] = {"lower": r.ci_low, "upper": r.ci_high, "confidence_level": 0.95,
                                      "method": method}
    return out


def _result(task: str, metric: str, goal: str, score: float, rng: tuple[float, float] | None,
            uncertainty: JsonObject, details: dict[str, str], benchmark: str) -> JsonObject:
    low, high = rng if rng is not None else (None, None)
    result: JsonObject = {
        "evaluation_result_id": f"{task}/{metric}",
        "evaluation_name": task,
        "source_data": {"dataset_name": task, "source_type": "other",
                        "additional_details": {"benchmark": benchmark}},
        "metric_config": {
            "metric_id": metric, "metric_name": metric, "lower_is_better": goal == "min",
            "score_type": "continuous", "min_score": _bound(low, True), "max_score": _bound(high, False),
        },
        "score_details": {"score": score, "details": details},
    }
    if len(uncertainty) > 1 or "standard_error" in uncertainty:
        result["score_details"]["uncertainty"] = uncertainty  # type: ignore[index]
    return result


def eee_records(table: Results, source: EeeSource | None = None, *, now: float | None = None) -> list[EeeRecord]:
    """One Every Eval Ever record per config of the results table (see the module docstring)."""
    from benchlab import __version__
    from benchlab.report.questions import question_analysis
    from benchlab.stats.ranges import metric_ranges
    from benchlab.stats.results_analysis import analyze_results

    source = source or EeeSource()
    info = table.info
    rows = analyze_results(table).rows_of()
    questions = question_analysis(table.folder, info, table.run_ids) if table.folder is not None else None
    ranges = metric_ranges(info.spec)
    params = {str(c.get("name")): dict(c.get("params") or {}) for c in info.spec.get("configs") or []
              if isinstance(c, dict)}
    tool = _tool(table)
    stamp = str(int(now if now is not None else time.time()))
    out: list[EeeRecord] = []
    for config in info.configs:
        results: list[JsonObject] = []
        q_rows = [q for q in (questions.summary if questions is not None else []) if q.config == config]
        for row in (r for r in rows if r.config == config and r.mean is not None and math.isfinite(r.mean)):
            rng = ranges.get(f"{row.task}/{row.metric}") or ranges.get(row.metric)
            details = {"seeds": str(row.n)}
            if row.seeds is not None:
                details["seeds_planned"] = str(row.seeds.planned)
            over_q = next((q for q in q_rows if q.task == row.task and _same_metric(q.metric, row.metric)), None)
            if over_q is not None:
                uncertainty = _question_uncertainty(over_q)
                seed_part = _seed_uncertainty(row)
                if "confidence_interval" in seed_part:
                    ci = seed_part["confidence_interval"]
                    details["seed_ci_95"] = f"[{ci['lower']!r}, {ci['upper']!r}]"  # type: ignore[index]
                if "standard_deviation" in seed_part:
                    details["seed_standard_deviation"] = repr(seed_part["standard_deviation"])
            else:
                uncertainty = _seed_uncertainty(row)
            score = row.mean
            assert score is not None  # rows without a finite mean were left out above
            results.append(_result(row.task, row.metric, info.metric_goal(row.metric), float(score), rng,
                                   uncertainty, details, info.name))
        for q in q_rows:  # the harness's own metrics over questions, beside the spec's
            if any(_same_metric(q.metric, r.metric) and q.task == r.task for r in rows if r.config == config):
                continue
            if not math.isfinite(q.result.mean):
                continue
            results.append(_result(q.task, q.metric, info.metric_goal(q.metric), float(q.result.mean),
                                   ranges.get(q.metric), _question_uncertainty(q), {"seeds": str(q.seeds)},
                                   info.name))
        if not results:
            continue
        model_id = _model_id(config, params.get(config, {}))
        developer, _, model = model_id.rpartition("/")
        developer = developer.split("/")[-1] if developer else "local"
        record: JsonObject = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": f"{info.name}/{model_id}/{stamp}",
            "retrieved_timestamp": stamp,
            "source_metadata": {"source_name": f"benchlab results: {info.name}", "source_type": "evaluation_run",
                                "source_organization_name": source.organization,
                                "evaluator_relationship": source.relationship},
            "model_info": {"name": config, "id": model_id if "/" in model_id else f"{developer}/{model_id}",
                           "developer": developer,
                           "additional_details": {"deployment_type": "self_deployed",
                                                  "model_availability": source.availability,
                                                  "benchlab_config": config}},
            "eval_library": {"name": tool[0], "version": tool[1],
                             "additional_details": {"recorded_by": f"benchlab {__version__}"}},
            "evaluation_results": results,
        }
        # Named for what it holds, not when it was written: an unchanged result keeps its file.
        content = json.dumps({k: v for k, v in record.items() if k not in ("evaluation_id", "retrieved_timestamp")},
                             sort_keys=True)
        path = f"data/{_portable(info.name)}/{_portable(developer)}/{_portable(model)}/{_uuid4_of(content)}.json"
        out.append(EeeRecord(path, record))
    return out


def _same_metric(harness: str, spec: str) -> bool:
    """``acc,none`` (lm-eval's key) is the spec's ``acc``."""
    return harness == spec or harness.split(",", 1)[0] == spec


def _tool(table: Results) -> tuple[str, str]:
    evaluation = table.environment.provenance.get("evaluation")
    if isinstance(evaluation, dict) and evaluation.get("tool"):
        return str(evaluation["tool"]), str(evaluation.get("version") or "unknown")
    from benchlab import __version__

    return "benchlab", __version__


def write_eee(folder: Path, target: str, source: EeeSource | None = None, *, dry_run: bool = False) -> list[str]:
    """Write the records of the results ``folder`` under ``target`` (a folder or any fsspec URL);
    return their paths, relative to ``target``."""
    from benchlab.results import read

    records = eee_records(read(folder, searches=False, curves=False), source)
    if dry_run:
        return [r.path for r in records]
    import fsspec

    fs, root = fsspec.core.url_to_fs(target)
    for r in records:
        where = f"{root.rstrip('/')}/{r.path}"
        fs.makedirs(where.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(where, "w") as f:
            f.write(r.text())
    return [r.path for r in records]
