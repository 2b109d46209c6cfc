"""Run configuration: a superset of ColossalAI's config schema, JSON or YAML.

ColossalAI's files (`language`, `path_for_UniEval`, `category -> {GPT, Metrics, UniEval}`) load
unchanged. This project adds, all optional:

    answers:      [{name: model_a, path: answers_a.json}, ...]
    target_file:  targets.json
    save_path:    results/
    prompts:      {battle: battle_prompt_en.json, evaluation: evaluation_prompt_en.json}
    judge:        {backend, model, base_url, api_key_env, concurrency, timeout, max_retries,
                   temperature, cache, mode, both_orders, price}
                  or a panel: a list of such blocks, each with a `name` (evaluate.judges.panel_config)
    panel:        {rating: mean | median, weights: {judge name: weight}}   how a panel's judges combine
    gpt_with_reference: auto        # auto | true | false: the judge is shown the reference (evaluate.judges.references)
    category.<name>.cascade: {correctness: ExactMatch}   # a rule check decides first (evaluate.judges.cascade)
    metric_options: {BERTScore: {num_layers: 6}, ROUGE: {multi_ref: max}}
    RepEval / SAGEval lists in a category entry, and top-level `repeval` / `sageval` settings.
    primary:      [GPT/correctness, Metrics/ROUGE-L]   the confirmatory scores of every pair of models
    summary_scores: [GPT/correctness]                  the scores of the closing lines (default: primary)
    track:        mlflow | [mlflow, wandb] | {mlflow: {uri, experiment}, wandb: {project, mode, dir}}   (evaluate.track)
    answers[].format: colossalai | inspect | lm-eval | promptfoo   another harness's output (evaluate.harness)

Relative paths inside a config file are resolved against the file's folder; paths given on the
command line are resolved against the current directory.

This module checks the config when it loads: the shape (types, known keys), every option block
against its dataclass (`judge` -> JudgeOptions, each family's block -> its `Options`, every
`metric_options` entry by building the metric), with key paths and did-you-mean. Whether the
names inside a category are known (metrics, prompts, UniEval dimensions...) is checked by each
family's `validate` (evaluate.pipeline.plan.build_plan), once the answer files say which categories are used.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.options import JudgeOptions
from ..backends.registry import capabilities
from ..core.errors import ConfigError, InputError
from ..core.io import safe_name, read_structured  # noqa: F401  (re-exported: config files are read with it)
from ..savepath.layout import answers_file
from ..core.options import parse_options, short as _short, type_name as _type_name
from ..core.places import PROMPTS
from ..core.registry import suggest
from ..core.secrets import scrub_url
from ..families import FAMILY_REGISTRY, Context, family_names, get_family
from ..families.gpt import CATEGORY_KEYS, check_cascade
from ..families.metrics import check_metric_options, resolve_option_paths
from ..judges.panel_config import PanelConfig, parse_panel
from ..track.options import parse_track

BASE_KEYS = (
    "language", "path_for_UniEval", "category", "answers", "target_file", "save_path", "prompts",
    "judge", "gpt_with_reference", "metric_options", "battle", "limit", "max_invalid_share", "primary",
    "summary_scores", "missing", "panel", "track",
)
MISSING = ("refuse", "common")  # `missing:` what a model without an answer for some items does to the run


def top_level_keys() -> tuple[str, ...]:
    """The keys a config may have: the base ones and each registered family's options block."""
    return BASE_KEYS + tuple(k for k in (FAMILY_REGISTRY._items[n].options_key for n in family_names()) if k)


LANGUAGES = ("en", "cn")
SECRET_KEYS = ("api_key", "key", "openai_key", "openai_api_key")


@dataclass
class AnswerFile:
    name: str
    path: Path
    # an entry that names a model instead of a file (evaluate.generation.in_run): the model config's path
    # (resolved) or its block inline, and the questions to ask (None: the target file, else the first file)
    generate: Path | dict[str, Any] | None = None
    questions: Path | None = None
    # another harness's output (evaluate.harness): `format:` as written (else detected when the run reads the
    # file), the model it holds that this entry is (a promptfoo file holds several), and whether `name:` was
    # left out (the file names the model)
    format: str | None = None
    format_given: bool = False
    model: str | None = None
    default_name: bool = False


