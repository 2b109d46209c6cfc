"""AlpacaEval's pairwise judging protocol with any project judge, writing AlpacaEval's annotations.json.

AlpacaEval 2 (tatsu-lab/alpaca_eval) asks a judge once per instruction which of two outputs is
better: the baseline's (`output_1`) or the model's (`output_2`), shown in an order drawn at random
per instruction, and reads the answer from the log-probabilities of the two identifier tokens of
its prompt (`m`: the first output shown, `M`: the second). The preference is a number in [1, 2]:
1 the baseline wins, 2 the model wins, in between the judge's probability. This module follows the
evaluator config (`configs.yaml`) and its prompt file as AlpacaEval reads them:

- the prompt file is a ChatML text (`<|im_start|>role` ... `<|im_end|>`): each block is one chat
  message, its content stripped; `{instruction}`, `{output_1}`, `{output_2}` are filled once each;
- the order is AlpacaEval's: output_1 and output_2 are swapped when
  `random.Random("is_switched_outputs" + instruction + str(seed)).random() >= 0.5` (seed 0 is
  AlpacaEval's default; with it the swaps are those of AlpacaEval's published annotations);
- `logprob_parser`: p = P(numerator) / sum of P(denominators) over the top log-probabilities of
  the first generated token (absent tokens count as probability 0); preference = 2 - p, or with
  `is_binarize` 1 if the numerator is the likeliest, else 2; a swapped pair gets 3 - preference;
- a pair whose two outputs are identical is a draw (1.5) and costs no call;
- a reply where no denominator token is among the top log-probabilities is *invalid*: kept with
  its raw reply and preference null, never counted.

A judge that gives no log-probabilities is read from the token it generated (numerator -> 1,
another denominator token -> 2, as a binarized config would), and each record says which way its
preference was read (`preference_method`).

Two deliberate differences from AlpacaEval's code, both invisible on well-formed data: the prompt
is split into messages before it is filled (an output that itself contains `<|im_end|>` stays
inside its message), and placeholders are filled in one pass (an instruction that contains the
text `{output_1}` is not filled again). Neither occurs in AlpacaEval's 805 instructions or in the
published outputs shipped with it.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...backends.base import Backend, Completion, JudgeRequest
from ...core.errors import InputError
from ...core.io import read_structured, read_text, safe_name, sha256_text
from ...core.options import short
from ...savepath.log import write_run_log
from .records import AlpacaEvalAnnotations, AlpacaEvalJudgeRun

FIELDS = ("instruction", "output_1", "output_2")
SWITCH_SALT = "is_switched_outputs"  # AlpacaEval's prefix of the per-instruction seed
ROLES = ("system", "user", "assistant")
START, END = "<|im_start|>", "<|im_end|>"
_PLACEHOLDER = re.compile(r"\{([^\s]+?)\}")  # what AlpacaEval's make_prompts counts as a placeholder

# Keys of an annotator's config: used, or without effect on what the judge is asked.
_USED_KEYS = {"prompt_template", "fn_completions", "completions_kwargs", "fn_completion_parser",
              "completion_parser_kwargs", "batch_size", "is_randomize_output_order"}
_INERT_KEYS = {"completion_key", "packages_for_which_to_show_version", "is_shuffle", "is_store_raw_completions"}
_USED_COMPLETION_KWARGS = {"model_name", "max_tokens", "temperature", "logprobs", "top_logprobs"}
_INERT_COMPLETION_KWARGS = {"num_procs", "price_per_token", "is_strip", "requires_chatml", "client_config_path",
                            "client_kwargs", "sleep_time", "n_retries", "batch_size"}


# ---------------------------------------------------------------------------- the evaluator config
@dataclass(frozen=True)
class Evaluator:
    """One AlpacaEval annotator, as its configs.yaml and prompt file define it."""

    name: str  # the annotator's key in configs.yaml; also the results folder's name
    config_path: Path
    prompt_path: Path
    prompt_text: str
    messages: tuple[tuple[str, str], ...]  # (role, content template)
    max_tokens: int
    temperature: float
    top_logprobs: int  # 0 when the config asks for no log-probabilities
    numerator: str
    denominators: tuple[str, ...]
    binarize: bool
    logprob_index: int  # which generated position holds the answer (AlpacaEval's "batch" is 0 here)
    randomize: bool
    config_judge: str  # completions_kwargs.model_name: the judge AlpacaEval's config was written for

    def signature(self) -> dict[str, Any]:
        """What the annotations depend on besides the judge: config and prompt, by hash."""
        return {"annotator": self.name,
                "config": {"path": str(self.config_path), "sha256": sha256_text(read_text(self.config_path))},
                "prompt": {"path": str(self.prompt_path), "sha256": sha256_text(self.prompt_text)},
                "max_tokens": self.max_tokens, "temperature": self.temperature, "top_logprobs": self.top_logprobs,
                "numerator": self.numerator, "denominators": list(self.denominators), "binarize": self.binarize,
                "randomize_order": self.randomize, "config_judge": self.config_judge}


def _config_file(path: Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / "configs.yaml"
    if not path.is_file():
        raise InputError(f"{path}: evaluator config not found (give an AlpacaEval evaluator folder holding "
                         "configs.yaml, or the configs.yaml itself)")
    return path


def _prompt_file(config: Path, where: str, value: Any) -> Path:
    """AlpacaEval resolves a relative prompt path against the folder of evaluator folders (the config's
    grandparent); a path relative to the config's own folder is accepted too."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{config}: {where}: expected the path of the prompt file, got {short(value)}")
    given = Path(value)
    tried = [given] if given.is_absolute() else [config.parent.parent / given, config.parent / given]
    for p in tried:
        if p.is_file():
            return p
    raise InputError(f"{config}: {where}: prompt file {value!r} not found (looked for "
                     + " and ".join(str(p) for p in tried) + ")")


