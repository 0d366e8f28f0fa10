"""The runs of MLflow experiments, read with MLflow's own client (``MlflowClient``).

A tracking store is named as MLflow names it: a local folder (``mlruns``, MLflow's file store),
a ``sqlite:///`` database or the URL of a tracking server (``http://127.0.0.1:5000``). Each run's
params and tags are what :class:`~benchlab.collect.importers.Naming` reads its coordinates from;
its metrics' latest values are its final values, and a metric logged at more than one step is
also a curve, read whole with ``get_metric_history`` (step, value).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchlab.collect.importers import SourceRun
from benchlab.errors import DataError
from benchlab.names.extras import require

#: Runs fetched per request to the tracking store.
PAGE = 1000
_ALLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"


def tracking_uri(source: str) -> str:
    """The tracking URI MLflow takes for ``source``: a URI as it is, a ``.db`` file as SQLite, a
    folder as a file store."""
    if "://" in source:
        return source
    path = Path(source)
    if path.suffix == ".db":
        return f"sqlite:///{path.resolve()}"
    if not path.is_dir():
        raise DataError(f"{source}: no such folder; name an MLflow tracking store (a folder such as mlruns, a "
                        "sqlite:///FILE.db or a tracking server's http:// URL)")
    return path.resolve().as_uri()


@contextmanager
def _file_store_allowed() -> Iterator[None]:
    # MLflow 3 refuses to open a file store (mlruns) unless told to: it keeps the format for
    # reading and asks writers to migrate. Reading the runs a user already has is what is wanted.
    before = os.environ.get(_ALLOW_FILE_STORE)
    os.environ[_ALLOW_FILE_STORE] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_ALLOW_FILE_STORE, None)
        else:
            os.environ[_ALLOW_FILE_STORE] = before


def read_runs(source: str, experiments: list[str] | None = None, filter_string: str = "") -> list[SourceRun]:
    """Every run of ``experiments`` (names or ids; default: every active experiment) in the tracking
    store ``source`` that ``filter_string`` (MLflow's search syntax: ``params.lr = '0.01'``,
    ``tags.stage = 'final'``) keeps; a run that did not finish comes with its status, for the import
    to name."""
    require("import", "benchlab import mlflow", ("mlflow",))
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(source)
    out: list[SourceRun] = []
    with _file_store_allowed():
        try:
            client = MlflowClient(tracking_uri=uri)
            for experiment in _experiments(client, experiments, ViewType):
                token = None
                while True:
                    page = client.search_runs([experiment.experiment_id], filter_string=filter_string,
                                              run_view_type=ViewType.ACTIVE_ONLY,
                                              max_results=PAGE, order_by=["attributes.start_time ASC"],
                                              page_token=token)
                    out += [_source_run(client, run, experiment.name, uri) for run in page]
                    token = page.token
                    if not token:
                        break
        except MlflowException as exc:
            raise DataError(f"{source}: MLflow could not read the tracking store: {_first_line(exc)}") from None
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _experiments(client: Any, wanted: list[str] | None, view_type: Any) -> list[Any]:
    every = client.search_experiments(view_type=view_type.ACTIVE_ONLY)
    if not wanted:
        return list(every)
    by_name = {e.name: e for e in every}
    by_id = {e.experiment_id: e for e in every}
    out = []
    for name in wanted:
        experiment = by_name.get(name) or by_id.get(name)
        if experiment is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise DataError(f"no experiment {name!r} in the tracking store (its experiments: {known})")
        out.append(experiment)
    return out


def _source_run(client: Any, run: Any, experiment: str, uri: str) -> SourceRun:
    import numpy as np

    info, data = run.info, run.data
    origin = {"tracking_uri": uri, "experiment": experiment, "experiment_id": info.experiment_id,
              "status": info.status, "artifact_uri": info.artifact_uri}
    if info.status != "FINISHED":
        return SourceRun("mlflow", info.run_id, info.run_name or "", dict(data.params), dict(data.tags),
                         origin=origin, default_task=experiment, unfinished=f"its status is {info.status}")
    series = {}
    for key in data.metrics:
        history = client.get_metric_history(info.run_id, key)
        if len(history) > 1:
            # In the order logged (step, then time): the latest value is the run's final one, as MLflow has it.
            history = sorted(history, key=lambda m: (m.step, m.timestamp))
            series[key] = (np.array([m.step for m in history], dtype=float),
                           np.array([m.value for m in history], dtype=float))
    return SourceRun("mlflow", info.run_id, info.run_name or "", dict(data.params), dict(data.tags),
                     finals={k: float(v) for k, v in data.metrics.items()}, series=series,
                     started=info.start_time / 1000 if info.start_time else None,
                     ended=info.end_time / 1000 if info.end_time else None,
                     origin=origin, default_task=experiment)
