"""The gates of a run (exit 1 when one fails), parsed and name-checked before anything is paid.

    --fail-under [[MODEL:]CATEGORY:]SCORE=X     an aggregate below X fails
        SCORE=X                  every model's overall aggregate (over all its categories)
        CATEGORY:SCORE=X         every model, that category
        MODEL:CATEGORY:SCORE=X   one model, one category
        MODEL::SCORE=X           one model's overall aggregate
        *:SCORE=X, MODEL:*:SCORE=X   every category, each on its own
      MODEL empty or `*` means every model the config scores; CATEGORY empty means the overall
      aggregate. SCORE with or without its family prefix (`BLEU-4` or `Metrics/BLEU-4`).
    --fail-if-worse CANDIDATE:BASELINE:[CATEGORY:]SCORE   the paired comparison of the run says the
      baseline is better on SCORE (the comparisons' own verdict: for a primary score over all items,
      its simultaneous interval within the pair's confirmatory family excludes 0; any other row is
      exploratory, its unadjusted 95% interval excludes 0, and the failure says so);
      no CATEGORY: the "(all)" row over every category.
      A row on too few items for its exact test ever to call a difference passes "without power",
      and its line says so with the items it needs.
    --fail-under-win-rate CANDIDATE:BASELINE=X   the candidate's battle win rate against the
      baseline (ties count half, invalid verdicts left out) below X.
    --fail-under-win-rate CANDIDATE:BASELINE:label-corrected=X   the same, as people would judge: the
      label-corrected win rate (the person's labels on the label queue's draws correcting every item's
      judge verdict, docs/labels.md) below X; a pair without labels on the queue fails and says how to
      label (a gate that passes without labels would promise what it does not know).
    --fail-on-untrusted-judge   the judge check of this judge and prompts did not pass, or there is
      none (an opt-in gate that passes without a check would promise what it does not know).

Names (models, categories, scores) are checked against the config and the plan with did-you-mean
before the run (and in --dry-run): an automatic metric gives its own sub-scores (`BLEU` -> `BLEU-4`,
`F1 score` -> `F1`), any other family scores under the planned name, a conversation's per-turn
score `X@turnK` under `X`. After the run each gate reads a `GateView`: the run's own results,
comparisons and battles in memory, or a save path's files (`eval.py summary SAVE --fail-under ...`),
the same way, so a saved run gives the same lines and exit code as the run that made it. Each gate
is one `GateResult` and one line, passed or failed, in the models' own names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InputError
from ..core.registry import suggest
from ..stats.intervals import MIN_INTERVAL_N
from ..stats.paired import min_attainable_p

ALL_ROWS = "(all)"
EVERY = "*"
TURN = re.compile(r"@turn[1-9][0-9]*$")


@dataclass(frozen=True)
class ScoreGate:
    spec: str
    model: str  # "" = every model of the run
    category: str  # "" = the overall aggregate, "*" = each category
    score: str  # with or without its family prefix
    value: float


@dataclass(frozen=True)
class WorseGate:
    spec: str
    candidate: str
    baseline: str
    category: str  # "(all)" = over every category
    score: str


LABEL_CORRECTED = "label-corrected"


@dataclass(frozen=True)
class WinRateGate:
    spec: str
    candidate: str
    baseline: str
    value: float
    source: str = "judge"  # "judge": the judge's verdicts; LABEL_CORRECTED: people's, by the labels


@dataclass
class Gates:
    """Every gate of one command line."""

    scores: list[ScoreGate] = field(default_factory=list)
    worse: list[WorseGate] = field(default_factory=list)
    win_rates: list[WinRateGate] = field(default_factory=list)
    untrusted_judge: bool = False

    def __bool__(self) -> bool:
        return bool(self.scores or self.worse or self.win_rates or self.untrusted_judge)


def _number(flag: str, spec: str, value: str, example: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f'{flag} "{spec}": "{value}" is not a number; {example}') from None
    if not math.isfinite(x):
        raise InputError(f'{flag} "{spec}": the threshold must be a finite number, got "{value}" '
                         "(a NaN threshold can never fail)")
    return x


def parse_fail_under(spec: str) -> ScoreGate:
    """One `[[MODEL:]CATEGORY:]SCORE=X`; InputError naming the spec and what was expected."""
    example = ("expected [[MODEL:]CATEGORY:]SCORE=VALUE, e.g. BLEU-4=0.2, closed_qa:GPT/correctness=3.5, "
               "model_a:closed_qa:BLEU-4=0.2 or model_a::BLEU-4=0.2")
    if "=" not in spec:
        raise InputError(f'--fail-under "{spec}": no "=": {example}')
    lhs, _, value = spec.rpartition("=")
    threshold = _number("--fail-under", spec, value, example)
    parts = [p.strip() for p in lhs.split(":")]
    if len(parts) > 3:
        raise InputError(f'--fail-under "{spec}": {len(parts)} parts separated by ":"; {example}')
    model, cat, score = [""] * (3 - len(parts)) + parts
    if not score:
        raise InputError(f'--fail-under "{spec}": empty metric name; {example}')
    if len(parts) == 2 and not cat:
        raise InputError(f'--fail-under "{spec}": empty category name; {example}')
    return ScoreGate(spec, "" if model == EVERY else model, cat, score, threshold)


def parse_fail_if_worse(spec: str) -> WorseGate:
    example = "expected CANDIDATE:BASELINE:[CATEGORY:]SCORE, e.g. model_b:model_a:GPT/correctness"
    parts = [p.strip() for p in spec.split(":")]
    if len(parts) not in (3, 4) or not all(parts):
        raise InputError(f'--fail-if-worse "{spec}": {example}')
    if parts[0] == parts[1]:
        raise InputError(f'--fail-if-worse "{spec}": the candidate and the baseline are the same model')
    cat = parts[2] if len(parts) == 4 else ALL_ROWS
    return WorseGate(spec, parts[0], parts[1], cat, parts[-1])


def parse_win_rate(spec: str) -> WinRateGate:
    example = (f"expected CANDIDATE:BASELINE=VALUE or CANDIDATE:BASELINE:{LABEL_CORRECTED}=VALUE, "
               "e.g. model_b:model_a=0.45")
    lhs, eq, value = spec.rpartition("=")
    parts = [p.strip() for p in lhs.split(":")]
    source = "judge"
    if len(parts) == 3 and parts[2]:
        if parts[2].lower() != LABEL_CORRECTED:
            raise InputError(f'--fail-under-win-rate "{spec}": unknown estimate "{parts[2]}"'
                             f'{suggest(parts[2], [LABEL_CORRECTED])}; {example}')
        source, parts = LABEL_CORRECTED, parts[:2]
    if not eq or len(parts) != 2 or not all(parts):
        raise InputError(f'--fail-under-win-rate "{spec}": {example}')
    x = _number("--fail-under-win-rate", spec, value, example)
    if not 0 <= x <= 1:
        raise InputError(f'--fail-under-win-rate "{spec}": a win rate is between 0 and 1, got {x:g}')
    if parts[0] == parts[1]:
        raise InputError(f'--fail-under-win-rate "{spec}": the candidate and the baseline are the same model')
    return WinRateGate(spec, parts[0], parts[1], x, source)


def parse_gates(fail_under: list[str] | None = None, fail_if_worse: list[str] | None = None,
                win_rates: list[str] | None = None, untrusted_judge: bool = False) -> Gates:
    """Every gate of the command line; a malformed one is refused before any work."""
    return Gates([parse_fail_under(s) for s in fail_under or []], [parse_fail_if_worse(s) for s in fail_if_worse or []],
                 [parse_win_rate(s) for s in win_rates or []], untrusted_judge)


# ---------------------------------------------------------------------- names, before the run
@dataclass
class Known:
    """What a run will produce: its models, categories, planned score names (`Family/name`), and
    whether it has battles and GPT scores (the judge check)."""

    models: list[str]
    categories: list[str]
    scores: list[str]
    battles: bool = False
    judge: bool = False


def _short(key: str) -> str:
    return key.split("/", 1)[-1]


def _plausible(score: str, planned: list[str]) -> bool:
    """A gate's score against the planned keys (case-insensitive): the same key, or a sub-score the
    planned one may give under its own name (`X` -> `X-2`)."""
    fam, _, name = score.lower().rpartition("/")
    name = TURN.sub("", name)  # a conversation's per-turn score `X@turnK` is planned as `X`
    for key in planned:
        kfam, _, kname = key.lower().rpartition("/")
        if fam and fam != kfam:
            continue
        if name == kname or name.startswith(kname + "-"):
            return True
    return False


def _name(flag: str, spec: str, what: str, name: str, known: list[str]) -> None:
    if name not in known:
        raise InputError(f'{flag} "{spec}": no {what} "{name}" in this run{suggest(name, known)} '
                         f"(known: {', '.join(known) or 'none'})")


def _score(flag: str, spec: str, score: str, known: Known) -> None:
    if not _plausible(score, known.scores):
        names = sorted({*known.scores, *(_short(k) for k in known.scores)})
        raise InputError(f'{flag} "{spec}": no score "{score}" in this run{suggest(score, names)} '
                         f"(planned: {', '.join(sorted(known.scores)) or 'none'})")


def check_names(gates: Gates, known: Known) -> None:
    """InputError (exit 2) for a gate that names a model, category or score the run does not have."""
    for g in gates.scores:
        if g.model:
            _name("--fail-under", g.spec, "model", g.model, known.models)
        if g.category and g.category != EVERY:
            if not g.model and g.category in known.models and g.category not in known.categories:
                raise InputError(f'--fail-under "{g.spec}": "{g.category}" is a model, not a category; write '
                                 f'"{g.category}::{g.score}={g.value:g}" for its overall aggregate or '
                                 f'"{g.category}:CATEGORY:{g.score}={g.value:g}" for one category')
            _name("--fail-under", g.spec, "category", g.category, known.categories)
        _score("--fail-under", g.spec, g.score, known)
    for w in gates.worse:
        for m in (w.candidate, w.baseline):
            _name("--fail-if-worse", w.spec, "model", m, known.models)
        if w.category != ALL_ROWS:
            _name("--fail-if-worse", w.spec, "category", w.category, known.categories)
        _score("--fail-if-worse", w.spec, w.score, known)
    for r in gates.win_rates:
        for m in (r.candidate, r.baseline):
            _name("--fail-under-win-rate", r.spec, "model", m, known.models)
        if not known.battles:
            raise InputError(f'--fail-under-win-rate "{r.spec}": this run has no battles (they need GPT metrics, '
                             "two or more answer files and battle not set to false)")
    if gates.untrusted_judge and not known.judge:
        raise InputError("--fail-on-untrusted-judge: this run asks no judge for GPT scores; there is nothing to check")


def known_of(plan: Any, models: list[str]) -> Known:
    """What a plan (evaluate.pipeline.plan.Plan) will produce."""
    scores = plan.score_keys()
    gpt = any("GPT" in fams and fams["GPT"] for fams in plan.categories.values())
    battles = bool((plan.work.get("GPT") or {}).get("battle_calls"))
    return Known(models=list(models), categories=sorted(plan.categories), scores=scores, battles=battles, judge=gpt)


# ---------------------------------------------------------------------- after the run
@dataclass
class GateView:
    """What the gates read, the same whether a run just finished (from memory) or a save path is
    gated later (`eval.py summary SAVE --fail-under ...`, from its files): the result dicts
    (`model`, `aggregates`), the comparison files' dicts, the battle files' dicts, the manifest,
    and the models this run scored (only those are gated)."""

    results: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    battles: list[dict[str, Any]]
    manifest: dict[str, Any]
    gated: list[str]
    # the label-corrected estimates (judgecheck.corrected's object), which the caller adds where a gate
    # names them (`needs_labels`); None: not read
    corrected: dict[str, Any] | None = None

    @classmethod
    def of(cls, data: Any, gated: list[str] | None = None) -> "GateView":
        """From a run log (evaluate.savepath.RunLog); `gated`: default the manifest's models."""
        manifest = data.manifest or {}
        if gated is None:
            gated = [m.get("name") for m in manifest.get("models") or [] if isinstance(m, dict)] or list(data.models)
        return cls(list(data.results), list(data.comparisons or []), list(data.battles or []), manifest, gated)

    def known(self) -> Known:
        """What the gates may name: the gated models, the categories and score keys of their results."""
        res = [r for r in self.results if r.get("model") in self.gated]
        cats = sorted({c for r in res for c in (r.get("aggregates") or {}).get("by_category") or {}})
        scores = sorted({k for r in res for block in _blocks(r) for k in block})
        battles = any({(b.get("summary") or {}).get("model_a"), (b.get("summary") or {}).get("model_b")}
                      <= set(self.gated) for b in self.battles)
        judged = any(k.startswith("GPT/") for k in scores) or bool(self.manifest.get("judge_check"))  # a benchmark's
        return Known(models=list(self.gated), categories=cats, scores=scores, battles=battles, judge=judged)