def split_chat(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """The (role, content template) messages of a ChatML prompt, read as AlpacaEval's
    prompt_to_chatml reads them; a prompt without `<|im_start|>` is one user message."""
    body = text.strip()
    if START not in body:
        return (("user", body),)
    if not body.startswith(START):
        raise InputError(f"{where}: text before the first {START}: {short(body.split(START, 1)[0])} "
                         "(every message must be a <|im_start|>role ... <|im_end|> block)")
    out = []
    for n, block in enumerate(body.split(START)[1:], 1):
        head, sep, rest = block.partition("\n")
        if not sep:
            raise InputError(f"{where}: message {n}: expected the role on the line of {START}, then the content")
        role = head.strip()
        if role not in ROLES:
            raise InputError(f"{where}: message {n}: role {role!r} is not supported (expected one of "
                             f"{', '.join(ROLES)}; named few-shot roles such as 'system name=...' are not)")
        content, end, tail = rest.partition(END)
        if not end:
            raise InputError(f"{where}: message {n} ({role}) has no {END}")
        if tail.strip():
            raise InputError(f"{where}: message {n} ({role}): text after {END} outside any message: "
                             f"{short(tail.strip())}")
        out.append((role, content))
    return tuple(out)


def _check_placeholders(text: str, where: str) -> None:
    names = _PLACEHOLDER.findall(text)
    unknown = sorted(set(names) - set(FIELDS))
    if unknown:
        raise InputError(f"{where}: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} "
                         f"(known: {', '.join('{' + f + '}' for f in FIELDS)})")
    for f in FIELDS[1:]:
        if names.count(f) != 1:
            raise InputError(f"{where}: expected {{{f}}} exactly once, found it {names.count(f)} time(s)")
    if names.count("instruction") > 1:
        raise InputError(f"{where}: expected {{instruction}} at most once, found it {names.count('instruction')} times")


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: expected an integer >= {minimum}, got {short(value)}")
    return value


def read_evaluator(path: Path) -> Evaluator:
    """The annotator of an AlpacaEval evaluator folder (or configs.yaml), with its prompt file read
    unchanged; InputError names the file and key of the first problem."""
    cfg_path = _config_file(path)
    raw = read_structured(cfg_path, "evaluator config")
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"{cfg_path}: expected a mapping of one annotator name to its settings")
    if len(raw) != 1:
        raise InputError(f"{cfg_path}: {len(raw)} annotators ({', '.join(map(str, raw))}); one is supported "
                         "(AlpacaEval would draw one per instruction)")
    name, conf = next(iter(raw.items()))
    name = str(name)
    if not isinstance(conf, dict):
        raise InputError(f"{cfg_path}: {name}: expected a mapping of settings, got {short(conf)}")
    unknown = sorted(set(conf) - _USED_KEYS - _INERT_KEYS)
    if unknown:
        raise InputError(f"{cfg_path}: {name}: unsupported key(s) {', '.join(unknown)} (supported: "
                         f"{', '.join(sorted(_USED_KEYS | _INERT_KEYS))})")
    parser = conf.get("fn_completion_parser")
    if parser != "logprob_parser":
        raise InputError(f"{cfg_path}: {name}.fn_completion_parser: only logprob_parser is supported (as in "
                         f"weighted_alpaca_eval_gpt4_turbo), got {short(parser)}")
    if conf.get("batch_size", 1) != 1:
        raise InputError(f"{cfg_path}: {name}.batch_size: only 1 (one pair per prompt) is supported, "
                         f"got {short(conf.get('batch_size'))}")
    randomize = conf.get("is_randomize_output_order", True)
    if not isinstance(randomize, bool):
        raise InputError(f"{cfg_path}: {name}.is_randomize_output_order: expected true or false, got {short(randomize)}")

    kw = conf.get("completions_kwargs") or {}
    if not isinstance(kw, dict):
        raise InputError(f"{cfg_path}: {name}.completions_kwargs: expected a mapping, got {short(kw)}")
    unknown = sorted(set(kw) - _USED_COMPLETION_KWARGS - _INERT_COMPLETION_KWARGS)
    if unknown:
        raise InputError(f"{cfg_path}: {name}.completions_kwargs: unsupported key(s) {', '.join(unknown)} "
                         f"(supported: {', '.join(sorted(_USED_COMPLETION_KWARGS))})")
    where = f"{cfg_path}: {name}.completions_kwargs"
    max_tokens = _int(kw.get("max_tokens", 1), f"{where}.max_tokens", 1)
    temperature = kw.get("temperature", 0.7)  # AlpacaEval's default when a config sets none
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise InputError(f"{where}.temperature: expected a number from 0 to 2, got {short(temperature)}")
    logprobs = kw.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise InputError(f"{where}.logprobs: expected true or false, got {short(logprobs)}")
    top = _int(kw.get("top_logprobs", 5), f"{where}.top_logprobs", 1) if logprobs else 0
    judge = kw.get("model_name", "")
    if not isinstance(judge, str):
        raise InputError(f"{where}.model_name: expected a string, got {short(judge)}")

    pk = conf.get("completion_parser_kwargs") or {}
    where = f"{cfg_path}: {name}.completion_parser_kwargs"
    if not isinstance(pk, dict):
        raise InputError(f"{where}: expected a mapping, got {short(pk)}")
    unknown = sorted(set(pk) - {"numerator_token", "denominator_tokens", "is_binarize", "log_prob_index"})
    if unknown:
        raise InputError(f"{where}: unsupported key(s) {', '.join(unknown)} "
                         "(supported: numerator_token, denominator_tokens, is_binarize, log_prob_index)")
    numerator = pk.get("numerator_token")
    if not isinstance(numerator, str) or not numerator:
        raise InputError(f"{where}.numerator_token: expected a token string such as \"m\", got {short(numerator)}")
    denominators = pk.get("denominator_tokens")
    if not isinstance(denominators, list) or not denominators or not all(isinstance(t, str) and t for t in denominators):
        raise InputError(f"{where}.denominator_tokens: expected a list of token strings such as [\"m\", \"M\"], "
                         f"got {short(denominators)}")
    binarize = pk.get("is_binarize", True)
    if not isinstance(binarize, bool):
        raise InputError(f"{where}.is_binarize: expected true or false, got {short(binarize)}")
    index = pk.get("log_prob_index", "batch")
    index = 0 if index == "batch" else _int(index, f"{where}.log_prob_index", 0)

    prompt_path = _prompt_file(cfg_path, f"{name}.prompt_template", conf.get("prompt_template"))
    prompt_text = read_text(prompt_path, "prompt")
    _check_placeholders(prompt_text, str(prompt_path))
    messages = split_chat(prompt_text, str(prompt_path))
    return Evaluator(name=name, config_path=cfg_path, prompt_path=prompt_path, prompt_text=prompt_text,
                     messages=messages, max_tokens=max_tokens, temperature=float(temperature), top_logprobs=top,
                     numerator=numerator, denominators=tuple(denominators), binarize=binarize,
                     logprob_index=index, randomize=randomize, config_judge=judge)


