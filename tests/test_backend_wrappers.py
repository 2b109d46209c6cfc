"""The backends in front of a judge (cache, meter, batch jobs, probe, the export's recorder) share one
delegating base, `WrappingBackend`: the judge's identity, capabilities, usage and closing come from
the judge behind them, through every layer, without each wrapper forwarding them by hand."""

from __future__ import annotations

from evaluate.backends.base import Backend, Completion, JudgeRequest, WrappingBackend
from evaluate.backends.batch import BatchBackend
from evaluate.backends.cache import CachedBackend
from evaluate.backends.pool import MeteredBackend
from evaluate.backends.probing import ProbeFirst
from evaluate.pipeline.collect import _Recorder

WRAPPERS = (BatchBackend, CachedBackend, MeteredBackend, ProbeFirst, _Recorder)


class _Judge(Backend):
    """A judge that answers "7" with logprobs and counts its closing."""

    kind = "scripted"

    def __init__(self) -> None:
        super().__init__("judge-7")
        self.closed = 0

    @property
    def supports_logprobs(self) -> bool:
        return True

    def signature(self):
        return {"backend": self.kind, "model": self.model, "temperature": 0.0}

    def usage(self):
        return {"requests": 3}

    def complete(self, request: JudgeRequest) -> Completion:
        return Completion(text="7", prompt_tokens=5, completion_tokens=1)

    def close(self) -> None:
        self.closed += 1


def test_every_wrapper_delegates_through_the_one_base():
    for cls in WRAPPERS:
        assert issubclass(cls, WrappingBackend), cls
        for name in ("supports_logprobs", "signature"):
            assert name not in vars(cls), f"{cls.__name__} forwards {name} by hand again"


def test_identity_usage_and_close_pass_through_every_layer(tmp_path):
    judge = _Judge()
    metered = MeteredBackend(judge)
    cached = CachedBackend(metered, tmp_path / "cache.sqlite")
    for b in (metered, cached):
        assert b.model == "judge-7" and b.kind == "scripted" and b.supports_logprobs
        assert b.signature() == judge.signature()
    req = JudgeRequest(messages=[{"role": "user", "content": "rate"}], max_tokens=2)
    assert cached.complete(req).text == "7" and cached.complete(req).cached
    usage = cached.usage()
    assert usage["cache_hits"] == 1 and usage["cache_misses"] == 1 and usage["requests"] == 1  # the meter's count
    cached.close()
    assert judge.closed == 1
