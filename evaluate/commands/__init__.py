"""The subcommands of `eval.py`, side by side: each is one module with `main(argv) -> int` over the
pipeline and the libraries below it; no command imports another."""
