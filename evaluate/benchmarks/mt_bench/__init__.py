"""MT-bench (FastChat's llm_judge), in one package: its files and their checks (`data`), the judge
prompts, matches and parsing (`judge`), FastChat's judgment files and show_result.py's tables
(`files`), the run that judges what a judgment file still lacks (`run`), the intervals beside
FastChat's numbers (`stats`), the terminal text (`text`), the `mt_bench:` config block (`config`),
the judge check on the run's own turns (`judge_check`), and the run as the project's own outputs with
the `eval.py mt-bench` command's benchmark (`outputs`). `evaluate/commands/mt_bench.py` parses nothing
itself: the one benchmark driver runs `outputs.MTBench`."""
