"""The local viewer: `eval.py view` over run logs (server, catalogue, items)."""