# ---------------------------------------------------------------------------- model outputs
@dataclass(frozen=True)
class Output:
    instruction: str
    output: str
    dataset: str | None
    index: int  # position in the file


@dataclass
class ModelOutputs:
    """An AlpacaEval model_outputs.json: one model's output per instruction."""

    generator: str
    path: Path
    rows: list[Output]

    def by_instruction(self) -> dict[str, Output]:
        return {r.instruction: r for r in self.rows}


def read_outputs(path: Path) -> ModelOutputs:
    """A list of {instruction, output, generator, dataset}; InputError names the file, the record's
    index and the key. `generator` names the model (the file's name when no record has one)."""
    path = Path(path)
    data = read_structured(path, "model outputs")
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of {{instruction, output, generator, dataset}}, "
                         f"got {short(data)}")
    rows: list[Output] = []
    generators: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i, rec in enumerate(data):
        where = f"{path}: record [{i}]"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object with instruction and output, got {short(rec)}")
        for key in ("instruction", "output"):
            if key not in rec:
                raise InputError(f"{where}: missing key \"{key}\" (a record needs instruction and output)")
            if not isinstance(rec[key], str):
                raise InputError(f"{where}.{key}: expected a string, got {short(rec[key])}")
        gen = rec.get("generator")
        if gen is not None:
            if not isinstance(gen, str) or not gen.strip():
                raise InputError(f"{where}.generator: expected the model's name, got {short(gen)}")
            generators.setdefault(gen, i)
        ds = rec.get("dataset")
        if ds is not None and not isinstance(ds, str):
            raise InputError(f"{where}.dataset: expected a string, got {short(ds)}")
        if rec["instruction"] in seen:
            raise InputError(f"{where}.instruction: the same instruction as record [{seen[rec['instruction']]}] "
                             f"({short(rec['instruction'])}); each instruction needs one output")
        seen[rec["instruction"]] = i
        rows.append(Output(rec["instruction"], rec["output"], ds, i))
    if len(generators) > 1:
        (a, ia), (b, ib) = list(generators.items())[:2]
        raise InputError(f"{path}: record [{ib}].generator is {b!r} but record [{ia}].generator is {a!r}; "
                         "one file holds one model's outputs")
    name = next(iter(generators), path.stem)
    return ModelOutputs(name, path, rows)