JudgeConfig = JudgeOptions  # the `judge:` block (evaluate.backends.options)


@dataclass
class RunConfig:
    source: Path | None
    raw: dict[str, Any]
    language: str = "en"
    path_for_unieval: dict[str, str] = field(default_factory=dict)
    categories: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    answers: list[AnswerFile] = field(default_factory=list)
    target_file: Path | None = None
    save_path: Path = Path("results")
    battle_prompt: Path | None = None
    evaluation_prompt: Path | None = None
    judge: JudgeConfig = field(default_factory=JudgeConfig)  # a panel's: its first judge's (one-judge paths)
    panel: PanelConfig | None = None  # `judge:` as a list of named judges (evaluate.judges.panel_config)
    judge_name: str | None = None  # `judge:` as a list of one named judge: that judge alone, under its name
    gpt_with_reference: bool | str = "auto"  # "auto", True or False (evaluate.judges.references)
    cascade: dict[str, dict[str, str]] = field(default_factory=dict)  # category -> GPT metric -> rule check
    metric_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # family name -> its parsed Options dataclass
    blocks: dict[str, Any] = field(default_factory=dict)  # options key -> the block as written (manifest)
    battle: bool | None = None  # None: battle when two or more answer files and GPT is enabled
    limit: int | None = None  # only the first N records of each category (a quick run); None: all
    shard: tuple[int, int] | None = None  # --shard I/N (evaluate/pipeline/shard.py); not part of the config's hash
    max_invalid_share: float = 1.0  # a family with this share of invalid scores (or more) fails the run: exit 3
    primary: list[str] | None = None  # confirmatory scores of each pair (`Family/name`); None: a default per family
    summary_scores: list[str] | None = None  # scores of the closing lines; None: the primary scores
    missing: str = "refuse"  # an item some model did not answer: refuse the run, or score the common items
    force: bool = False  # --force: replace a fuller run's results with a --limit run's, or mix item sets
    track: dict[str, Any] = field(default_factory=dict)  # tracker -> its options (evaluate.track); not in the hash
    openai_key: str | None = field(default=None, repr=False)  # from --openai_key; never written anywhere

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the effective config (secrets excluded)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The effective configuration, as written to the run manifest. Never holds a secret."""
        return {
            "language": self.language,
            "path_for_UniEval": self.path_for_unieval,
            "category": {c: {**fams, **({"cascade": self.cascade[c]} if self.cascade.get(c) else {})}
                         for c, fams in self.categories.items()},
            "answers": [{"name": a.name, "path": str(a.path),
                         **({"generate": str(a.generate) if isinstance(a.generate, Path) else "(inline model block)"}
                            if a.generate is not None else {}),
                         **{k: getattr(a, k) for k in ("format", "model") if getattr(a, k) is not None}}
                        for a in self.answers],
            "target_file": str(self.target_file) if self.target_file else None,
            "save_path": str(self.save_path),
            "prompts": {
                "battle": str(self.battle_prompt) if self.battle_prompt else None,
                "evaluation": str(self.evaluation_prompt) if self.evaluation_prompt else None,
            },
            "judge": judge_shown(self),
            **({"panel": self.panel.policy.to_dict()} if self.panel else {}),
            "gpt_with_reference": self.gpt_with_reference,
            "metric_options": self.metric_options,
            **{key: self.blocks.get(key, {}) for key in top_level_keys() if key not in BASE_KEYS},
            "limit": self.limit,
            "battle": self.battle,
            "max_invalid_share": self.max_invalid_share,
            **{k: v for k, v in (("primary", self.primary), ("summary_scores", self.summary_scores)) if v},
            **({"missing": self.missing} if self.missing != "refuse" else {}),
        }

    def family_options(self, family: str) -> Any:
        """The parsed options of `family` (its defaults when the config has no block for it)."""
        if family not in self.options:
            self.options[family] = FAMILY_REGISTRY.get(family).Options()
        return self.options[family]

    def resolve(self, value: str | Path) -> Path:
        """A path written in the config file, relative to that file's folder."""
        return _resolve(self.source.resolve().parent if self.source else None, str(value))

    def default_prompt(self, kind: str) -> Path:
        """The project's own prompt file for `kind` ("battle" or "evaluation") in the config's language (shipped
        inside the package: evaluate/prompts/)."""
        return PROMPTS / f"{kind}_prompt_{self.language}.json"


