"""The T5 scorer: a local UniEval checkpoint answering Boolean questions.

The score of one question is P(Yes) / (P(Yes) + P(No)) at the first decoder step (the decoder
sees only its start token), the tokens being the first pieces of "Yes" and "No" as the
checkpoint's tokenizer writes them. Checkpoints are never downloaded: a path that does not
hold one fails with what to download and which config key to set.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

from evaluate.core.errors import InputError
from evaluate.models.device import resolve_device

from .dimensions import CHECKPOINTS, DIMENSIONS, get_dimension
from .questions import build_inputs
from .scoring import combine
from .sentences import SPLITTER_VERSION

log = logging.getLogger(__name__)

CONFIG_KEY = "path_for_UniEval"
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "spiece.model")
_DTYPES = ("float32", "bfloat16", "float16")


def download_hint(task: str | None) -> str:
    """What to download for `task` (all tasks when None) and where to point the config."""
    if task in CHECKPOINTS:
        repo = CHECKPOINTS[task]
        return (f"download {repo} from the Hugging Face hub (e.g. `huggingface-cli download {repo} "
                f"--local-dir unieval-{repo.split('-')[-1]}` on a machine with internet access) and set "
                f"`{CONFIG_KEY}.{task}` in the config to that folder; nothing is downloaded automatically")
    pairs = ", ".join(f"{t}: {r}" for t, r in CHECKPOINTS.items())
    return (f"download the UniEval checkpoint for the task from the Hugging Face hub ({pairs}) and set "
            f"`{CONFIG_KEY}.<task>` in the config to that folder; nothing is downloaded automatically")


def check_checkpoint(path: str | Path | None, task: str | None = None) -> Path:
    """The folder, if it looks like a T5 checkpoint with a tokenizer; InputError saying what is wrong."""

    def fail(problem: str) -> InputError:
        return InputError(f"UniEval checkpoint {str(path)!r}: {problem}; {download_hint(task)}")

    if path is None or not str(path).strip():
        raise InputError(f"UniEval: no checkpoint path given; {download_hint(task)}")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise fail("not a folder" if folder.exists() else "no such folder")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise fail("no config.json in the folder (not a Hugging Face model folder)")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise fail(f"config.json is not readable JSON ({exc})") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "t5":
        raise fail(f'config.json says model_type "{model_type}", but UniEval checkpoints are T5 models')
    if not any((folder / f).is_file() for f in _WEIGHT_FILES):
        raise fail(f"no weights in the folder (expected one of {', '.join(_WEIGHT_FILES)})")
    if not any((folder / f).is_file() for f in _TOKENIZER_FILES):
        raise fail(f"no tokenizer in the folder (expected {' or '.join(_TOKENIZER_FILES)})")
    return folder


class UniEvaluator:
    """One loaded UniEval checkpoint; scores any task/dimension it was trained for.

    One checkpoint serves several tasks (the release scores data2text with unieval-sum), so the
    task is an argument of `score`, not of the evaluator. `task` here only tailors the
    download hint of a path error.
    """

    def __init__(self, path: str | Path, device: str = "cpu", max_length: int = 1024, batch_size: int = 8,
                 *, dtype: str = "float32", task: str | None = None):
        import torch
        from transformers import AutoTokenizer, T5ForConditionalGeneration

        if int(max_length) < 2:
            raise InputError(f"UniEval max_length must be at least 2, got {max_length}")
        if int(batch_size) < 1:
            raise InputError(f"UniEval batch_size must be at least 1, got {batch_size}")
        if dtype not in _DTYPES:
            raise InputError(f'UniEval dtype "{dtype}" is not one of {", ".join(_DTYPES)}')
        self.device = torch.device(resolve_device(device, "UniEval device"))  # auto, cpu, cuda, cuda:N, mps
        self.path = check_checkpoint(path, task)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.dtype = dtype

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        except Exception as exc:  # the library raises OSError, ValueError, ImportError...
            raise InputError(f"UniEval checkpoint {str(self.path)!r}: the tokenizer does not load "
                             f"({type(exc).__name__}: {exc}); {download_hint(task)}") from None
        try:
            self.model = T5ForConditionalGeneration.from_pretrained(
                str(self.path), local_files_only=True, dtype=getattr(torch, dtype))
        except Exception as exc:
            raise InputError(f"UniEval checkpoint {str(self.path)!r}: the T5 model does not load "
                             f"({type(exc).__name__}: {exc}); {download_hint(task)}") from None
        self.model.eval().to(self.device)

        self.yes_id = self._first_id("Yes", task)
        self.no_id = self._first_id("No", task)
        if self.yes_id == self.no_id:
            raise InputError(f"UniEval checkpoint {str(self.path)!r}: its tokenizer gives \"Yes\" and \"No\" the "
                             f"same first token; {download_hint(task)}")
        if self.tokenizer.pad_token_id is None:
            raise InputError(f"UniEval checkpoint {str(self.path)!r}: its tokenizer has no padding token; "
                             f"{download_hint(task)}")
        self.truncated_inputs = 0  # questions cut to max_length tokens so far

    def _first_id(self, word: str, task: str | None) -> int:
        # The release reads the first token of tokenizer(word), special tokens included.
        ids = self.tokenizer(word)["input_ids"]
        unk = self.tokenizer.unk_token_id
        if not ids or (unk is not None and ids[0] == unk) or ids[0] >= self.model.config.vocab_size:
            raise InputError(f"UniEval checkpoint {str(self.path)!r}: its tokenizer has no token for "
                             f'"{word}" (not a UniEval tokenizer); {download_hint(task)}')
        return int(ids[0])

    @classmethod
    def for_task(cls, task: str, path_for_unieval: Mapping[str, str], **options: Any) -> "UniEvaluator":
        """Load the checkpoint a config's `path_for_UniEval` mapping names for `task`."""
        task = str(task).lower()
        if task not in DIMENSIONS:
            get_dimension(task, "")  # raises the unknown-task error
        path = path_for_unieval.get(task) if isinstance(path_for_unieval, Mapping) else None
        if path is None:
            raise InputError(f"config key `{CONFIG_KEY}.{task}` is missing; {download_hint(task)}")
        return cls(path, task=task, **options)

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """The Boolean probability for each ready-made question text, in order.

        Texts are batched longest first so that batches pad little; results do not depend on
        the batching beyond float rounding.
        """
        import torch

        if not texts:
            return []
        enc = self.tokenizer(list(texts), max_length=self.max_length, truncation=True)
        ids: list[list[int]] = enc["input_ids"]
        encodings = getattr(enc, "encodings", None) or []
        cut = sum(1 for e in encodings if e.overflowing)
        if cut:
            self.truncated_inputs += cut
            log.warning("UniEval: %d of %d questions were longer than %d tokens and were cut at the end",
                        cut, len(texts), self.max_length)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        pad = self.tokenizer.pad_token_id
        start = self.model.config.decoder_start_token_id
        scores = [0.0] * len(ids)
        with torch.inference_mode():
            for b in range(0, len(order), self.batch_size):
                batch = order[b:b + self.batch_size]
                width = max(len(ids[i]) for i in batch)
                input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, :len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[row, :len(ids[i])] = 1
                decoder_ids = torch.full((len(batch), 1), start, dtype=torch.long)
                logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                    decoder_input_ids=decoder_ids.to(self.device)).logits[:, 0, :].float()
                probs = torch.sigmoid(logits[:, self.yes_id] - logits[:, self.no_id])
                for row, i in enumerate(batch):
                    scores[i] = float(probs[row])
        return scores

    def score(self, task: str, dimension: str, outputs: Sequence[str], sources: Sequence[str] | None = None,
              references: Sequence[str] | None = None, contexts: Sequence[str] | None = None) -> list[float]:
        """One UniEval score per output for `task`-`dimension`.

        `sources`: the source document (summarization, fact) or the dialogue history (dialogue);
        `references`: one reference text per output; `contexts`: the fact (dialogue).
        Inputs the dimension needs are checked before the model runs.
        """
        spec = get_dimension(task, dimension)
        inputs = build_inputs(spec.task, spec.name, outputs, sources, references, contexts)
        unit_scores = self.score_texts([text for text, _ in inputs])
        return combine(spec.task, spec.name, unit_scores, [i for _, i in inputs], len(outputs))

    def signature(self) -> dict[str, Any]:
        """How the scores were made, to tell whether two runs are comparable."""
        import torch
        import transformers

        config_bytes = (self.path / "config.json").read_bytes()
        return {
            "evaluator": "UniEval",
            "checkpoint": str(self.path),
            "config_sha256": hashlib.sha256(config_bytes).hexdigest()[:16],
            "vocab_size": int(self.model.config.vocab_size),
            "yes_token": self.tokenizer.convert_ids_to_tokens(self.yes_id),
            "no_token": self.tokenizer.convert_ids_to_tokens(self.no_id),
            "max_length": self.max_length,
            "dtype": self.dtype,
            "sentence_splitter": SPLITTER_VERSION,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            **({"device": self.device.type} if self.device.type != "cpu" else {}),  # a CPU signature stays as it was
        }