def _matches(key: str, score: str) -> bool:
    return key.lower() == score.lower() or _short(key).lower() == score.lower()


def _blocks(res: dict[str, Any]) -> list[dict[str, Any]]:
    aggs = res.get("aggregates") or {}
    return [aggs.get("overall") or {}, *(aggs.get("by_category") or {}).values()]


@dataclass
class GateResult:
    """One gate's outcome: its one line, pass or fail, in the user's own model names."""

    flag: str  # "--fail-under", ...
    spec: str  # as written on the command line ("" for --fail-on-untrusted-judge)
    failures: list[str]  # what failed, one entry per aggregate / row / pair
    checked: str  # what passed, in words (the line of a passing gate)
    no_power: str = ""  # why this gate could not have failed at this number of items ("" when it could)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def name(self) -> str:
        return f"{self.flag} {self.spec}".strip()

    def line(self, shown: int = 3) -> str:
        if self.passed and self.no_power:
            return f"gate passed without power: {self.name}: {self.checked}; {self.no_power}"
        if self.passed:
            return f"gate passed: {self.name}: {self.checked}"
        more = f"; and {len(self.failures) - shown} more" if len(self.failures) > shown else ""
        return f"gate FAILED: {self.name}: {'; '.join(self.failures[:shown])}{more}"


