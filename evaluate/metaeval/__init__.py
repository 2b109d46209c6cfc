"""Meta-evaluation (`eval.py meta-eval`): how well an evaluator agrees with human labels (`run`)."""