# ---------------------------------------------------------------------------- pairs and requests
@dataclass(frozen=True)
class Pair:
    """One instruction: the baseline's output (output_1) against the model's (output_2)."""

    instruction: str
    dataset: str | None
    output_1: str
    generator_1: str
    output_2: str
    generator_2: str


def pair_up(model: ModelOutputs, reference: ModelOutputs, limit: int | None = None) -> list[Pair]:
    """The pairs of the reference's instructions (its first `limit` ones) in the reference's order,
    matched by instruction text as AlpacaEval merges them; InputError lists those the model lacks."""
    chosen = reference.rows if limit is None else reference.rows[:limit]
    mine = model.by_instruction()
    missing = [r for r in chosen if r.instruction not in mine]
    if missing:
        shown = "; ".join(f"[{r.index}] {short(r.instruction, 50)}" for r in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InputError(f"{model.path}: no output for {len(missing)} instruction(s) of the reference "
                         f"{reference.path} (matched by exact instruction text): {shown}{more}")
    return [Pair(r.instruction, r.dataset if r.dataset is not None else mine[r.instruction].dataset,
                 r.output, reference.generator, mine[r.instruction].output, model.generator) for r in chosen]


def extra_instructions(model: ModelOutputs, reference: ModelOutputs) -> int:
    """How many of the model's instructions the reference lacks (AlpacaEval's inner join drops them)."""
    ref = reference.by_instruction()
    return sum(1 for r in model.rows if r.instruction not in ref)


def is_switched(instruction: str, seed: int | str = 0) -> bool:
    """Whether the pair is shown baseline-second: AlpacaEval's draw, seeded by the instruction."""
    return random.Random(SWITCH_SALT + instruction + str(seed)).random() >= 0.5


def render(evaluator: Evaluator, values: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The chat messages with {instruction}, {output_1}, {output_2} filled (one pass), each stripped."""
    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), text)

    return tuple((role, fill(content).strip()) for role, content in evaluator.messages)


def request_for(evaluator: Evaluator, pair: Pair, switched: bool, logprobs: bool = True) -> JudgeRequest:
    """The judge request of a pair: outputs in the shown order, decoding options from the config."""
    first, second = (pair.output_2, pair.output_1) if switched else (pair.output_1, pair.output_2)
    msgs = render(evaluator, {"instruction": pair.instruction, "output_1": first, "output_2": second})
    return JudgeRequest(messages=msgs, max_tokens=evaluator.max_tokens, temperature=evaluator.temperature,
                        top_logprobs=evaluator.top_logprobs if logprobs else 0)


@dataclass
class Planned:
    """A pair, the order it is shown in, and its request (None: identical outputs, a draw without a call)."""

    pair: Pair
    switched: bool
    request: JudgeRequest | None


def plan(evaluator: Evaluator, pairs: Sequence[Pair], seed: int | str = 0, logprobs: bool = True) -> list[Planned]:
    out = []
    for p in pairs:
        switched = evaluator.randomize and is_switched(p.instruction, seed)
        same = p.output_1 == p.output_2
        out.append(Planned(p, switched, None if same else request_for(evaluator, p, switched, logprobs)))
    return out


# ---------------------------------------------------------------------------- reading the reply
@dataclass(frozen=True)
class Verdict:
    """The preference in the pair's own order (1: baseline, 2: model), or why there is none."""

    preference: float | None
    method: str  # "logprobs", "token", "identical outputs" or "" (none)
    reason: str | None = None


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def read_preference(evaluator: Evaluator, completion: Completion, switched: bool) -> Verdict:
    """AlpacaEval's logprob_parser on the completion (or its generated token when it carries no
    log-probabilities), mapped back through the swap."""
    tokens = (evaluator.numerator, *evaluator.denominators)
    if completion.top_logprobs:
        if len(completion.top_logprobs) <= evaluator.logprob_index:
            return Verdict(None, "", f"no log-probabilities at generated position {evaluator.logprob_index}")
        top = completion.top_logprobs[evaluator.logprob_index]
        found = {t: lp for t, lp in top.items() if t in tokens}
        if not found:
            return Verdict(None, "", f"none of {', '.join(map(repr, dict.fromkeys(tokens)))} among the top "
                                     f"{len(top)} log-probabilities")
        num = found.get(evaluator.numerator, -math.inf)
        if evaluator.binarize:
            others = [found.get(t, -math.inf) for t in evaluator.denominators if t != evaluator.numerator]
            pref = 1.0 if all(num > o for o in others) else 2.0
        else:
            denom = _logsumexp([found.get(t, -math.inf) for t in evaluator.denominators])
            if denom == -math.inf:
                return Verdict(None, "", "no denominator token among the top log-probabilities")
            pref = 2 - math.exp(num - denom)
        method = "logprobs"
    else:
        text = completion.text.strip()
        if text == evaluator.numerator:
            pref = 1.0
        elif text in evaluator.denominators:
            pref = 2.0
        else:
            return Verdict(None, "", f"no log-probabilities, and the reply {short(completion.text)} is none of "
                                     f"{', '.join(map(repr, dict.fromkeys(tokens)))}")
        method = "token"
    return Verdict(3 - pref if switched else pref, method)


def raw_completion(completion: Completion) -> dict[str, Any]:
    """The reply in the shape of an OpenAI choice, so AlpacaEval's own parser can read it again."""
    content = [{"top_logprobs": [{"token": t, "logprob": lp} for t, lp in pos.items()]}
               for pos in completion.top_logprobs]
    if content and len(content) == 1:
        content[0] = {"token": completion.text, **content[0]}
    return {"text": completion.text, "finish_reason": completion.finish_reason,
            "logprobs": {"content": content} if content else None,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}


def annotation(evaluator: Evaluator, planned: Planned, completion: Completion | None) -> dict[str, Any]:
    """One record of annotations.json: AlpacaEval's fields, then how the preference was read."""
    p = planned.pair
    rec: dict[str, Any] = {"instruction": p.instruction, "output_1": p.output_1, "generator_1": p.generator_1,
                           "dataset": p.dataset, "output_2": p.output_2, "generator_2": p.generator_2,
                           "annotator": evaluator.name}
    if completion is None:
        rec.update(preference=1.5, raw_completion=None, is_switched_outputs=planned.switched,
                   preference_method="identical outputs")
    elif not completion.ok:
        rec.update(preference=None, raw_completion=None, is_switched_outputs=planned.switched,
                   preference_method="", error=completion.error)
    else:
        v = read_preference(evaluator, completion, planned.switched)
        rec.update(preference=v.preference, raw_completion=raw_completion(completion),
                   is_switched_outputs=planned.switched, preference_method=v.method)
        if v.reason:
            rec["invalid_reason"] = v.reason
    return rec


def judge_pairs(evaluator: Evaluator, pairs: Sequence[Pair], backend: Backend, *, seed: int | str = 0,
                logprobs: bool = True) -> list[dict[str, Any]]:
    """Annotation records of `pairs`, in their order (one judge call per pair with distinct outputs)."""
    planned = plan(evaluator, pairs, seed, logprobs)
    return annotate(evaluator, planned, backend)


def annotate(evaluator: Evaluator, planned: Sequence[Planned], backend: Backend) -> list[dict[str, Any]]:
    todo = [p.request for p in planned if p.request is not None]
    got = iter(backend.complete_many(todo))
    return [annotation(evaluator, p, next(got) if p.request is not None else None) for p in planned]


# ---------------------------------------------------------------------------- win rates and files
@dataclass
class WinRate:
    """AlpacaEval's head-to-head numbers (metrics/helpers.py), in percent; invalid records left out."""

    win_rate: float | None  # mean of (preference - 1), x100
    standard_error: float | None  # its standard error of the mean (ddof 1), x100
    discrete_win_rate: float | None  # preference rounded to win / loss, exact 1.5 a half win
    n_wins: int
    n_wins_base: int
    n_draws: int
    n_total: int
    n_invalid: int
    n_failed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"win_rate": self.win_rate, "standard_error": self.standard_error,
                "discrete_win_rate": self.discrete_win_rate, "n_wins": self.n_wins, "n_wins_base": self.n_wins_base,
                "n_draws": self.n_draws, "n_total": self.n_total, "n_invalid": self.n_invalid,
                "n_failed": self.n_failed}


def win_rate(records: Sequence[Mapping[str, Any]]) -> WinRate:
    prefs = [float(r["preference"]) for r in records if r.get("preference") is not None]
    failed = sum(1 for r in records if r.get("preference") is None and r.get("error"))
    invalid = sum(1 for r in records if r.get("preference") is None) - failed
    prefs = [1.5 if p == 0 else p for p in prefs]
    n = len(prefs)
    if not n:
        return WinRate(None, None, None, 0, 0, 0, 0, invalid, failed)
    x = [p - 1 for p in prefs]
    mean = sum(x) / n
    se = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1) / n) if n > 1 else None
    discrete = [0.5 if p == 1.5 else (1.0 if p > 1.5 else 0.0) for p in prefs]
    return WinRate(win_rate=100 * mean, standard_error=None if se is None else 100 * se,
                   discrete_win_rate=100 * sum(discrete) / n, n_wins=sum(v > 0.5 for v in x),
                   n_wins_base=sum(v < 0.5 for v in x), n_draws=sum(p == 1.5 for p in prefs), n_total=n,
                   n_invalid=invalid, n_failed=failed)