def scrubbed_judge(judge: JudgeOptions) -> dict[str, Any]:
    """The judge block as written to manifests and shown by --dry-run: every server URL (one, a list of
    replicas, or endpoints) without credentials."""
    out = judge.as_block()
    urls = out.get("base_url")
    if "base_url" in out:  # a kind that starts its own server has none
        out["base_url"] = [scrub_url(u) for u in urls] if isinstance(urls, list) else scrub_url(urls) if urls else None
    if out.get("endpoints"):
        out["endpoints"] = [{**e, "base_url": scrub_url(str(e.get("base_url", "")))} if isinstance(e, dict) else e
                            for e in out["endpoints"]]
    return out


def judge_shown(cfg: "RunConfig") -> dict[str, Any] | list[dict[str, Any]]:
    """The `judge:` block as manifests and the plan show it: one judge's scrubbed block, or a panel's
    list of them, each with its name."""
    if cfg.panel is None:
        return {"name": cfg.judge_name, **scrubbed_judge(cfg.judge)} if cfg.judge_name else scrubbed_judge(cfg.judge)
    return [{"name": m.name, **scrubbed_judge(m.options)} for m in cfg.panel.members]


def judge_blocks(cfg: "RunConfig") -> list[tuple[str, JudgeOptions]]:
    """(key path, options) of every judge of the run: `judge` alone, or `judge[i]` of a panel."""
    if cfg.panel is None:
        return [("judge[0]" if cfg.judge_name else "judge", cfg.judge)]
    return [(f"judge[{i}]", m.options) for i, m in enumerate(cfg.panel.members)]


def single_judges(cfg: "RunConfig") -> list[tuple[str | None, "RunConfig"]]:
    """(judge name, a config with that judge alone) for each judge of the run: (None, cfg) for one judge,
    one per judge of a panel (the judge check checks each judge on its own)."""
    from dataclasses import replace

    if cfg.panel is None:
        return [(None, cfg)]
    return [(m.name, replace(cfg, judge=m.options, panel=None)) for m in cfg.panel.members]


def refuse_panel(cfg: "RunConfig", what: str, instead: str) -> None:
    """ConfigError (exit 2) when `cfg` names a panel of judges and `what` (a flag, a setting) takes one
    judge: names the `judge:` key, the panel's judges and what to do `instead`."""
    if cfg.panel is not None:
        raise ConfigError([f"judge: a panel of {len(cfg.panel.members)} judges ({', '.join(cfg.panel.names)}); "
                           f"{what} takes one judge: {instead}"], str(cfg.source or "config"))


