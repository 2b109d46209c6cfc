"""One self-contained HTML report per save path, and the closing summary of a run in the terminal.

Both are made from a run log (`evaluate.savepath.RunLog`: results/, battles/, comparisons/,
judge_check.json, sageval/, manifest.json, charts/): a report knows result files, not evaluators.
"""

from .page import write_report
from .terminal import closing_summary

__all__ = ["closing_summary", "write_report"]