def _mean(agg: dict[str, Any]) -> float | None:
    mean = agg.get("mean")
    if not isinstance(mean, (int, float)) or isinstance(mean, bool) or math.isnan(mean):
        return None
    return float(mean)


def _aggregates_of(res: Any) -> dict[str, Any]:
    return res.aggregates() if hasattr(res, "aggregates") else (res.get("aggregates") or {})


def _model_of(res: Any) -> str:
    return res.model if hasattr(res, "model") else res.get("model", "")


def score_gate(results: list[Any], g: ScoreGate) -> GateResult:
    """One --fail-under gate over the results (dicts or ModelResults) of the gated models. InputError
    when it matches no aggregate of the models it names (the names were plausible, the scores not)."""
    failures, seen = [], []
    for res in results:
        model = _model_of(res)
        if g.model and model != g.model:
            continue
        aggs = _aggregates_of(res)
        if g.category == EVERY:
            blocks = list((aggs.get("by_category") or {}).items())
        else:
            blocks = [(g.category, (aggs.get("by_category") or {}).get(g.category, {}) if g.category
                       else aggs.get("overall") or {})]
        for cat, block in blocks:
            for key, agg in block.items():
                if not _matches(key, g.score):
                    continue
                where = f"{model}: {cat + ':' if cat else ''}{key}"
                mean = _mean(agg)
                seen.append((mean, where))
                if mean is None:
                    failures.append(f"{where} has no valid score (gate {g.value:g})")
                elif mean < g.value:
                    failures.append(f"{where} = {mean:.4f} < {g.value:g}")
    if not seen:
        known = sorted({k for r in results for k in (_aggregates_of(r).get("overall") or {})})
        raise InputError(f'--fail-under "{g.spec}": no aggregate named "{g.score}"'
                         f"{' in category ' + g.category if g.category and g.category != EVERY else ''}"
                         f"{suggest(g.score, known + [_short(k) for k in known])} (known: {', '.join(known)})")
    low, where = min(seen, key=lambda x: float("inf") if x[0] is None else x[0])
    checked = (f"{where} = {low:.4f} >= {g.value:g}" if len(seen) == 1 else
               f"lowest of {len(seen)} aggregates {where} = {low:.4f} >= {g.value:g}")
    return GateResult("--fail-under", g.spec, failures, checked)


