"""A run's items as the viewer lists, filters and shows them, built once per loaded run.

Why on the server: a run of 10,000 items x 3 models is tens of megabytes of text; the browser gets a
page of rows at a time and the ids of every item the filters keep (for `j` / `k`), and one item whole
when it is opened. The result files' item dicts are referred to, not copied.

Words used here: a *pair* is two model indices (i, j) in the run's model order, shown as A = i (left)
and B = j (right); a *verdict* is "A", "B", "tie" or "invalid" in that orientation; the judge's verdict
on a pair is its battle verdict (both orders combined, as stored), else, without a battle, the
direction of the pair's headline GPT rating.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..report.analysis import families_of, headline_key
from ..savepath.log import RunLog
from ..savepath.labels import Label

SWAP = {"A": "B", "B": "A"}
EXCERPT = 180  # characters of a question in a list row
DIFF_MIN_RATIO = 0.5  # word similarity above which two answers are shown with their differences marked
DIFF_MAX_TOKENS = 4000  # longer answers are not compared word by word (difflib is quadratic at worst)
TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Entry:
    """One item of the run: its result-file item per model (None where a model lacks it)."""

    id: str
    category: str
    items: list[dict[str, Any] | None]

    def first(self) -> dict[str, Any]:
        return next(it for it in self.items if it is not None)

    def question(self) -> str:
        it = self.first()
        text = str(it.get("instruction") or "")
        turns = it.get("turns")
        if not text and isinstance(turns, list) and turns and isinstance(turns[0], dict):
            text = str(turns[0].get("user") or "")
        return text


@dataclass
class Filters:
    """What the list shows: every field optional."""

    pair: tuple[int, int] = (0, 1)
    category: str = ""
    score: str = ""  # a score key; with lo / hi: the score range
    model: int | None = None  # the model whose score is in range (None: any model)
    lo: float | None = None
    hi: float | None = None
    flipped: bool = False  # the judge's verdict changes with the order
    disagree: bool = False  # the judge and the metrics favour different answers
    invalid: bool = False  # an invalid score or battle reply
    labelled: str = ""  # "yes", "no" or "" (either)
    query: str = ""


def label_key(iid: str, category: str, a: str, b: str) -> tuple[str, str, frozenset[str]]:
    return (iid, category, frozenset((a, b)))


def label_in_pair(lab: Label, a: str) -> str:
    """A label's verdict with `a` as model A."""
    return lab.verdict if lab.model_a == a else SWAP.get(lab.verdict, lab.verdict)


