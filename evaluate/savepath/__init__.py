"""The save path's format, in one package: where each file lives (`layout`, versioned), the one
writer every file goes through (`write`), the one reader (`read`), the manifest's run id and
versions (`manifest`) and generated answers (`answers`). docs/save-path.md lists every file.

Imports nothing of the project but `core`: every layer that leaves a
file in a save path (pipeline, report, families, judge check, benchmarks) can use it."""

from .answers import read_answers, write_answers
from .layout import LAYOUT_VERSION, LayoutError, check_layout
from .manifest import iso, new_run_id, stamp_layout, versions
from .read import ResultFiles, Unreadable, read_results
from .write import write_bytes, write_figure, write_json, write_text

__all__ = ["LAYOUT_VERSION", "LayoutError", "ResultFiles", "Unreadable", "check_layout", "iso", "new_run_id",
           "read_answers", "read_results", "stamp_layout", "versions", "write_answers", "write_bytes",
           "write_figure", "write_json", "write_text"]
