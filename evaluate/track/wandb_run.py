"""A run logged to Weights & Biases through `wandb`: the metrics as the run's summary (and one logged
step, so charts exist), parameters as its config, tags as config entries under `tags/` (W&B's own
tags are short labels: the run id and the config's hash go there), artifacts as the run's files.

Offline by default: wandb writes `<dir>/wandb/offline-run-<time>-<id>/` (the metrics in its
`run-<id>.wandb` log, the artifacts under `files/`) and contacts nothing; `wandb sync <that folder>`
uploads it later. Online mode needs WANDB_API_KEY in the environment and is sent at once.
"""

from __future__ import annotations

from pathlib import Path

from .options import WandbOptions
from .payload import Payload

W_TAG_CHARS = 64  # W&B's limit on a tag


def send(payload: Payload, opts: WandbOptions) -> str:
    """Log `payload` as one W&B run; returns a line saying where it went."""
    import wandb

    folder = Path(opts.dir) if opts.dir else Path.cwd()
    folder.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True, save_code=False,
                              init_timeout=30)
    config = {**payload.params, **{f"tags/{k}": v for k, v in payload.tags.items()}}
    labels = [t[:W_TAG_CHARS] for t in (payload.tags.get("llm_eval.run_id"),
                                         "config:" + payload.tags.get("llm_eval.config_hash", "")[:12]) if t]
    run = wandb.init(mode=opts.mode, dir=str(folder), project=opts.project, entity=opts.entity,
                     name=opts.run_name or payload.run_name, config=config, tags=labels, settings=settings,
                     reinit="create_new")
    try:
        run.log(dict(payload.metrics))
        run.summary.update(dict(payload.metrics))
        for path in payload.artifacts:
            run.save(str(path), base_path=str(path.parent), policy="now")
        run_dir = Path(run.dir).parent
    except BaseException:
        run.finish(exit_code=1)
        raise
    run.finish()
    if opts.mode == "offline":
        return f"wandb: offline run {run.id} in {run_dir} (upload it with `wandb sync {run_dir}`)"
    return f"wandb: run {run.id} in project {opts.project!r}"