def worse_gate(comparisons: list[dict[str, Any]], g: WorseGate) -> GateResult:
    """Paired comparisons whose verdict is "the baseline is better" (see the module docstring)."""
    failures, checked = [], []
    comp = next((c for c in comparisons if {c.get("model_a"), c.get("model_b")} == {g.candidate, g.baseline}), None)
    rows = [r for r in (comp or {}).get("rows", []) if r.get("category") == g.category and _matches(r.get("score", ""), g.score)]
    if not rows:
        raise InputError(f'--fail-if-worse "{g.spec}": the run has no comparison row of {g.candidate} and '
                         f"{g.baseline} on {g.score} ({g.category})")
    for r in rows:
        if r.get("better") == g.baseline:
            failures.append(f"{g.candidate} worse than {g.baseline} on {g.category}:{r['score']}: mean "
                            f"{_mean_of(r, comp, g.candidate):.4f} vs {_mean_of(r, comp, g.baseline):.4f}, "
                            f"{_evidence(r)}")
        elif r.get("better") is None and str(r.get("verdict", "")).startswith("not comparable"):
            raise InputError(f'--fail-if-worse "{g.spec}": {r["verdict"]}')
        else:
            said = ("better" if r.get("better") == g.candidate else "no detectable difference")
            checked.append(f"{g.candidate} vs {g.baseline} on {g.category}:{r['score']}: {said}, mean "
                           f"{_mean_of(r, comp, g.candidate):.4f} vs {_mean_of(r, comp, g.baseline):.4f} "
                           f"({r.get('role') or 'exploratory'})")
    powerless = [why for r in rows if (why := _no_power(r))]
    return GateResult("--fail-if-worse", g.spec, failures, "; ".join(checked),
                      "; ".join(powerless) if not failures and len(powerless) == len(rows) else "")


