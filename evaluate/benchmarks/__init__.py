"""The field's benchmarks, one package each, in their own file formats: `alpaca_eval/` (AlpacaEval 2),
`arena_hard/` (Arena-Hard), `mt_bench/` (MT-bench). Each reads the benchmark's files unchanged, renders
its judge prompts, parses its verdicts, keeps its judgment files in the save path (through
`evaluate.savepath`), computes its published scores, and leaves the run as the project's own outputs.

What they share sits here: `benchmark` (the `Benchmark` shape every `eval.py <benchmark>` command is
run through, and the registry), `outputs` (a benchmark run's manifest and the `benchmark` block of a
battle file), `tables` (their terminal tables). The commands in `evaluate.commands` only put them on
the command line.
"""
