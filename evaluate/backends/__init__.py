"""Judges behind one interface (`Backend`): an OpenAI-compatible server or a local model, a
cache in front of either, and the pool a run opens them from (`JudgePool`)."""

from .base import Backend, BackendError, Completion, JudgeRequest  # noqa: F401
from .options import JudgeOptions  # noqa: F401
from .pool import JudgePool, MeteredBackend, open_backend  # noqa: F401