def _no_power(row: dict[str, Any]) -> str:
    """Why this row could not say "the baseline is better" whatever the scores, or "": below
    MIN_INTERVAL_N pairs (and for pass/fail scores at any n) an exact test decides, whose smallest p
    with n pairs is 2 / 2^n; when that is not below the row's level, a gate on it passes by construction
    (issue 39: it said "gate passed" on 4 items)."""
    n, m, level = row.get("n"), row.get("m") or 1, row.get("level")
    if not isinstance(n, int) or not isinstance(level, (int, float)) or row.get("interval"):
        return ""
    if n >= MIN_INTERVAL_N and "McNemar" not in str(row.get("test")):
        return ""
    alpha_row = 1 - float(level)
    if min_attainable_p(n) < alpha_row:
        return ""
    need = 1 + math.floor(1 + math.log2(1 / alpha_row))
    at = f"alpha {alpha_row * m:.2g}" + (f" over {m} tests" if m > 1 else "")
    return (f"with {n} paired item{'s' * (n != 1)} no difference on {row.get('score')} can be called at "
            f"{at} (smallest attainable p {min_attainable_p(n):.3g} >= {alpha_row:.3g}), so this gate could not fail; "
            f"it needs at least {min(need, MIN_INTERVAL_N)} items")


def worse_failures(comparisons: list[dict[str, Any]], gates: list[WorseGate]) -> list[str]:
    return [f for g in gates for f in worse_gate(comparisons, g).failures]


def _evidence(row: dict[str, Any]) -> str:
    """The row's role, adjusted p and interval (with its level) in words."""
    role = row.get("role") or "exploratory"
    p = row.get("p_adj")
    text = f"{role}, p_adj = {p:.3g}" if isinstance(p, (int, float)) else role
    ci, lv, m = row.get("interval"), row.get("level"), row.get("m") or 1
    if ci and isinstance(lv, (int, float)):
        kind = f"simultaneous {1 - (1 - lv) * m:.0%}" if row.get("simultaneous") else f"{lv:.0%}"
        return f"{text}, {kind} interval of the difference {ci[0]:.3f} to {ci[1]:.3f}"
    return f"{text}, no interval ({row.get('interval_note') or 'none'})"


def _mean_of(row: dict[str, Any], comp: dict[str, Any], model: str) -> float:
    v = row.get("mean_a") if comp.get("model_a") == model else row.get("mean_b")
    return float("nan") if v is None else float(v)


def _battle_list(battles: Any) -> list[dict[str, Any]]:
    return list(battles.values()) if isinstance(battles, dict) else list(battles or [])


