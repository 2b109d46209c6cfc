"""AlpacaEval 2, in one package: its judging protocol with any project judge and its annotations.json
(`judge`), its leaderboard from annotations and model outputs (`leaderboard`, `eval.py leaderboard`),
and the run as the project's own outputs with the `eval.py alpaca-eval` command's benchmark
(`outputs`)."""