def annotations_path(out_dir: Path, model: str, annotator: str) -> Path:
    """AlpacaEval's results layout: `<out>/<model>/<annotator>/annotations.json`."""
    return Path(out_dir) / safe_name(model) / safe_name(annotator) / "annotations.json"


def judge_run_path(out_dir: Path, model: str, annotator: str) -> Path:
    """Beside annotations.json: how the annotations were made and their win rates (`judge_run.json`)."""
    return annotations_path(out_dir, model, annotator).with_name("judge_run.json")


def model_outputs_dir(root: Path) -> Path:
    """The model outputs of the models generated into the save path (`model_outputs/<model>.json`)."""
    return Path(root) / "model_outputs"


def write_annotations(out_dir: Path, model: str, evaluator: Evaluator, records: Sequence[Mapping[str, Any]],
                      info: Mapping[str, Any]) -> Path:
    """annotations.json, and beside it judge_run.json: how the annotations were made and their win rates."""
    path = annotations_path(out_dir, model, evaluator.name)
    run = {"model": model, **info, "evaluator": evaluator.signature(), "win_rate": win_rate(records).to_dict()}
    write_run_log(out_dir, [AlpacaEvalAnnotations(rows=list(records), file=path),
                            AlpacaEvalJudgeRun.from_dict(run, file=judge_run_path(out_dir, model, evaluator.name))])
    return path
