"""A panel's config: `judge:` as a list of named judge blocks, and the top-level `panel:` block.

    judge:
      - {name: smol, backend: local, model: SmolLM2-360M-Instruct}
      - {name: gpt, backend: openai, model: gpt-4o-mini, base_url: http://127.0.0.1:8000/v1}
    panel: {rating: mean, weights: {smol: 1, gpt: 2}}

Each block is a `judge:` block as a single judge's (JudgeOptions, checked key by key) plus its
`name`; the name is part of every score key the judge gives (`GPT/correctness@smol`), so it is
file-safe, unique, and never looks like a turn mark. Kept apart from the judge options themselves
(evaluate.backends.options) so a panel adds no field to a judge's block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ..backends.options import JudgeOptions
from ..core.options import option, parse_options, short, type_name
from ..core.registry import suggest
from ..stats.panel import RATING_RULE, WEIGHTED_RULE

JUDGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # no "@" or "/": it is part of a score key
TURN_NAME = re.compile(r"^turn[0-9]+$")  # `x@turn2` is a conversation's turn, never a judge
RATINGS = ("mean", "median")


@dataclass
class PanelOptions:
    """The top-level `panel:` block: how a panel's judges are combined."""

    rating: Literal["mean", "median"] = option("mean", "a panel's rating of an item: the mean of its judges' valid "
                                                       "ratings, or their median")
    weights: dict[str, float] | None = option(None, "judge name -> weight (> 0) in the panel's rating and vote; "
                                                    "every judge named (default: every judge 1)")

    def weight(self, name: str) -> float:
        return float((self.weights or {}).get(name, 1.0))

    def rule(self) -> str:
        """The panel's rating rule in words (written into each panel score's signature)."""
        return (WEIGHTED_RULE if self.weights else RATING_RULE)[self.rating]

    def to_dict(self) -> dict[str, Any]:
        return {"rating": self.rating, "weights": dict(self.weights) if self.weights else None}


@dataclass
class PanelMember:
    """One judge of a panel: its name (part of its score keys) and its judge block."""

    name: str
    options: JudgeOptions


@dataclass
class PanelConfig:
    """The judges of a panel, in the config's order, and how they are combined."""

    members: list[PanelMember] = field(default_factory=list)
    policy: PanelOptions = field(default_factory=PanelOptions)

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    @property
    def alone(self) -> PanelMember | None:
        """The one judge of a list of one (run as that judge, under its name), else None."""
        return self.members[0] if len(self.members) == 1 else None


def parse_panel(judges: list[Any], panel: Any, secret_keys: tuple[str, ...]) -> tuple[PanelConfig | None, list[str]]:
    """A list `judge:` and the `panel:` block (None: defaults) -> (PanelConfig, problems with key paths).
    `secret_keys`: keys refused in a judge block (an API key is read from the environment only). A list
    of one judge is parsed as any other (a first step to a panel, what a config generator writes): the
    run config takes it as that judge alone (`PanelConfig.alone`)."""
    problems: list[str] = []
    if not judges:
        problems.append("judge: an empty list; a panel needs two judge blocks or more, each with a name; for one "
                        "judge write the block itself as a mapping (judge: {backend: ..., model: ...})")
    members: list[PanelMember] = []
    seen: dict[str, int] = {}
    for i, block in enumerate(judges):
        where = f"judge[{i}]"
        if not isinstance(block, dict):
            problems.append(f"{where}: expected a judge block, a mapping {{name, backend, model, ...}}, got "
                            f"{type_name(block)} {short(block)}")
            continue
        name = block.get("name")
        if not isinstance(name, str) or not name:
            got = "nothing" if name is None else f"{type_name(name)} {short(name)}"
            problems.append(f"{where}.name: expected the judge's name (letters, digits, . _ -), got {got}; every "
                            "judge of a panel is named")
            name = None
        elif not JUDGE_NAME.match(name) or TURN_NAME.match(name):
            problems.append(f'{where}.name: "{name}" is not a judge name: letters, digits, ".", "_" or "-", at most 64, '
                            'starting with a letter or digit, not "turnN" (it becomes part of score keys such as '
                            "GPT/correctness@NAME)")
            name = None
        elif name in seen:
            problems.append(f'{where}.name: "{name}" is also the name of judge[{seen[name]}]; each judge of a panel '
                            "needs its own name")
            name = None
        else:
            seen[name] = i
        secrets = [k for k in block if str(k).lower() in secret_keys]
        if secrets:
            problems.append(f"{where}: put the API key in an environment variable and name it in "
                            f"{where}.api_key_env; keys are never read from config files")
        given = {k: v for k, v in block.items() if k != "name" and k not in secrets and v is not None}
        opts, bad = parse_options(JudgeOptions, given, where)
        problems.extend(bad)
        if opts.batch and not bad:
            problems.append(f"{where}.batch: provider batch jobs are sent for a single judge; a panel's judges are "
                            "asked directly (leave batch out here)")
        if name is not None:
            members.append(PanelMember(name, opts))
    policy, bad = _policy(panel, list(seen))
    problems.extend(bad)
    if problems:
        return None, problems
    return PanelConfig(members, policy), []


def _policy(raw: Any, names: list[str]) -> tuple[PanelOptions, list[str]]:
    policy, problems = parse_options(PanelOptions, raw, "panel")
    if not policy.weights:
        if policy.weights == {}:
            problems.append("panel.weights: an empty mapping; leave the key out for equal weights")
        return policy, problems
    for name, w in policy.weights.items():
        if name not in names:
            problems.append(f'panel.weights.{name}: no judge named "{name}"{suggest(str(name), names)} '
                            f"(the panel's judges: {', '.join(names)})")
        elif isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0 or w == float("inf"):
            problems.append(f"panel.weights.{name}: expected a number > 0, got {short(w)}")
    left = [n for n in names if n not in policy.weights]
    if left:
        problems.append(f"panel.weights: no weight for {', '.join(left)}; give every judge of the panel a weight "
                        "(or leave panel.weights out for equal weights)")
    return policy, problems