@dataclass
class RunView:
    """A loaded run, indexed for the list, the filters and the item page."""

    data: RunLog
    entries: list[Entry] = field(default_factory=list)
    by_id: dict[str, Entry] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    scales: dict[str, list[float] | None] = field(default_factory=dict)
    battles: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    list_key: str | None = None
    outputs: dict[tuple[str, str, str], str] | None = None  # (model, id, category) -> answer, for the labels panel

    @classmethod
    def build(cls, data: RunLog) -> "RunView":
        slim(data)
        view = cls(data=data)
        n = len(data.models)
        keys: dict[str, None] = {}
        for mi, res in enumerate(data.results):
            for key, sig in (res.get("signatures") or {}).items():
                if isinstance(sig, dict) and key not in view.scales:
                    sc = sig.get("scale")
                    view.scales[key] = list(sc) if isinstance(sc, (list, tuple)) and len(sc) == 2 else None
            for it in res.get("items", []):
                iid = str(it.get("id"))
                entry = view.by_id.get(iid)
                if entry is None:
                    entry = view.by_id[iid] = Entry(iid, str(it.get("category", "")), [None] * n)
                    view.entries.append(entry)
                entry.items[mi] = it
                keys.update(dict.fromkeys(it.get("scores") or {}))
                keys.update(dict.fromkeys(it.get("invalid") or {}))
        for bt in data.battles:
            s = bt.get("summary") or {}
            view.battles[(s.get("model_a"), s.get("model_b"))] = {
                (str(it.get("id")), str(it.get("category", ""))): it for it in bt.get("items", [])}
        view.keys = sorted(keys, key=lambda k: (families_of([k]), k))
        fams = families_of(view.keys)
        view.list_key = headline_key(view.keys, fams[0]) if fams else None
        # an item nobody scored or judged (its category skipped) is not listed, as in the report
        battled = {iid for items in view.battles.values() for iid, _ in items}
        view.entries = [e for e in view.entries if e.id in battled or any(
            it and (it.get("scores") or it.get("invalid")) for it in e.items)]
        view.by_id = {e.id: e for e in view.entries}
        return view

    @property
    def models(self) -> list[str]:
        return self.data.models

    @property
    def categories(self) -> list[str]:
        return sorted({e.category for e in self.entries})

    # --- the judge on a pair ----------------------------------------------------------------------
    def battle_item(self, entry: Entry, pair: tuple[int, int]) -> tuple[dict[str, Any] | None, bool]:
        """The battle item of the pair on this entry, and whether the file holds the pair swapped."""
        if pair[0] == pair[1]:  # a run of one model: no pair
            return None, False
        a, b = self.models[pair[0]], self.models[pair[1]]
        key = (entry.id, entry.category)
        if (a, b) in self.battles:
            return self.battles[(a, b)].get(key), False
        if (b, a) in self.battles:
            return self.battles[(b, a)].get(key), True
        return None, False

    def judge(self, entry: Entry, pair: tuple[int, int]) -> tuple[str | None, str | None]:
        """(verdict in the pair's orientation, "battle" or "rating"), or (None, None)."""
        item, swapped = self.battle_item(entry, pair)
        if item is not None:
            v = str(item.get("verdict") or "invalid")
            return (SWAP.get(v, v) if swapped else v), "battle"
        return self._direction(entry, pair, "GPT"), "rating"

    def _direction(self, entry: Entry, pair: tuple[int, int], family: str) -> str | None:
        ia, ib = entry.items[pair[0]], entry.items[pair[1]]
        if ia is None or ib is None or pair[0] == pair[1]:
            return None
        sa, sb = ia.get("scores") or {}, ib.get("scores") or {}
        common = [k for k in sa if k in sb and finite(sa[k]) and finite(sb[k]) and "@" not in k]
        key = headline_key(common, family)
        if key is None:
            return None
        return "A" if sa[key] > sb[key] else "B" if sb[key] > sa[key] else "tie"

    def flipped(self, entry: Entry, pair: tuple[int, int]) -> bool:
        item, _ = self.battle_item(entry, pair)
        return bool(item and (item.get("flipped") or item.get("inconsistent")))

    def disagrees(self, entry: Entry, pair: tuple[int, int]) -> bool:
        """The judge picks one answer and the headline metric scores the other higher."""
        judge, _ = self.judge(entry, pair)
        metric = self._direction(entry, pair, "Metrics")
        return judge in ("A", "B") and metric in ("A", "B") and judge != metric

    def invalid(self, entry: Entry, pair: tuple[int, int]) -> bool:
        if any(it and it.get("invalid") for it in entry.items):
            return True
        item, _ = self.battle_item(entry, pair)
        return bool(item and (item.get("verdict") == "invalid"
                              or any(o.get("verdict") == "invalid" for o in item.get("orders", []))))

    # --- the list ---------------------------------------------------------------------------------
    @staticmethod
    def matches(entry: Entry, query: str) -> bool:
        """Whether the lowercased `query` is in the item's id, category or any of its texts. Each text is
        lowercased as it is searched, not kept lowercased beside the original: on 10,000 items x 3 models
        that copy would be some 27 MB of the server's memory, for a search about 70 ms faster."""
        if query in entry.id.lower() or query in entry.category.lower():
            return True
        for it in entry.items:
            if it is None:
                continue
            for key in ("instruction", "input", "output"):
                text = it.get(key)
                if text and query in str(text).lower():
                    return True
            for t in it.get("targets") or []:
                if query in str(t).lower():
                    return True
            for t in it.get("turns") or []:
                if isinstance(t, dict) and any(query in str(t.get(k) or "").lower() for k in ("user", "assistant")):
                    return True
        return False

    def select(self, f: Filters, labels: Mapping[tuple[str, str, frozenset[str]], Label]) -> list[Entry]:
        """The entries the filters keep, in the run's order."""
        a, b = self.models[f.pair[0]], self.models[f.pair[1]]
        query = f.query.strip().lower()
        out = []
        for e in self.entries:
            if f.category and e.category != f.category:
                continue
            if f.score and (f.lo is not None or f.hi is not None) and not self._in_range(e, f):
                continue
            if f.flipped and not self.flipped(e, f.pair):
                continue
            if f.disagree and not self.disagrees(e, f.pair):
                continue
            if f.invalid and not self.invalid(e, f.pair):
                continue
            if f.labelled:
                has = label_key(e.id, e.category, a, b) in labels
                if has != (f.labelled == "yes"):
                    continue
            if query and not self.matches(e, query):
                continue
            out.append(e)
        return out

    def _in_range(self, e: Entry, f: Filters) -> bool:
        models = range(len(self.models)) if f.model is None else [f.model]
        for mi in models:
            it = e.items[mi] if 0 <= mi < len(e.items) else None
            v = (it.get("scores") or {}).get(f.score) if it else None
            if finite(v) and (f.lo is None or v >= f.lo) and (f.hi is None or v <= f.hi):
                return True
        return False

    def row(self, e: Entry, f: Filters, labels: Mapping[tuple[str, str, frozenset[str]], Label]) -> dict[str, Any]:
        """One line of the list: id, category, question excerpt, the listed score per model, the judge."""
        key = f.score or self.list_key
        verdict, source = self.judge(e, f.pair)
        a, b = self.models[f.pair[0]], self.models[f.pair[1]]
        lab = labels.get(label_key(e.id, e.category, a, b))
        q = e.question()
        return {"id": e.id, "c": e.category, "q": q[:EXCERPT] + ("…" if len(q) > EXCERPT else ""),
                "s": [(it.get("scores") or {}).get(key) if it else None for it in e.items],
                "v": verdict, "vs": source, "f": self.flipped(e, f.pair), "x": self.invalid(e, f.pair),
                "d": self.disagrees(e, f.pair), "l": label_in_pair(lab, a) if lab else None}

    # --- one item ---------------------------------------------------------------------------------
    def detail(self, e: Entry, pair: tuple[int, int], history: list[Label]) -> dict[str, Any]:
        first = e.first()
        models = []
        for mi, it in enumerate(e.items):
            if it is None:
                models.append({"name": self.models[mi], "missing": True})
                continue
            invalid = {k: (v if isinstance(v, dict) else {"reason": str(v)})
                       for k, v in (it.get("invalid") or {}).items()}
            models.append({"name": self.models[mi], "output": str(it.get("output") or ""),
                           "scores": {k: v for k, v in (it.get("scores") or {}).items()},
                           "invalid": {k: {"reason": str(v.get("reason", "")), "raw": str(v.get("raw", ""))}
                                       for k, v in invalid.items()},
                           "details": it.get("details") or {}, "flags": list(it.get("flags") or []),
                           "turns": [{"user": str(t.get("user", "")), "assistant": str(t.get("assistant", ""))}
                                     for t in it.get("turns") or [] if isinstance(t, dict)]})
        a, b = self.models[pair[0]], self.models[pair[1]]
        item, swapped = self.battle_item(e, pair)
        battle = None
        if item is not None:
            battle = {"verdict": _turn(item.get("verdict"), swapped),
                      "weighted": _turn(item.get("weighted_verdict"), swapped),
                      "flipped": bool(item.get("flipped")), "inconsistent": bool(item.get("inconsistent")),
                      "stored_as": f"{b} vs {a}" if swapped else f"{a} vs {b}",
                      "orders": [_order(o, swapped, a, b) for o in item.get("orders", [])]}
        ia, ib = e.items[pair[0]], e.items[pair[1]]
        verdict, source = self.judge(e, pair)
        keys = [k for k in self.keys if any(k in (m.get("scores") or {}) or k in (m.get("invalid") or {})
                                            for m in models)]
        return {"id": e.id, "category": e.category, "question": str(first.get("instruction") or ""),
                "input": str(first.get("input") or ""), "targets": [str(t) for t in first.get("targets") or []],
                "models": models, "pair": list(pair), "keys": keys,
                "scales": {k: self.scales.get(k) for k in self.keys},
                "battle": battle, "judge": verdict, "judge_source": source,
                "flipped": self.flipped(e, pair), "disagree": self.disagrees(e, pair),
                "diff": (word_diff(str(ia.get("output") or ""), str(ib.get("output") or ""))
                         if ia and ib and pair[0] != pair[1] else None),
                "labels": [{**lab.to_dict(), "verdict_here": label_in_pair(lab, a)} for lab in history]}


