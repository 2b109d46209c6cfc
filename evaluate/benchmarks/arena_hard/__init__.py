"""Arena-Hard (lmarena/arena-hard-auto @ 196f6b8), in one package: its files (`files`), judging by its
protocol and its leaderboard (`run`), show_result.py's scores and style control (`scores`), and the
run as the project's own outputs with the `eval.py arena-hard` command's benchmark (`outputs`)."""
