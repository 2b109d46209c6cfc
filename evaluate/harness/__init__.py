"""Other harnesses' outputs as answer files: Inspect AI eval logs, lm-evaluation-harness's
`--log_samples` files and promptfoo's results, each read into records of this tool's own shape with
the harness's per-sample scores beside them (the `Harness` family scores with those).

`entries` is the door: an `answers:` entry names its `format:` (or the format is detected where the
file says it unambiguously), `expand` turns each harness file into one entry per model it holds and
checks that the files pair (same task, same epochs, same inputs per sample), `records_for` gives an
entry's records. One reader module per harness (`inspect_log`, `lm_eval_log`, `promptfoo_log`).
"""
