"""JSON: the answer parses as JSON and, with `schema`, is valid against a JSON Schema file.

Validation is the `jsonschema` library's, with the validator the schema's `$schema` names (Draft
2020-12 when it names none). The schema file is read and checked when the config loads: missing,
not JSON, or not a valid schema is refused then (exit 2), naming `metric_options.JSON.schema`.
A reply wrapped in one Markdown code fence (```json ... ```) is unwrapped first unless
`code_fence: false`. A failing item's details give where it failed: the parser's line and column,
or the JSON Pointer (RFC 6901) of the value that broke the schema, its message and the schema
keyword's own path (`jsonschema.exceptions.best_match` picks the error when there are several).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.io import sha256_text
from ..core.options import option
from .base import METRICS, MetricInput
from .common import library_version
from .rule import RuleCheck, quote

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(.*)\n```$", re.S)


def pointer(path: Any) -> str:
    """A JSON Pointer ("/items/2/name") from jsonschema's path deque; "" is the whole document."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


@dataclass
class JsonOptions:
    schema: str | None = option(None, "a JSON Schema file the answer must be valid against (relative to the config)")
    code_fence: bool = option(True, "unwrap an answer that is one Markdown code fence (```json ... ```)")


@METRICS.register("JSON", "ValidJSON", "JSONSchema")
class JsonCheck(RuleCheck):
    """The answer is JSON (valid against the schema, when one is given)."""

    name = "JSON"
    sub_scores = ("JSON",)
    Options = JsonOptions
    path_options = ("schema",)

    def setup(self) -> list[tuple[str, str]]:
        self.validator = None
        self.schema_sha256 = None
        if self.opts.schema is None:
            return []
        import jsonschema
        from jsonschema.exceptions import SchemaError

        path = Path(self.opts.schema)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return [("schema", f"cannot read the schema file {str(path)!r} ({exc.strerror or type(exc).__name__})")]
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            return [("schema", f"{path}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})")]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            return [("schema", f"{path}: not a valid JSON Schema ({cls.__name__}): {exc.message} at "
                               f"{pointer(exc.absolute_path) or '/'}")]
        self.validator = cls(schema)
        self.schema_sha256 = sha256_text(text)
        return []

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        text = item.output.strip()
        if self.opts.code_fence and (m := _FENCE.match(text)):
            text = m.group(1).strip()
        if not text:
            return False, {"reason": "not JSON: empty answer"}
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return False, {"reason": f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           "line": exc.lineno, "column": exc.colno, "near": quote(text[max(0, exc.pos - 20):exc.pos + 20])}
        if self.validator is None:
            return True, {"reason": "parses as JSON"}
        from jsonschema.exceptions import best_match

        errors = list(self.validator.iter_errors(doc))
        if not errors:
            return True, {"reason": "valid against the schema"}
        err = best_match(errors)
        where = pointer(err.absolute_path)
        return False, {"reason": f"schema: {quote(err.message, 160)} at {where or '/ (the whole document)'}",
                       "path": where, "error": quote(err.message, 300), "schema_path": pointer(err.absolute_schema_path),
                       "errors": len(errors)}

    def describe_options(self) -> dict[str, Any]:
        out = super().describe_options()
        if self.opts.schema is not None:  # the file's content decides, not where it lies
            out["schema"] = {"file": Path(self.opts.schema).name, "sha256": self.schema_sha256}
        return out

    def signature(self) -> dict[str, Any]:
        lib = library_version("jsonschema") if self.validator is not None else "Python json"
        sig = {**super().signature(), "library": lib, "tokenizer": "none"}
        if self.validator is not None:
            sig["validator"] = type(self.validator).__name__
        return sig
