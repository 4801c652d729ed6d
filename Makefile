# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both create .venv when it is missing. Snakemake profiles are named by their path
# (--profile workflow/profiles/local): nothing is installed outside the checkout.

VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.supergcn-installed
BIN := $(VENV)/bin
# What the venv was installed with (TORCH_INDEX and EXTRAS, remembered as defaults, and
# INSTALLED), written by the install: later commands reinstall with the same settings, and
# a value given on the command line that differs from them reinstalls.
SETTINGS := $(VENV)/.supergcn-settings.mk
-include $(SETTINGS)
# torch first, so that no dependency pulls in another build. Which build pip's index
# serves differs: on Linux x86-64, PyPI's torch is the CUDA build (several GB of NVIDIA
# libraries); TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" takes the
# CPU build from PyTorch's own index.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
# The project's extras; `mpich` is the MPI wheel that provides mpiexec. Where the site's
# MPI was installed by hand (docs/getting-started.md), leave it out: EXTRAS=test,docs,cluster.
EXTRAS ?= test,docs,mpich,cluster
CORES ?= all
# When this make began (parsed before any prerequisite is built): `make run` prints how long
# it took, the venv's creation included.
STARTED := $(shell date +%s)

.PHONY: venv run test lint docs clean

venv: $(STAMP)

ifneq ($(strip $(TORCH) $(TORCH_INDEX) $(EXTRAS)),$(strip $(INSTALLED)))
$(STAMP): FORCE
endif
FORCE:

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	printf 'TORCH_INDEX ?= %s\nEXTRAS ?= %s\nINSTALLED := %s\n' '$(TORCH_INDEX)' '$(EXTRAS)' \
		'$(strip $(TORCH) $(TORCH_INDEX) $(EXTRAS))' > $(SETTINGS)
	touch $@

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --profile workflow/profiles/local --cores $(CORES)
	@echo
	@cat results/tables/scaling.md
	@echo
	@echo "Tables (CSV, Markdown, LaTeX): $(CURDIR)/results/tables"
	@echo "Figures (PNG, PDF):            $(CURDIR)/results/figures"
	@took=$$(( $$(date +%s) - $(STARTED) )); echo "make run took $$((took / 60)) min $$((took % 60)) s ($$(nproc) cores)"

# The suite in TEST_WORKERS processes (pytest-xdist), a test file to each at a time: a
# file's module fixtures (a finished study, a Slurm cluster) are built once. Much of the
# suite waits on MPI jobs, Snakemake and schedulers, so two workers fill two cores.
# --durations=30 lists the slowest tests, so a run's log shows where the time goes; the
# files run longest first (tests/conftest.py's LONGEST_FILES, not xdist's most tests first).
TEST_WORKERS ?= 2
test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder --durations=30

# The documentation site (docs/): HTML in docs/_build/html, built afresh (-E) with warnings
# as errors, as tests/test_docs.py builds it.
docs: $(STAMP)
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
	@echo "Open $(CURDIR)/docs/_build/html/index.html"

lint: $(STAMP)
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf data logs .snakemake docs/_build docs/_autosummary
	find results -mindepth 1 ! -name README.md -delete