class _Checker:
    """Collects shape problems with their key paths, so one run reports all of them."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def expect(self, value: Any, types: type | tuple[type, ...], where: str, what: str) -> bool:
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types))
        if not ok:
            self.problems.append(f"{where}: expected {what}, got {_type_name(value)} {_short(value)}")
        return ok

    def unknown_keys(self, mapping: dict, known: tuple[str, ...], where: str) -> None:
        for key in mapping:
            reads = None if key in known else benchmark_block(str(key))
            if reads:
                self.problems.append(f'{where}: "{key}" is a benchmark block, not part of an evaluation run: '
                                     f"run this file with `python eval.py {reads} --config FILE`")
            elif key not in known:
                self.problems.append(f'{where}: unknown key "{key}"{suggest(str(key), list(known))}'
                                     f" (known: {', '.join(known)})")


def benchmark_block(key: str) -> str | None:
    """The benchmark command whose config file has a `key:` block (`Benchmark.config_block`), or None: a run that
    meets one says which command reads it. The benchmarks are asked as plugins are, by name, only for a key the
    run does not know, so the run stays below them in the import graph."""
    registry = importlib.import_module("evaluate.benchmarks.benchmark").benchmarks()
    return next((name for name in registry.names() if getattr(registry.get(name), "config_block", "") == key), None)


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _resolve(base: Path | None, value: str) -> Path:
    p = Path(value).expanduser()
    if not p.is_absolute() and base is not None:
        # `base` is resolved (no symlink left), so dropping "dir/.." lexically names the same file, and
        # the paths printed read results/my/report.html, not cfg/../results/my/report.html
        p = Path(os.path.normpath(base / p))
    return without_dotdot(p)


def without_dotdot(p: Path) -> Path:
    """An absolute path without "..": the part up to its last ".." resolved as the system does (a symlink
    before a ".." leads where the system goes), the rest kept as written. Issue 39: an absolute
    save_path /runs/tmp/../nightly was printed, and stored in the manifest, with its /../."""
    if not p.is_absolute() or ".." not in p.parts:
        return p
    last = len(p.parts) - 1 - p.parts[::-1].index("..")
    return Path(os.path.realpath(Path(*p.parts[:last + 1]))).joinpath(*p.parts[last + 1:])


def _generated_entry(chk: _Checker, item: dict[str, Any], where: str, base: Path | None, cfg: RunConfig) -> None:
    """`{name, generate: MODEL.yaml | {model block}, questions?}`: answers generated into the save path
    (answers/<name>.json) before the run; the model block is checked by evaluate.generation when the run
    starts, before anything is sent."""
    gen = item["generate"]
    if "path" in item:
        chk.problems.append(f"{where}: give path (an answer file) or generate (a model config), not both")
        return
    if not chk.expect(gen, (str, dict), f"{where}.generate", "a model config file or an inline model block"):
        return
    name = item.get("name") or (Path(gen).stem if isinstance(gen, str) else None)
    if not chk.expect(name, str, f"{where}.name", "a model name string (required with an inline generate block)"):
        return
    questions = item.get("questions")
    if questions is not None and not chk.expect(questions, str, f"{where}.questions", "a path string"):
        return
    # its file in the save path (generation.in_run sets it once the save path is known)
    cfg.answers.append(AnswerFile(name=name, path=answers_file(Path("."), name, "json"),
                                  generate=_resolve(base, gen) if isinstance(gen, str) else gen,
                                  questions=_resolve(base, questions) if questions else None))


def _answer_format(chk: _Checker, value: Any, where: str) -> str | None:
    """`answers[i].format`: a name of evaluate.harness's FORMATS (did-you-mean), as its canonical name."""
    from ..harness.entries import FORMATS

    if value is None or not chk.expect(value, str, where, f"one of {', '.join(FORMATS.names())}"):
        return None
    if value not in FORMATS:
        chk.problems.append(FORMATS.unknown_message(value, where))
        return None
    return FORMATS.canonical(value)


