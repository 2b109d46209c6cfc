"""Generation: the model under test answers a question file, through the judge's request machinery
(evaluate.backends), into the answer format each benchmark reads (formats.py)."""
