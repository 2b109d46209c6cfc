"""A run logged to MLflow through its own client (`mlflow.MlflowClient`): metrics, parameters and
tags in batches, the artifacts as files, the run marked finished.

The tracking URI is the block's `uri`, else MLflow's own (`$MLFLOW_TRACKING_URI`, else a SQLite
store `mlflow.db` in the current folder). A new experiment in a local SQLite store keeps its
artifacts beside the database (`<folder>/mlruns/`), not wherever the command ran. An HTTP tracking
server is asked for `/health` first, with the block's `timeout`, and MLflow's own retries are cut to
one short try while logging: a server that is down costs seconds, not MLflow's default minutes of
back-off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from .options import MlflowOptions
from .payload import Payload

# MLflow's batch limits (log_batch): 1,000 metrics, 100 parameters, 100 tags a call; values cut to
# what every server version takes
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100
PARAM_CHARS, TAG_CHARS = 500, 5000


class Unreachable(Exception):
    """The tracking server did not answer."""


def _probe(uri: str, timeout: float) -> None:
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # it answered: a server without /health (behind a proxy) is still there
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"no answer from {uri} within {timeout:g} s ({reason})") from None


@contextlib.contextmanager
def _quiet_short_retries(timeout: float) -> Iterator[None]:
    """MLflow's HTTP retries and timeout for this call only (a user's own settings win), and its INFO
    lines (a new store's table migrations) kept off the terminal."""
    wanted = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(max(1, timeout)))}
    set_here = {k: v for k, v in wanted.items() if k not in os.environ}
    os.environ.update(set_here)
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for k in set_here:
            os.environ.pop(k, None)
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _chunks(items: list[Any], n: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def send(payload: Payload, opts: MlflowOptions) -> str:
    """Log `payload` as one MLflow run; returns a line saying where it went."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    uri = opts.uri or mlflow.get_tracking_uri()
    _probe(uri, opts.timeout)
    with _quiet_short_retries(opts.timeout):
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(opts.experiment)
        if exp is not None:
            exp_id = exp.experiment_id
        else:
            local = uri.startswith("sqlite:///")
            where = Path(uri[len("sqlite:///"):]).resolve().parent / "mlruns" if local else None
            exp_id = client.create_experiment(opts.experiment, artifact_location=where.as_uri() if where else None)
        tags = {k: v[:TAG_CHARS] for k, v in payload.tags.items()}
        run = client.create_run(exp_id, run_name=opts.run_name or payload.run_name, tags=tags)
        run_id = run.info.run_id
        try:
            now = int(time.time() * 1000)
            for part in _chunks(sorted(payload.metrics.items()), MAX_METRICS):
                client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in part])
            for part in _chunks(sorted(payload.params.items()), MAX_PARAMS):
                client.log_batch(run_id, params=[Param(k, v[:PARAM_CHARS]) for k, v in part])
            for path in payload.artifacts:
                client.log_artifact(run_id, str(path))
        except Exception:
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
    return f"mlflow: run {run_id} in experiment {opts.experiment!r} at {uri}"