def slim(data: RunLog) -> None:
    """Make a loaded run smaller in memory, in place, before it is kept: the short strings every item
    repeats (ids, categories, verdicts, orders, modes) are shared (sys.intern; a JSON reader makes a new
    string for every value), and the hashes the viewer never shows (each answer's sha256, each battle
    request's key) are dropped. A run of 10,000 items x 3 models holds about a fifth less."""
    from sys import intern

    for res in data.results:
        for it in res.get("items", []):
            it.pop("output_sha256", None)
            for k in ("id", "category"):
                if isinstance(it.get(k), str):
                    it[k] = intern(it[k])
            for det in (it.get("details") or {}).values():
                if isinstance(det, dict):
                    det.pop("request", None)
                    for k, v in det.items():
                        if isinstance(v, str) and len(v) < 40:
                            det[k] = intern(v)
    for bt in data.battles:
        for it in bt.get("items", []):
            for k in ("id", "category", "verdict", "weighted_verdict"):
                if isinstance(it.get(k), str):
                    it[k] = intern(it[k])
            for o in it.get("orders", []):
                o.pop("request", None)
                for k in ("order", "verdict", "reason"):
                    if isinstance(o.get(k), str) and len(o[k]) < 40:
                        o[k] = intern(o[k])


def _turn(v: Any, swapped: bool) -> Any:
    return SWAP.get(v, v) if swapped else v


