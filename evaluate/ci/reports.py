"""The verdict where a CI system shows verdicts: `--junit FILE.xml` and `--markdown FILE.md`, on a
run (`eval.py --config ...`) and on a saved run (`eval.py summary SAVE_PATH`).

JUnit: the Ant/Jenkins format that GitLab, Jenkins and GitHub's test reporters read (checked by
tests/data/junit.xsd in the suite): per run (a config or a save path) one test suite "gates" with a
test case per gate (failed with its line as the message) and one "rule checks" with a test case per
rule check, model and category (failed when an item failed the check, its ids and reasons in the
message). The exit code stays the gates' verdict: a rule check that fails some items is a red test
case in the report, not exit 1; gate it with `--fail-under MODEL:CATEGORY:ExactMatch=0.9`.

A score is a rule check (`is_rule_check`) when every valid value is 0 or 1 and either its
signature says so (`"outcome": "pass/fail"`, as the rule-check metrics write it, or
`"rule_check": true`) or its name after `Metrics/` is one of RULE_CHECKS, alone or followed by `-`
or `@` (`Metrics/Regex`, `Metrics/Contains-all`, `Metrics/JSON@turn2`).

Markdown: the closing lines as tables (means per model, each pair's verdicts, battles, gates, the
status with its exit code), for `$GITHUB_STEP_SUMMARY` or a merge-request comment.
"""

from __future__ import annotations

import math
import re
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr, escape

from ..core.errors import InputError
from ..core.io import atomic_write_text, check_output_file
from ..report.analysis import confirmatory, finite, num, significant
from ..report.terminal import shown_scores
from ..savepath.log import RunLog
from ..stats.family import ALL
from .gates import GateResult

RULE_CHECKS = ("ExactMatch", "Contains", "NotContains", "Regex", "JSON", "Length")
PASS_FAIL = "pass/fail"  # a signature's `outcome` for 0/1 scores (the rule checks' metrics write it)
MAX_NAMED = 10  # failed items named per test case


def is_rule_check(key: str, signature: dict[str, Any] | None, values: list[float]) -> bool:
    """A pass/fail score (see the module docstring for the convention)."""
    if not values or any(v not in (0, 1) for v in values):
        return False
    if isinstance(signature, dict) and (signature.get("rule_check") is True or signature.get("outcome") == PASS_FAIL):
        return True
    fam, _, name = key.partition("/")
    return fam == "Metrics" and any(name == r or re.match(re.escape(r) + r"[-@]", name) for r in RULE_CHECKS)


@dataclass
class RuleCase:
    """One rule check of one model in one category: its items' outcomes."""

    model: str
    category: str
    score: str
    passed: int
    failed: list[tuple[str, str]]  # (id, reason)
    invalid: list[str]

    @property
    def total(self) -> int:
        return self.passed + len(self.failed)

    def message(self) -> str:
        named = "; ".join(f"id {i}: {why}" if why else f"id {i}" for i, why in self.failed[:MAX_NAMED])
        more = f"; and {len(self.failed) - MAX_NAMED} more" if len(self.failed) > MAX_NAMED else ""
        inv = f"; {len(self.invalid)} invalid" if self.invalid else ""
        return f"{len(self.failed)} of {self.total} items failed: {named}{more}{inv}"


def _reason(detail: Any) -> str:
    if isinstance(detail, dict):
        for k in ("reason", "why", "message", "error"):
            if detail.get(k):
                return str(detail[k])
        return ", ".join(f"{k}: {v}" for k, v in list(detail.items())[:3])
    return "" if detail is None else str(detail)