def parse_config(raw: Any, source: Path | None = None) -> RunConfig:
    """Check the shape of a parsed config and build a RunConfig. Raises ConfigError listing every problem."""
    src = str(source) if source else "config"
    chk = _Checker()
    if not isinstance(raw, dict):
        raise ConfigError([f"expected a mapping at the top level, got {_type_name(raw)}"], src)
    base = source.resolve().parent if source else None
    cfg = RunConfig(source=source, raw=raw)
    chk.unknown_keys(raw, top_level_keys(), "(top level)")

    lang = raw.get("language", "en")
    if chk.expect(lang, str, "language", '"en" or "cn"'):
        if lang not in LANGUAGES:
            chk.problems.append(f'language: expected "en" or "cn", got "{lang}"{suggest(lang, list(LANGUAGES))}')
        else:
            cfg.language = lang

    unieval = raw.get("path_for_UniEval", {}) or {}
    if chk.expect(unieval, dict, "path_for_UniEval", "a mapping task -> checkpoint path"):
        for task, path in unieval.items():
            if chk.expect(path, str, f"path_for_UniEval.{task}", "a path string"):
                cfg.path_for_unieval[str(task)] = path

    cats = raw.get("category", {})
    if cats is None:
        cats = {}
    if chk.expect(cats, dict, "category", "a mapping category name -> {GPT: [...], Metrics: [...], ...}"):
        for cat, entry in cats.items():
            where = f"category.{cat}"
            if entry is None:
                entry = {}
            if not chk.expect(entry, dict, where, "a mapping family -> list of names"):
                continue
            known_families = tuple(family_names())
            chk.unknown_keys(entry, known_families + CATEGORY_KEYS, where)
            fams: dict[str, list[str]] = {}
            for fam, names in entry.items():
                if fam not in known_families:
                    continue
                if names is None:
                    names = []
                if not chk.expect(names, list, f"{where}.{fam}", "a list of names"):
                    continue
                good: list[str] = []
                for i, name in enumerate(names):
                    if not chk.expect(name, str, f"{where}.{fam}[{i}]", "a name string"):
                        continue
                    if name in good:
                        chk.problems.append(f'{where}.{fam}[{i}]: "{name}" is listed twice')
                    else:
                        good.append(name)
                fams[fam] = good
            cfg.categories[str(cat)] = fams
            if entry.get("cascade") is not None:
                rules, problems = check_cascade(entry["cascade"], fams.get("GPT", []), f"{where}.cascade")
                chk.problems.extend(problems)
                if rules:
                    cfg.cascade[str(cat)] = rules

    answers = raw.get("answers", []) or []
    if chk.expect(answers, list, "answers", "a list of {name, path}"):
        for i, item in enumerate(answers):
            where = f"answers[{i}]"
            if isinstance(item, str):
                item = {"path": item}
            if not chk.expect(item, dict, where, "a mapping {name, path}"):
                continue
            chk.unknown_keys(item, ("name", "path", "generate", "questions", "format"), where)
            if item.get("generate") is not None:
                if "format" in item:
                    chk.problems.append(f"{where}.format: goes with path: (the format of an answer file); a "
                                        "generated entry's answers are this tool's own records")
                _generated_entry(chk, item, where, base, cfg)
                continue
            if "questions" in item:
                chk.problems.append(f"{where}.questions: goes with generate: (the questions a model is asked)")
            path = item.get("path")
            if not chk.expect(path, str, f"{where}.path", "a path string"):
                continue
            fmt = _answer_format(chk, item.get("format"), f"{where}.format")
            name = item.get("name") or Path(path).stem
            if chk.expect(name, str, f"{where}.name", "a model name string"):
                cfg.answers.append(AnswerFile(name=name, path=_resolve(base, path), format=fmt,
                                              format_given=fmt is not None, default_name=not item.get("name")))

    for key in ("target_file", "save_path"):
        value = raw.get(key)
        if value is not None and chk.expect(value, str, key, "a path string"):
            setattr(cfg, key, _resolve(base, value))

    prompts = raw.get("prompts", {}) or {}
    if chk.expect(prompts, dict, "prompts", "a mapping {battle: path, evaluation: path}"):
        chk.unknown_keys(prompts, ("battle", "evaluation"), "prompts")
        for kind in ("battle", "evaluation"):
            value = prompts.get(kind)
            if value is not None and chk.expect(value, str, f"prompts.{kind}", "a path string"):
                setattr(cfg, f"{kind}_prompt", _resolve(base, value))

    judge = raw.get("judge", {})
    judge = {} if judge is None else judge
    if isinstance(judge, list):  # a panel of judges
        cfg.panel, problems = parse_panel(judge, raw.get("panel"), SECRET_KEYS)
        chk.problems.extend(problems)
        if cfg.panel is not None:
            cfg.judge = cfg.panel.members[0].options
            if cfg.panel.alone is not None:  # a list of one: that judge, run as one judge under its name
                cfg.judge_name, cfg.panel = cfg.panel.alone.name, None
    elif raw.get("panel") is not None:
        chk.problems.append("panel: goes with a panel of judges: write judge: as a list of judge blocks, each with "
                            "a name (judge: [{name: a, backend: ..., model: ...}, {name: b, ...}]), or leave panel "
                            "out")
    if not isinstance(judge, list) and chk.expect(judge, dict, "judge",
                                                  "a mapping of judge settings (or a list of named judge blocks: "
                                                  "a panel)"):
        secrets = [k for k in judge if str(k).lower() in SECRET_KEYS]
        if secrets:
            chk.problems.append("judge: put the API key in an environment variable and name it in "
                                "judge.api_key_env; keys are never read from config files")
        given = {k: v for k, v in judge.items() if k not in secrets and v is not None}
        cfg.judge, problems = parse_options(JudgeOptions, given, "judge")
        chk.problems.extend(problems)

    value = raw.get("gpt_with_reference")
    if value is not None:
        if isinstance(value, bool) or value == "auto":
            cfg.gpt_with_reference = value
        else:
            chk.problems.append(f"gpt_with_reference: expected auto, true or false, got {_type_name(value)} "
                                f"{_short(value)}" + (suggest(value, ["auto", "true", "false"])
                                                      if isinstance(value, str) else ""))
    value = raw.get("battle")
    if value is not None and chk.expect(value, bool, "battle", "true or false"):
        cfg.battle = value
    value = raw.get("limit")
    if value is not None and chk.expect(value, int, "limit", "a positive integer (records per category)"):
        if value < 1:  # expect() has already refused true/false
            chk.problems.append(f"limit: expected a positive integer (records per category), got {value!r}")
        else:
            cfg.limit = value

    value = raw.get("max_invalid_share")
    if value is not None and chk.expect(value, (int, float), "max_invalid_share", "a number > 0 and <= 1"):
        if not 0 < value <= 1:  # NaN fails this too
            chk.problems.append(f"max_invalid_share: expected a number > 0 and <= 1 (the share of invalid scores "
                                f"that fails a run), got {value!r}")
        else:
            cfg.max_invalid_share = float(value)

    value = raw.get("missing")
    if value is not None and chk.expect(value, str, "missing", f"one of {', '.join(MISSING)}"):
        if value not in MISSING:
            chk.problems.append(f'missing: "{value}" is not a policy{suggest(value, list(MISSING))}; expected '
                                "refuse (the default: one missing answer refuses the run) or common (score the "
                                "items every model answered)")
        else:
            cfg.missing = value

    for key in ("primary", "summary_scores"):
        value = raw.get(key)
        if value is not None and chk.expect(value, list, key, "a list of score names such as GPT/correctness"):
            names = [v for i, v in enumerate(value) if chk.expect(v, str, f"{key}[{i}]", "a score name string")]
            if not names:
                chk.problems.append(f"{key}: an empty list; leave the key out for the default")
            setattr(cfg, key, names or None)

    value = raw.get("metric_options")
    if value is not None and chk.expect(value, dict, "metric_options", "a mapping METRIC -> {option: value}"):
        cfg.metric_options = value = resolve_option_paths(value, lambda v: _resolve(base, v))
        chk.problems.extend(check_metric_options(value, cfg.language))

    cfg.track, problems = parse_track(raw.get("track"), "track", lambda v: _resolve(base, v))
    chk.problems.extend(problems)

    for fam in family_names():  # each family's block, checked against its Options dataclass
        cls = FAMILY_REGISTRY._items[fam]
        if not cls.options_key:
            continue
        block = raw.get(cls.options_key)
        cfg.blocks[cls.options_key] = block if block is not None else {}
        cfg.options[fam], problems = parse_options(cls.Options, block, cls.options_key)
        chk.problems.extend(problems)

    if chk.problems:
        raise ConfigError(chk.problems + [p for p in name_problems(cfg) if p not in chk.problems], src)
    return cfg


