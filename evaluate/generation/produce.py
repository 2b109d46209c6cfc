"""From a question file and a model config to an answer file (what `eval.py generate`, a run's
`answers: [{generate: ...}]` entry and the benchmark commands' `--generate` all call).

Beside the answer file, `<file>.generation.json` records the generation's signature (the endpoint's
model id, the parameters, the template), the counts and cost, and which ids are missing and why.
A missing answer is never written as text: the answer file holds only the questions answered in
full, and the caller stops with exit 3 (`Report.code`).
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..backends.base import cost_usd
from ..backends.registry import capabilities
from ..savepath.layout import answers_manifest_file, generate_cache_file
from ..savepath.manifest import iso, model_entry, new_manifest
from ..savepath.log import write_run_log
from ..savepath.records import GeneratedAnswers, GenerationManifest
from ..savepath.write import server_logs
from ..core.io import check_output_file
from ..core.secrets import scrub_url
from .engine import TEMPLATE, Answers, Estimate, answer_all, estimate
from .formats import QuestionFile, answer_rows, question_format, serialise

EXIT_OK, EXIT_FAILED = 0, 3
CACHE_FILE = "generate_cache.sqlite"


def sidecar_path(out: Path) -> Path:
    return answers_manifest_file(out)


def cache_path(opts: Any, out: Path) -> Path | None:
    """`cache: true` (default): generate_cache.sqlite beside the answer file; a path (a folder/ gets the
    file inside it); false: none."""
    if opts.cache is False:
        return None
    if isinstance(opts.cache, str):
        p = Path(opts.cache).expanduser()
        return p / CACHE_FILE if p.is_dir() or opts.cache.endswith("/") else p
    return generate_cache_file(out)


def write_answer_file(path: Path, text: str) -> None:
    """The one place a generated answer file is written (atomically: a killed run never leaves half a file)."""
    write_run_log(Path(path).parent, [GeneratedAnswers(text=text, name=Path(path).name)])


@dataclass
class Report:
    kind: str
    name: str
    out: Path
    questions: int
    answers: Answers | None = None
    estimate: Estimate | None = None
    unreachable: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    signature: dict[str, Any] = field(default_factory=dict)
    price: dict[str, float] | None = None

    @property
    def missing(self) -> dict[str, str]:
        return self.answers.missing if self.answers else {}

    @property
    def code(self) -> int:
        return EXIT_FAILED if self.unreachable or self.missing else EXIT_OK

    def why(self) -> str:
        if self.unreachable:
            return f"the model's server is unreachable: {self.unreachable}"
        if self.missing:
            first = next(iter(self.missing.items()))
            return (f"{len(self.missing)} of {self.questions} answers missing ({first[0]}: {first[1]}); "
                    f"see {sidecar_path(self.out)}; run again to ask only for those")
        return ""

    def lines(self) -> list[str]:
        if self.estimate is not None:
            e = self.estimate
            out = [f"generate {self.name} ({self.kind}, {self.questions} questions): {e.requests} requests, "
                   f"{e.cached} answered by the cache, {e.to_send} to send (at most {e.prompt_tokens:,} prompt "
                   f"tokens at 4 characters a token, {e.completion_tokens:,} completion tokens at max_tokens)"]
            if self.price:
                out.append(f"generate {self.name}: cost at most about "
                           f"${cost_usd(e.prompt_tokens, e.completion_tokens, self.price):.2f}")
            return out
        a = self.answers
        got = len(a.answers) if a else 0
        line = (f"generate {self.name} ({self.kind}): {got} of {self.questions} questions answered -> {self.out}; "
                f"{a.requests if a else 0} requests ({a.cached if a else 0} from the cache)")
        u = self.usage
        if u.get("prompt_tokens") or u.get("completion_tokens"):
            line += f"; {u.get('prompt_tokens', 0):,} prompt + {u.get('completion_tokens', 0):,} completion tokens"
        if u.get("cost_usd") is not None:
            line += f", ${u['cost_usd']:.4f}"
        return [line]


def parameters(opts: Any, kind: str) -> dict[str, Any]:
    """The decoding parameters of the signature (the temperature rule as applied)."""
    temp: Any = opts.temperature
    if temp is None:
        temp = question_format(kind).temperature_rule
    return {"temperature": temp, "top_p": opts.top_p, "max_tokens": opts.max_tokens, "seed": opts.seed,
            "stop": list(opts.stop or []), "system": opts.system}


def signature(opts: Any, backend_sig: dict[str, Any], qf: QuestionFile) -> dict[str, Any]:
    base = backend_sig.get("base_url")
    sig = {**backend_sig, "model": opts.model, "parameters": parameters(opts, qf.kind), "template": TEMPLATE,
           "questions": {"file": str(qf.path), "kind": qf.kind, "sha256": _sha256(qf.path)}}
    if base is not None:
        sig["base_url"] = [scrub_url(u) for u in base] if isinstance(base, list) else scrub_url(str(base))
    return sig


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def in_flight(opts: Any) -> int:
    """Requests an HTTP model's pool keeps in flight (0: a model in this process or batch jobs, asked in rounds)."""
    if not capabilities(opts).http or opts.batch:
        return 0
    jopts = opts.judge_options()
    specs = jopts.endpoint_specs() or [{"concurrency": jopts.concurrency}]
    return sum(int(e["concurrency"]) for e in specs)