def win_rate_of(battles: Any, candidate: str, baseline: str) -> tuple[float, dict[str, Any]] | None:
    """The candidate's win rate against the baseline in this run's battles (ties half), or None.
    `battles`: the battle dicts (a list, or a mapping stem -> dict)."""
    for data in _battle_list(battles):
        s = data.get("summary") or {}
        a, b = s.get("model_a"), s.get("model_b")
        wr = s.get("win_rate")
        if {a, b} != {candidate, baseline} or not isinstance(wr, (int, float)) or math.isnan(wr):
            continue
        return (float(wr) if a == candidate else 1.0 - float(wr)), s
    return None


def _record(s: dict[str, Any], candidate: str) -> str:
    """The battle's counts from the candidate's side, in the models' own names."""
    wins, losses = (s.get("wins"), s.get("losses")) if s.get("model_a") == candidate else (s.get("losses"), s.get("wins"))
    other = s.get("model_b") if s.get("model_a") == candidate else s.get("model_a")
    return (f"{candidate} {wins} wins, {s.get('ties')} ties, {losses} losses against {other}, "
            f"{s.get('invalid')} invalid")


def needs_labels(gates: Gates) -> bool:
    """Whether a gate reads the label-corrected estimates (the caller then reads them into the view)."""
    return any(g.source == LABEL_CORRECTED for g in gates.win_rates)


def _fmt(x: Any) -> str:
    return "n/a" if not isinstance(x, (int, float)) or math.isnan(x) else f"{x:.3f}"


def label_corrected_gate(corrected: dict[str, Any] | None, g: WinRateGate) -> GateResult:
    """The candidate's label-corrected win rate against the baseline below the gate fails; so does a pair
    with no label on the queue (nothing people said to gate on)."""
    flag = "--fail-under-win-rate"
    for pair in (corrected or {}).get("pairs") or []:
        a, b = pair.get("model_a"), pair.get("model_b")
        if {a, b} != {g.candidate, g.baseline}:
            continue
        est = pair.get("label_corrected") or {}
        flip = a != g.candidate  # each estimate is model_a's win rate
        x, lo, hi = (est.get(k) for k in ("estimate", "low", "high"))
        if not isinstance(x, (int, float)) or math.isnan(x) or not pair.get("labels_used"):
            break
        if flip:
            x, lo, hi = 1 - x, (None if hi is None else 1 - hi), (None if lo is None else 1 - lo)
        level = round(100 * float((corrected or {}).get("level") or 0.95))
        text = (f"{g.candidate} vs {g.baseline}: label-corrected win rate {x:.3f} ({level}% interval {_fmt(lo)} to "
                f"{_fmt(hi)}; {pair.get('labels_used')} labels, worth {_fmt(pair.get('effective_labels'))} labels alone; "
                f"judge only {_fmt((1 - pair['judge_only']['estimate']) if flip else pair['judge_only']['estimate'])})")
        if x < g.value:
            return GateResult(flag, g.spec, [f"{text} < {g.value:g}"], "")
        return GateResult(flag, g.spec, [], f"{text} >= {g.value:g}")
    return GateResult(flag, g.spec, [f"{g.candidate} vs {g.baseline}: no label on the label queue of this pair, so no "
                                     f"label-corrected win rate (gate {g.value:g}); label some: `eval.py label SAVE_PATH "
                                     f"--next 20`, or Label next in `eval.py view`"], "")


def win_rate_gate(battles: Any, g: WinRateGate, corrected: dict[str, Any] | None = None) -> GateResult:
    if g.source == LABEL_CORRECTED:
        return label_corrected_gate(corrected, g)
    got = win_rate_of(battles, g.candidate, g.baseline)
    if got is None:
        return GateResult("--fail-under-win-rate", g.spec,
                          [f"{g.candidate} vs {g.baseline}: no decided battle in this run (gate {g.value:g})"], "")
    text = f"{g.candidate} vs {g.baseline}: win rate {got[0]:.3f}"
    if got[0] < g.value:
        return GateResult("--fail-under-win-rate", g.spec, [f"{text} < {g.value:g} ({_record(got[1], g.candidate)})"], "")
    return GateResult("--fail-under-win-rate", g.spec, [], f"{text} >= {g.value:g} ({_record(got[1], g.candidate)})")


