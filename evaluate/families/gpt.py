"""The `GPT` family: the LLM judge (any OpenAI-compatible server, or a local model).

- Rating: per category, each metric of the config with its definition and evaluation steps from
  the evaluation prompt file (the project's `prompts/` by default, ColossalAI's files work too);
  `judge.mode` logprobs (G-Eval expected score), generate (strict parsed reply) or auto.
  `gpt_with_reference` gives the target to the judge as the reference answer.
- Battle: with two or more answer files (unless `battle: false`), every pair of models on every
  question of the categories that list GPT metrics, in both orders by default; written to
  `battles/` with win/tie/loss/invalid counts, win rate and CI, order-flip rate, per category, and
  a Bradley-Terry ranking when there are more than two models.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..results import atomic_write_json, safe_name
from . import Family, FamilyOutput


class GPTFamily(Family):
    name = "GPT"

    def __init__(self) -> None:
        self._eval_prompts: dict[Path, Any] = {}
        self._battle_prompts: dict[Path, Any] = {}
        self._backend = None

    # --- prompt files -------------------------------------------------------------------------
    def eval_prompt_path(self, cfg) -> Path:
        return cfg.evaluation_prompt or cfg.default_prompt("evaluation")

    def battle_prompt_path(self, cfg) -> Path:
        return cfg.battle_prompt or cfg.default_prompt("battle")

    def eval_prompts(self, cfg):
        from ..judges import load_evaluation_prompts

        path = self.eval_prompt_path(cfg)
        if path not in self._eval_prompts:
            self._eval_prompts[path] = load_evaluation_prompts(path)
        return self._eval_prompts[path]

    def battle_prompt(self, cfg):
        from ..judges import load_battle_prompt

        path = self.battle_prompt_path(cfg)
        if path not in self._battle_prompts:
            self._battle_prompts[path] = load_battle_prompt(path)
        return self._battle_prompts[path]

    # --- validation and plan --------------------------------------------------------------------
    def validate(self, cfg, category, names, where, *, used):
        if not used:
            return []
        try:
            prompts = self.eval_prompts(cfg)
        except InputError as exc:
            return [f"{where}: {exc}"]
        missing = prompts.missing_metrics(category, names)
        if not missing:
            return []
        entry = prompts.entry_for(category)
        which = f'its entry "{category}"' if not getattr(entry, "fallback", False) else \
            f'the "general" entry (the file has no entry for "{category}")'
        return [f'{where}: GPT metric "{m}" is not defined in {which} of {prompts.path}; add its definition '
                f'and evaluation steps there (known: {", ".join(entry.metrics)})' for m in missing]

    def wants_battle(self, cfg, sets) -> bool:
        return len(sets) >= 2 and cfg.battle is not False

    def validate_run(self, cfg, sets, categories) -> list[str]:
        problems = []
        if self.wants_battle(cfg, sets) and any("GPT" in f for f in categories.values()):
            try:
                self.battle_prompt(cfg)
            except InputError as exc:
                problems.append(f"battle prompt: {exc}")
        if cfg.gpt_with_reference:
            for s in sets:
                no_ref = [r.id for r in s.records if r.category in categories and "GPT" in categories[r.category]
                          and not r.targets]
                if no_ref:
                    problems.append(f"--gpt_with_reference: {s.path}: records without a target: "
                                    f"{', '.join(no_ref[:10])}{' ...' if len(no_ref) > 10 else ''}")
        return problems

    def plan(self, cfg, category, names, n_items):
        return {"scores": n_items * len(names), "judge_calls": n_items * len(names)}

    def plan_run(self, cfg, sets, categories) -> dict[str, int]:
        if not self.wants_battle(cfg, sets):
            return {}
        n = sum(1 for r in sets[0].records if "GPT" in categories.get(r.category, {}))
        pairs = len(sets) * (len(sets) - 1) // 2
        return {"battle_calls": n * pairs * (2 if cfg.judge.both_orders else 1)}

    # --- running ---------------------------------------------------------------------------------
    def backend(self, cfg):
        if self._backend is None:
            from .judging import make_backend

            self._backend = make_backend(cfg)
        return self._backend

    def run(self, cfg, category, names, records):
        from ..judges import RatingJudge

        judge = RatingJudge(self.backend(cfg), self.eval_prompts(cfg), mode=cfg.judge.mode,
                            with_reference=cfg.gpt_with_reference, language=cfg.language,
                            max_tokens=min(cfg.judge.max_tokens, 384))
        items = judge.rate(records, names)
        sig = judge.signature()
        return FamilyOutput(items=items, signatures={n: {**sig, "metric": n} for n in names})

    def battle_judge(self, cfg):
        """The BattleJudge the config asks for (run-wide battles; meta-eval's pairwise accuracy)."""
        from ..judges import BattleJudge

        return BattleJudge(self.backend(cfg), self.battle_prompt(cfg), both_orders=cfg.judge.both_orders,
                           with_reference=cfg.gpt_with_reference, language=cfg.language,
                           max_tokens=cfg.judge.max_tokens, explain=cfg.judge.explain)

    def run_all(self, cfg, sets, categories, save: Path, log) -> dict[str, Any] | None:
        """Battles between every pair of models, per category and overall."""
        if not self.wants_battle(cfg, sets):
            return None
        from ..judges import rank

        answers = {s.name: [r for r in s.records if "GPT" in categories.get(r.category, {})] for s in sets}
        if not any(answers.values()):
            return None
        judge = self.battle_judge(cfg)
        log(f"battle: {len(answers)} models, {len(next(iter(answers.values())))} questions, "
            f"{'both orders' if cfg.judge.both_orders else 'one order'}")
        results = judge.run(answers)
        written = []
        for res in results:
            data = res.to_dict()
            data["summary"] = _clean(res.summary())
            data["by_category"] = _by_category(res)
            path = save / "battles" / f"{safe_name(res.model_a)}__vs__{safe_name(res.model_b)}.json"
            atomic_write_json(path, _clean(data))
            written.append(str(path))
            s = data["summary"]
            w = s.get("weighted")
            log(f"battle {res.model_a} vs {res.model_b}: {s['wins']} wins / {s['ties']} ties / {s['losses']} losses"
                f" / {s['invalid']} invalid; win rate of {res.model_a} {_fmt(s['win_rate'])}"
                + (f"; probability-weighted: {w['wins']} / {w['ties']} / {w['losses']}, win rate {_fmt(w['win_rate'])}"
                   if w else ""))
        out: dict[str, Any] = {"battles": written}
        if len(sets) > 2:
            try:
                ranking = rank(results)
                path = save / "battles" / "ranking.json"
                atomic_write_json(path, _clean(ranking.to_dict()))
                out["ranking"] = str(path)
            except InputError as exc:
                out["ranking_error"] = str(exc)
        _battle_chart(save, results)
        return out

    def usage(self) -> dict[str, Any]:
        from .judging import backend_usage

        return backend_usage(self._backend) if self._backend is not None else {}


def _by_category(res) -> dict[str, Any]:
    from ..judges import BattleResult

    cats: dict[str, list] = {}
    for it in res.items:
        cats.setdefault(it.category, []).append(it)
    return {cat: _clean(BattleResult(res.model_a, res.model_b, items, res.both_orders).summary())
            for cat, items in sorted(cats.items())}


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _clean(obj: Any) -> Any:
    """NaN -> None so the JSON is standard."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _battle_chart(save: Path, results) -> None:
    """charts/GPT/battle_<a>__vs__<b>.png: stacked win / tie / loss / invalid per category.

    Two panels when the judge gave log-probabilities: the parsed verdicts (a verdict that flips
    with the order is a tie) and the probability-weighted ones (sign of the mean weighted score
    margin over both orders). A small judge often ties nearly everything on the first and still
    separates the models on the second, so a chart of one alone would mislead."""
    from ..charts import _plt

    plt = _plt()
    for res in results:
        cats = _by_category(res)
        names = list(cats) + ["(all)"]
        summaries = list(cats.values()) + [_clean(res.summary())]
        s = summaries[-1]
        panels = [("parsed verdicts", summaries, "judged in both orders; a verdict that flips is a tie")]
        if s.get("weighted"):
            panels.append(("probability-weighted verdicts",
                           [x.get("weighted") or {"items": 0, "wins": 0, "ties": 0, "losses": 0} for x in summaries],
                           "sign of the mean weighted score margin over both orders"))
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 0.45 * len(names) + 1.9),
                                 squeeze=False, sharey=True)
        for ax, (title, rows, xlabel) in zip(axes[0], panels):
            left = [0.0] * len(names)
            for key, color, label in (("wins", "#2ca02c", f"{res.model_a} wins"), ("ties", "#bbbbbb", "tie"),
                                      ("losses", "#d62728", f"{res.model_b} wins"), ("invalid", "#ffffff", "invalid")):
                vals = [r.get(key, 0) / max(1, r["items"]) for r in rows]
                ax.barh(names, vals, left=left, color=color, edgecolor="#666666", label=label)
                for i, (v, r) in enumerate(zip(vals, rows)):
                    if v > 0.06:
                        ax.text(left[i] + v / 2, i, str(r.get(key, 0)), ha="center", va="center", fontsize=8)
                left = [a + b for a, b in zip(left, vals)]
            rate, ci = rows[-1].get("win_rate"), rows[-1].get("win_rate_ci95") or [None, None]
            ax.set_xlim(0, 1)
            ax.set_xlabel(f"share of questions ({xlabel})", fontsize=8)
            ax.set_title(f"{title}: win rate of {res.model_a} {_fmt(rate)} (95% CI {_fmt(ci[0])}-{_fmt(ci[1])})",
                         fontsize=9)
        axes[0][0].invert_yaxis()
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.suptitle(f"Battle: {res.model_a} vs {res.model_b}", fontsize=10)
        fig.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=4)
        fig.tight_layout(rect=(0, 0, 1, 0.86))
        folder = save / "charts" / "GPT"
        folder.mkdir(parents=True, exist_ok=True)
        fig.savefig(folder / f"battle_{safe_name(res.model_a)}__vs__{safe_name(res.model_b)}.png")
        plt.close(fig)