def limited(qf: QuestionFile, limit: int | None) -> QuestionFile:
    return qf if not limit else QuestionFile(qf.path, qf.kind, qf.questions[:limit], qf.jsonl)


def generate_answers(qf: QuestionFile, opts: Any, out: Path, *, name: str, dry_run: bool = False,
                     api_key: str | None = None, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                     save_path: Path | None = None) -> Report:
    """Answer every question of `qf` with the model `opts` describes into `out` (the kind's format).
    Answers already in the cache cost nothing; with `dry_run` nothing is sent or written. A server the
    model needs (backend: vllm) logs into `save_path`'s logs/ (default: the answer file's folder)."""
    from ..backends.pool import MeteredBackend, open_backend
    from ..backends.probing import ProbingPool

    # every file it writes, checked before the first request (issue 47: a folder given as --out was refused
    # only when the paid answers were moved into place)
    check_output_file(out, "answer file")
    check_output_file(sidecar_path(out), "the answer file's sidecar")
    jopts = opts.judge_options()
    cache = cache_path(opts, out)
    if cache is not None:
        check_output_file(cache, "generation cache")
    report = Report(qf.kind, name, out, len(qf.questions), price=opts.price)
    if dry_run:
        bare = open_backend(jopts, None, api_key)  # its signature only: nothing is loaded or sent
        try:
            report.estimate = estimate(qf, opts, bare.signature(), cache)
        finally:
            bare.close()
        return report
    pool = ProbingPool(api_key=api_key, log=log, server_log=server_logs(save_path or out.parent))
    begun = iso()
    try:
        backend = MeteredBackend(pool.backend(jopts, cache), opts.price)
        report.signature = signature(opts, backend.signature(), qf)

        def save(result: Answers) -> None:
            done = {k: v for k, v in result.answers.items() if k not in result.missing}
            write_answer_file(out, serialise(qf.kind, answer_rows(qf, done, name, opts.system), out))

        started = time.monotonic()
        report.answers = answer_all(qf, opts, backend, name=name, unreachable=pool.unreachable, on_round=save,
                                    in_flight=in_flight(opts))
        seconds = round(time.monotonic() - started, 3)
        report.unreachable = pool.unreachable()
        report.usage = backend.usage()
    finally:
        pool.close()
    save(report.answers)
    usage = dict(report.usage)
    if opts.price and usage.get("cost_usd") is None:
        usage["cost_usd"] = round(cost_usd(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                           opts.price), 6)
    write_run_log(Path(out).parent, [GenerationManifest.from_dict(generation_manifest(report, qf, jopts, begun,
                                                                                       seconds, usage))])
    return report


def generation_manifest(report: Report, qf: QuestionFile, jopts: Any, started: str, seconds: float,
                        usage: dict[str, Any]) -> dict[str, Any]:
    """The generation's manifest beside its answer file: the keys of every manifest (evaluate.savepath.
    manifest), then what only a generation knows: its signature, counts and the ids missing with why."""
    from ..pipeline.config import scrubbed_judge

    a = report.answers
    errors = ([{"model": report.name, "error": f"the model's server is unreachable: {report.unreachable}"}]
              if report.unreachable else [])
    errors += [{"model": report.name, "id": k, "error": v} for k, v in a.missing.items()]
    return new_manifest(
        status="failed" if report.unreachable else "finished with errors" if a.missing else "ok",
        tag="generate", config={"questions": str(qf.path), "model": scrubbed_judge(jopts)}, started=started,
        finished=iso(), models=[model_entry(report.name, report.out, len(a.answers))],
        errors=errors, usage=usage,
        name=report.name, answers=str(report.out), signature=report.signature,
        counts={"questions": len(qf.questions), "answered": len(a.answers), "missing": len(a.missing),
                "requests": a.requests, "cached": a.cached, "seconds": seconds},
        unreachable=report.unreachable, missing=[{"id": k, "why": v} for k, v in a.missing.items()])
