"""Runs out to a tracker: a finished save path sent to MLflow or Weights & Biases, where a team's
training runs already live.

`options` (the config's `track:` block and `--track`), `payload` (what is sent, read from the save
path's run log: the primary scores per model, each pair's paired differences with their intervals and
verdicts, the battles' win rates, the judge check's verdict, usage and cost as metrics and
parameters; the report, summary.csv and manifest as artifacts; the config's and scores' signatures as
tags), one module per tracker (`mlflow_run`, `wandb_run`, each through its own client library, an
optional extra), and `send` (every configured tracker; one that refuses is a warning and never
touches the run's own files or its exit code).
"""