def name_problems(cfg: RunConfig) -> list[str]:
    """The names each category lists (metrics, GPT metrics, UniEval dimensions...), checked by their families
    as far as they can be without the answer files. The plan checks them again with the answers; this is for a
    config refused for other reasons, so that its one message names every problem (issue 47: `target_flie`
    was reported, and `BLUE` only after it was fixed). Best effort on a config that did not load whole."""
    out: list[str] = []
    for cat, fams in cfg.categories.items():
        for fam, names in fams.items():
            if not names:
                continue
            try:
                ctx = Context(cfg=cfg, options=cfg.family_options(fam), family=fam)
                out += get_family(fam).validate(ctx, cat, names, f"category.{cat}.{fam}", used=False)
            except Exception:  # noqa: BLE001 - a check that needs what did not load is left to the plan
                continue
    return out


def judge_reachability(cfg: RunConfig) -> None:
    """At plan time (after --openai_key and --gpt_model are applied): an openai judge needs a server
    (judge.base_url or $OPENAI_BASE_URL) or, for OpenAI itself, a key; else every call would fail."""
    import os

    problems = []
    for where, j in judge_blocks(cfg):
        if not capabilities(j).user_server or j.base_url or os.environ.get("OPENAI_BASE_URL"):
            continue
        if not (cfg.openai_key or os.environ.get(j.api_key_env)):
            problems.append(f"{where}: backend openai with no {where}.base_url and no API key (environment variable "
                            f"{j.api_key_env} is not set, no --openai_key): set {where}.base_url to your server "
                            "(e.g. http://127.0.0.1:8000/v1) or provide the key")
    if problems:
        raise ConfigError(problems, str(cfg.source or "config"))