def _order(o: Mapping[str, Any], swapped: bool, a: str, b: str) -> dict[str, Any]:
    """One order of a battle item, from the side of the pair shown: who was shown first, the verdict,
    the scores as (A, B), the raw reply and why it is invalid."""
    stored = str(o.get("order") or "AB")
    first_is_stored_a = stored == "AB"
    first = (b if first_is_stored_a else a) if swapped else (a if first_is_stored_a else b)
    scores = o.get("scores")
    weighted = o.get("weighted_scores")
    if swapped:
        scores = list(reversed(scores)) if scores else scores
        weighted = list(reversed(weighted)) if weighted else weighted
    return {"order": stored, "first": first, "second": b if first == a else a,
            "verdict": _turn(o.get("verdict"), swapped), "scores": scores, "weighted": weighted,
            "raw": str(o.get("raw") or ""), "reason": str(o.get("reason") or "")}


def word_diff(a: str, b: str) -> dict[str, Any] | None:
    """Two answers word by word: None when they are not alike (similarity below DIFF_MIN_RATIO) or too
    long; else each side as [same?, text] runs, the differences to be marked."""
    if a == b:
        return {"ratio": 1.0, "identical": True, "a": [[True, a]], "b": [[True, b]]}
    ta, tb = TOKEN.findall(a), TOKEN.findall(b)
    if not ta or not tb or len(ta) > DIFF_MAX_TOKENS or len(tb) > DIFF_MAX_TOKENS:
        return None
    sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    if sm.quick_ratio() < DIFF_MIN_RATIO or sm.ratio() < DIFF_MIN_RATIO:
        return None
    out_a: list[list[Any]] = []
    out_b: list[list[Any]] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        same = op == "equal"
        if i2 > i1:
            out_a.append([same, "".join(ta[i1:i2])])
        if j2 > j1:
            out_b.append([same, "".join(tb[j1:j2])])
    return {"ratio": round(sm.ratio(), 3), "identical": False, "a": out_a, "b": out_b}
