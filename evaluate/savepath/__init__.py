"""The save path's format, in one package: the run log (`log`: `RunLog`, read whole or its header
alone; `write_run_log`, the one way a file goes in), what each file holds (`records`: a typed record
per file, its path, bytes and JSON Schema), where each file lives (`layout`, versioned), the one
writer every file goes through (`write`), the one reader file by file (`read`), the one manifest
builder with the run id and versions (`manifest`), the save path's lock (`lock`) and generated
answers (`answers`). docs/save-path.md lists every file.

Imports nothing of the project but `core`: every layer that leaves a file in a save path (pipeline,
report, families, judge check, generation, benchmarks) or reads one can use it."""

from .answers import read_answers, write_answers
from .layout import LAYOUT_VERSION, LayoutError, check_layout
from .log import NoResults, RunLog, ScoreRow, find_run_headers, read_run_header, read_run_log, write_run_log
from .manifest import iso, new_manifest, new_run_id, stamp_layout, versions
from .read import Unreadable, read_results
from .records import SCHEMA_VERSION, Record, register_record
from .write import write_bytes, write_figure, write_json, write_text

__all__ = ["LAYOUT_VERSION", "LayoutError", "NoResults", "Record", "RunLog", "SCHEMA_VERSION", "ScoreRow", "Unreadable",
           "check_layout", "register_record", "write_run_log",
           "find_run_headers", "iso", "new_manifest", "new_run_id", "read_answers", "read_results", "read_run_header",
           "read_run_log", "stamp_layout", "versions", "write_answers", "write_bytes", "write_figure", "write_json",
           "write_text"]
