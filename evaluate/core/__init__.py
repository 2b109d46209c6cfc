"""The core every other layer builds on; it imports nothing above it.

records and scores (what is scored, what comes back), errors, the name registries, file I/O
(one UTF-8 reader, one JSONL reader, one atomic writer), template filling, the expected score
over digit tokens, and typed options. Backends, evaluators, families and the app layer import
from here; nothing here imports from them (tests/test_layers.py checks it).
"""