def win_rate_failures(battles: Any, gates: list[WinRateGate]) -> list[str]:
    return [f for g in gates for f in win_rate_gate(battles, g).failures]


def judge_gate(manifest: dict[str, Any]) -> GateResult:
    jc = manifest.get("judge_check") or {}
    if jc.get("trustworthy") is True:
        return GateResult("--fail-on-untrusted-judge", "", [], f"judge check: {jc.get('verdict') or 'passed'}")
    if jc.get("checked") is not True:
        said = jc.get("verdict") or "not checked: no judge check of this judge and these prompts in the save path"
        return GateResult("--fail-on-untrusted-judge", "", [f"judge check: {said}; run one: {how_to_check(manifest)}"],
                          "")
    return GateResult("--fail-on-untrusted-judge", "", [f"judge check: {jc.get('verdict') or 'not checked'}"], "")


def how_to_check(manifest: dict[str, Any]) -> str:
    """The command that checks the judge a save path's run used, in words (issue 39: the gate failed on
    "not checked" without saying how to check)."""
    bench, cfg = manifest.get("benchmark"), manifest.get("config_file")
    if (manifest.get("judge_check") or {}).get("panel"):  # a panel: its judges, then the panel as a whole
        return (f"add --judge-check N to the run, or `eval.py judge-check --config {cfg or 'CFG'}`: each judge of the "
                "panel is checked, then the panel as a whole, whose check decides")
    if bench == "mt_bench":
        return "add --judge-check N to the `eval.py mt-bench` command (N of the run's judged turns are checked)"
    if bench:
        return f"`eval.py judge-check --config {cfg or 'CFG'}` with this judge and this save_path stores one"
    return (f"add --judge-check N to the run (`eval.py --config {cfg or 'CFG'} --judge-check 20 "
            f"--fail-on-untrusted-judge`: N sanity pairs per corruption, checked before the run), or "
            f"`eval.py judge-check --config {cfg or 'CFG'}` stores one for later runs")


def evaluate(gates: Gates, view: GateView) -> list[GateResult]:
    """Every gate, in command-line order by kind, over the gated models only. InputError (exit 2)
    for a gate that matches nothing the run holds."""
    results = [r for r in view.results if r.get("model") in view.gated]
    out = [score_gate(results, g) for g in gates.scores]
    out += [worse_gate(view.comparisons, g) for g in gates.worse]
    out += [win_rate_gate(view.battles, g, view.corrected) for g in gates.win_rates]
    if gates.untrusted_judge:
        out.append(judge_gate(view.manifest))
    return out


def view_of_run(outcome: Any) -> GateView:
    """The gates' view of a run that just finished: its report view, or the SaveDir's results when
    there is none; only the models this run scored are gated."""
    save, view, manifest = outcome.save, outcome.view, outcome.manifest
    gated = [m for m in save.models if m in save.opened]
    if view is not None:
        return GateView(list(view.results), list(view.comparisons or []), _battle_list(save.battles), manifest, gated)
    return GateView(save.result_dicts(), [], _battle_list(save.battles), manifest, gated)


# ---------------------------------------------------------------------- what the user reads
def outcome_lines(results: list[GateResult]) -> list[str]:
    """One line per gate, pass or fail (stdout, before the status line)."""
    return [r.line() for r in results]


def failure_reason(results: list[GateResult]) -> str:
    """The reason of exit 1, naming each failed gate."""
    failed = [r for r in results if not r.passed]
    named = "; ".join(f"{r.name} ({r.failures[0]}{f' and {len(r.failures) - 1} more' if len(r.failures) > 1 else ''})"
                      for r in failed[:3])
    more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
    return f"{len(failed)} of {len(results)} gates failed: {named}{more}"


def status_word(code: int, manifest_status: str | None) -> str:
    """The `status:` line's word, agreeing with the exit code: 0 ok, 1 a gate failed, 2 bad input,
    3 the manifest's own status (failed / finished with errors)."""
    if code == 3:
        return manifest_status if manifest_status not in (None, "ok") else "finished with errors"
    return {0: "ok", 1: "gate failed", 2: "bad input"}.get(code, manifest_status or "unknown")
