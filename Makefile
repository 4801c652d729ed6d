# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both create .venv when it is missing.

VENV ?= .venv
PYTHON ?= python3
# A CPU build of torch, installed before anything else so that no dependency pulls in a
# multi-GB CUDA build. Off this machine, add e.g.
#   TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu"
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
CORES ?= all
STAMP := $(VENV)/.supergcn-installed
BIN := $(VENV)/bin

.PHONY: venv run test lint docs profiles clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[test,docs,mpich,cluster]'
	touch $@

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --profile workflow/profiles/local --cores $(CORES)
	@echo
	@cat results/tables/scaling.md
	@echo
	@echo "Tables (CSV, Markdown, LaTeX): $(CURDIR)/results/tables"
	@echo "Figures (PNG, PDF):            $(CURDIR)/results/figures"

# The suite in TEST_WORKERS processes (pytest-xdist), a test file to each at a time: a
# file's module fixtures (a finished study, a Slurm cluster) are built once. Much of the
# suite waits on MPI jobs, Snakemake and schedulers, so two workers fill two cores.
TEST_WORKERS ?= 2
test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The documentation site (docs/): HTML in docs/_build/html, built afresh (-E) with warnings
# as errors, as tests/test_docs.py builds it.
docs: $(STAMP)
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
	@echo "Open $(CURDIR)/docs/_build/html/index.html"

lint: $(STAMP)
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

# Makes `snakemake --profile fugaku|slurm|local` resolve from this directory: Snakemake 9
# looks up profile names in $$XDG_CONFIG_HOME/snakemake (default ~/.config/snakemake).
PROFILE_HOME := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
profiles:
	mkdir -p "$(PROFILE_HOME)"
	for dir in $(CURDIR)/workflow/profiles/*/; do ln -sfn "$${dir%/}" "$(PROFILE_HOME)/$$(basename "$$dir")"; done
	@echo "installed profiles $(notdir $(wildcard workflow/profiles/*)) in $(PROFILE_HOME)"

clean:
	rm -rf data logs .snakemake docs/_build docs/_autosummary
	find results -mindepth 1 ! -name README.md -delete