def check_judge_model(cfg: RunConfig) -> None:
    """At plan time, when the judge is asked: a model this process loads itself (a relative path is read
    from the config's folder, then the current one) found and its folder checked: a tokenizer, a chat
    template (evaluate.backends.preflight). Nothing is loaded."""
    from ..backends.preflight import check_model

    src = cfg.source.resolve().parent if cfg.source else None
    for where, opts in judge_blocks(cfg):
        try:
            check_model(opts, [src], f"{where}.model")
        except InputError as exc:
            raise ConfigError([str(exc)], str(cfg.source or "config")) from None


def check_model_names(names: list[str], source: str = "config") -> None:
    """Refuse two models whose results would share a file (`m 1` and `m_1` -> results/m_1.json)
    or a name twice: one model's scores would silently replace the other's."""
    by_file: dict[str, str] = {}
    problems = []
    for name in names:
        if not name.strip():
            problems.append("answers: a model name is empty")
            continue
        f = safe_name(name)
        if f in by_file:
            other = by_file[f]
            problems.append(f'answers: model names "{other}" and "{name}" ' + (
                "are the same" if other == name else f'both map to the result file results/{f}.json') +
                "; give the models distinct names (--model_name_list or answers[].name)")
        else:
            by_file[f] = name
    if problems:
        raise ConfigError(problems, source)


def resolve_score_names(cfg: RunConfig, planned: list[str]) -> None:
    """`primary` and `summary_scores` against the scores the plan will produce: a full key
    (`GPT/correctness`) or a name that only one planned key ends with (`correctness`, `ROUGE-L`);
    each is stored as its full key. ConfigError naming the key path and the closest planned names."""
    problems = []
    for key in ("primary", "summary_scores"):
        names = getattr(cfg, key)
        if not names:
            continue
        out = []
        for i, name in enumerate(names):
            hits = [k for k in planned if k == name] or [k for k in planned if k.split("/", 1)[-1] == name]
            if len(hits) == 1:
                out.append(hits[0])
            elif hits:
                problems.append(f'{key}[{i}]: "{name}" is ambiguous ({", ".join(hits)}); write the full key')
            else:
                problems.append(f'{key}[{i}]: no score "{name}" in this run'
                                f'{suggest(name, planned + [k.split("/", 1)[-1] for k in planned])}'
                                f" (planned: {', '.join(planned) or 'none'})")
        setattr(cfg, key, list(dict.fromkeys(out)))
    if problems:
        raise ConfigError(problems, str(cfg.source or "config"))


def load_config(path: Path) -> RunConfig:
    return parse_config(read_structured(path, "config"), source=path)
