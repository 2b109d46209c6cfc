"""One self-contained HTML report per save path, and the closing summary of a run in the terminal.

Reads only the files a save path holds (results/, battles/, comparisons/, judge_check.json,
sageval/, manifest.json, charts/): a report knows result files, not evaluators.
"""

from .data import NoResults, load_save_path
from .page import write_report
from .terminal import closing_summary

__all__ = ["NoResults", "closing_summary", "load_save_path", "write_report"]
