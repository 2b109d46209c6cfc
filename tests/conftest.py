import os
import signal
import sys
import types

# torch's OpenMP threads spin-wait by default; on a shared 2-core machine that made forward passes
# 5-8x slower. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("EVAL_NO_PROGRESS", "1")

REPO = Path(__file__).resolve().parents[1]

# `tests` is this folder, whatever else is installed: a package that puts a top-level `tests` package into
# site-packages (ppi-python's wheel does; `make setup` removes it) would shadow this folder, a namespace package,
# and `from tests.fake_openai_server import ...` would fail.
if [str(p) for p in getattr(sys.modules.get("tests"), "__path__", [])] != [str(REPO / "tests")]:
    _pkg = types.ModuleType("tests")
    _pkg.__path__ = [str(REPO / "tests")]
    sys.modules["tests"] = _pkg

# The ctrl-c tests send SIGINT to the tool they start. A test run started in the background of a
# non-interactive shell (`bash .ci/run &`, `nohup ... &`) has SIGINT ignored, its children inherit that, and
# Python installs no KeyboardInterrupt where SIGINT is ignored at startup: four such tests failed so. A Python
# handler here is reset to the default in every child the tests start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SHARED = (REPO / ".." / "shared").resolve()
COLOSSAL = SHARED / "data" / "colossalai" / "Chat" / "evaluate"


@pytest.fixture
def shared() -> Path:
    """../shared beside the checkout; tests that need it skip cleanly where it is absent."""
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared/data is not present beside this checkout")
    return SHARED


@pytest.fixture
def colossal(shared) -> Path:
    return COLOSSAL
