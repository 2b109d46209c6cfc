"""The field's benchmarks in their own file formats: AlpacaEval 2, Arena-Hard and MT-bench.

Each module reads the benchmark's files unchanged, renders its judge prompts, parses its
verdicts, writes its judgment files and computes its published scores; the commands in
`evaluate.commands` put them on the command line.
"""