def rule_cases(results: list[dict[str, Any]]) -> list[RuleCase]:
    """Every rule check per model and category, from result dicts (`results/<model>.json`)."""
    out: list[RuleCase] = []
    for res in results:
        sigs = res.get("signatures") or {}
        cells: dict[tuple[str, str], RuleCase] = {}
        values: dict[str, list[float]] = {}
        for it in res.get("items") or []:
            for key, v in (it.get("scores") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    values.setdefault(key, []).append(v)
        checks = {k for k, vs in values.items() if is_rule_check(k, sigs.get(k), vs)}
        for it in res.get("items") or []:
            scores, invalid = it.get("scores") or {}, it.get("invalid") or {}
            for key in sorted(checks & (set(scores) | set(invalid))):
                cell = cells.setdefault((str(it.get("category", "")), key),
                                        RuleCase(res.get("model", ""), str(it.get("category", "")), key, 0, [], []))
                v = scores.get(key)
                if key in invalid or not isinstance(v, (int, float)) or not math.isfinite(v):
                    cell.invalid.append(str(it.get("id")))
                elif v == 1:
                    cell.passed += 1
                else:
                    cell.failed.append((str(it.get("id")), _reason((it.get("details") or {}).get(key))))
        out += [cells[k] for k in sorted(cells)]
    return out


@dataclass
class RunSection:
    """One run's part of the CI files: a config's run or a saved run."""

    label: str  # the config file or the save path
    data: RunLog | None  # None: the run stopped before it had results (a judge that cannot be reached)
    gates: list[GateResult]
    code: int
    why: str
    status: str
    models: list[str]  # the models this run scored (rule checks and means of these)


@dataclass
class CIFiles:
    """Where --junit and --markdown go, and the runs they report (written once, at the end)."""

    junit: Path | None
    markdown: Path | None
    sections: list[RunSection] = field(default_factory=list)

    @classmethod
    def at(cls, junit: str | Path | None, markdown: str | Path | None) -> "CIFiles":
        """Checked before any work: a folder that does not exist is made when the file is written (issue 39:
        `--junit reports/eval.xml` in a fresh CI checkout was exit 2); one that cannot be made (a file
        in the way, no write permission) is exit 2 now, not after the run."""
        for flag, p in (("--junit", junit), ("--markdown", markdown)):
            if p is not None:
                check_output_file(Path(p), flag)
        return cls(Path(junit) if junit else None, Path(markdown) if markdown else None)

    def add(self, label: str, data: RunLog | None, gates: list[GateResult], code: int, why: str, status: str,
            models: list[str] | None = None) -> None:
        manifest = (data.manifest if data is not None else None) or {}
        if models is None:
            models = [m.get("name") for m in manifest.get("models") or [] if isinstance(m, dict)] or \
                (list(data.models) if data is not None else [])
        self.sections.append(RunSection(label, data, gates, code, why, status, models))

    def write(self) -> list[Path]:
        written = []
        if self.junit is not None:
            atomic_write_text(self.junit, junit_xml(self.sections))
            written.append(self.junit)
        if self.markdown is not None:
            atomic_write_text(self.markdown, markdown_text(self.sections))
            written.append(self.markdown)
        return written


# ---------------------------------------------------------------------- JUnit
def _case(name: str, classname: str, failure: str | None = None, kind: str = "failure",
          ftype: str = "gate") -> str:
    head = f"    <testcase name={quoteattr(name)} classname={quoteattr(classname)} time=\"0\""
    if failure is None:
        return head + "/>"
    return (f"{head}>\n      <{kind} message={quoteattr(failure)} type={quoteattr(ftype)}>{escape(failure)}"
            f"</{kind}>\n    </testcase>")


def _suite(i: int, name: str, cases: list[tuple[str, int, int]], props: dict[str, str], out: str) -> str:
    """cases: (xml, failed 0/1, errored 0/1)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    host = socket.gethostname() or "localhost"
    attrs = (f"name={quoteattr(name)} package={quoteattr('eval.py')} id=\"{i}\" timestamp=\"{stamp}\" "
             f"hostname={quoteattr(host)} tests=\"{len(cases)}\" failures=\"{sum(c[1] for c in cases)}\" "
             f"errors=\"{sum(c[2] for c in cases)}\" skipped=\"0\" time=\"0\"")
    lines = [f"  <testsuite {attrs}>", "    <properties>"]
    lines += [f"      <property name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in props.items()]
    lines += ["    </properties>", *(c[0] for c in cases)]
    lines += [f"    <system-out>{escape(out)}</system-out>", "    <system-err></system-err>", "  </testsuite>"]
    return "\n".join(lines)


def junit_xml(sections: list[RunSection]) -> str:
    """The JUnit XML text of the runs (see the module docstring)."""
    suites: list[str] = []
    for sec in sections:
        props = {"label": sec.label, "status": sec.status, "exit_code": str(sec.code)}
        gate_cases = [(_case(g.name, "eval.gates", None if g.passed else g.line()), int(not g.passed), 0)
                      for g in sec.gates]
        if sec.code in (2, 3):  # the run itself: bad input or the judge / scoring failed
            gate_cases.append((_case("eval.py run", "eval.run", f"exit {sec.code}: {sec.why}", "error", "run"), 0, 1))
        out = "\n".join([g.line() for g in sec.gates] + [f"status: {sec.status}"])
        suites.append(_suite(len(suites), f"gates: {sec.label}", gate_cases, props, out))
        rules = rule_cases([r for r in sec.data.results if r.get("model") in sec.models]) if sec.data else []
        if rules:
            cases = []
            for c in rules:
                failure = c.message() if c.failed else None
                kind, ftype = "failure", "rule check"
                if not c.failed and c.invalid and not c.passed:
                    failure, kind, ftype = f"all {len(c.invalid)} items invalid", "error", "invalid"
                cases.append((_case(f"{c.category}: {c.score}", f"rules.{c.model}", failure, kind, ftype),
                              int(kind == "failure" and failure is not None), int(kind == "error")))
            text = "\n".join(f"{c.model} / {c.category} / {c.score}: {c.passed} of {c.total} passed"
                             + (f", {len(c.invalid)} invalid" if c.invalid else "") for c in rules)
            suites.append(_suite(len(suites), f"rule checks: {sec.label}", cases, props, text))
    return '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n' + "\n".join(suites) + "\n</testsuites>\n"


# ---------------------------------------------------------------------- Markdown
def _cell(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[Any]], align: list[str] | None = None) -> list[str]:
    align = align or ["---"] * len(head)
    return (["| " + " | ".join(_cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
            + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows] + [""])


def _means(data: RunLog, models: list[str], keys: list[str]) -> list[str]:
    by_model = {r.get("model"): ((r.get("aggregates") or {}).get("overall") or {}) for r in data.results}
    rows = [[k] + [num((by_model.get(m, {}).get(k) or {}).get("mean"), 3) if by_model.get(m, {}).get(k) else "–"
                   for m in models] for k in keys]
    return _table(["mean, all items", *models], rows, ["---", *(["--:"] * len(models))])


def _pairs(data: RunLog, keys: list[str]) -> list[str]:
    rows = []
    for comp in data.comparisons:
        a, b = comp.get("model_a", "A"), comp.get("model_b", "B")
        by_key = {r.get("score"): r for r in comp.get("rows") or [] if r.get("category") == ALL}
        for k in keys:
            r = by_key.get(k)
            if r is None:
                continue
            iv = r.get("interval")
            ivt = f"[{num(iv[0])}, {num(iv[1])}]" if iv and all(finite(v) for v in iv) else (r.get("interval_note") or "–")
            word = (f"{a if r.get('verdict') == 'A better' else b} better" if significant(r)
                    else "not comparable" if str(r.get("verdict", "")).startswith("not comparable")
                    else "no detectable difference")
            rows.append([f"{a} vs {b}", k, num(r.get("diff")), ivt,
                         f"{r['p_adj']:.3f}" if finite(r.get("p_adj")) else "–",
                         word + ("" if confirmatory(r) else " (exploratory)")])
    if not rows:
        return []
    return _table(["pair (A vs B)", "score", "A − B", "interval", "p_adj", "verdict"], rows,
                  ["---", "---", "--:", "---", "--:", "---"])


def _battles(data: RunLog, models: list[str]) -> list[str]:
    rows = []
    for bt in data.battles:
        s = bt.get("summary") or {}
        if not {s.get("model_a"), s.get("model_b")} <= set(models):
            continue
        ci = s.get("win_rate_ci95")
        rows.append([f"{s.get('model_a')} vs {s.get('model_b')}", num(s.get("win_rate"), 3),
                     f"[{num(ci[0], 2)}, {num(ci[1], 2)}]" if ci and all(finite(v) for v in ci) else "–",
                     f"{s.get('wins')} / {s.get('ties')} / {s.get('losses')}", s.get("invalid", 0)])
    if not rows:
        return []
    return _table(["battle (A vs B)", "win rate of A", "95% interval", "A wins / ties / losses", "invalid"], rows,
                  ["---", "--:", "---", "---", "--:"])


def _left_out(manifest: dict[str, Any]) -> list[str]:
    rows = [[m.get("name"), len(m.get("missing_ids") or []), ", ".join(map(str, (m.get("missing_ids") or [])[:20]))]
            for m in manifest.get("models") or [] if isinstance(m, dict) and m.get("missing_ids")]
    if not rows:
        return []
    return ["Left out (`missing: common`: only the items every model answered were scored):", ""] + \
        _table(["model", "ids not answered", "ids"], rows, ["---", "--:", "---"])


def markdown_text(sections: list[RunSection]) -> str:
    """The closing lines of each run as Markdown tables."""
    out: list[str] = []
    for sec in sections:
        data = sec.data
        out += [f"### eval.py: {_cell(sec.label)}", "",
                f"**status: {sec.status}** (exit {sec.code}{': ' + _cell(sec.why) if sec.why else ''})", ""]
        if data is None:
            continue
        models = [m for m in data.models if m in sec.models] or list(data.models)
        try:
            keys = shown_scores(data)
        except InputError:
            keys = []
        if keys:
            out += _means(data, models, keys)
        out += _pairs(data, keys) + _battles(data, models) + _left_out(data.manifest or {})
        if sec.gates:
            out += _table(["gate", "result", "detail"],
                          [[f"`{g.name}`", ("passed without power" if g.no_power else "passed") if g.passed else "**FAILED**",
                            (f"{g.checked}; {g.no_power}" if g.no_power else g.checked) if g.passed
                            else "; ".join(g.failures)] for g in sec.gates])
    return "\n".join(out).rstrip() + "\n"
