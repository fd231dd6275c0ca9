# guirl: `make reproduce` runs every notebook, `make test` runs the test suite.
# Both create the virtual environment first (`make setup`) on a fresh clone.
# `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON311   ?= python3.11
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip
PROFILE     ?= tiny
KERNEL      := guirl
# per-test timeout (s); notebook smoke runs that take longer carry their own (tests/test_notebooks.py)
TEST_TIMEOUT ?= 900
# test processes (pytest-xdist, --dist loadscope: a test module runs in order on one process; the two
# notebook smoke chains, tests/test_notebooks_smoke_{a,b}.py, are collected first, so each starts at
# once on its own process); TEST_WORKERS=0 runs the suite in this process
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
_xdist       = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)
# make reproduce / make nb-NN_name: FORCE=1 reruns even up-to-date notebooks, SMOKE=1 applies the
# smoke overlay (configs/overlays/smoke.yaml), ARGS passes more runner arguments
# (e.g. ARGS="--experiment aitz" or ARGS="--override seed=1").
# SLURM=1 submits the notebooks that would run as SLURM jobs (configs/slurm/gpu.yaml);
# SLURM=NAME uses configs/slurm/NAME.yaml (or a path) instead (guirl.slurm, docs/cluster.md).
FORCE       ?=
SMOKE       ?=
SLURM       ?=
ARGS        ?=
_on          = $(filter-out 0 no false,$(1))
SLURM_FLAGS  = $(if $(call _on,$(SLURM)), --slurm$(if $(filter-out 1 yes true,$(SLURM)), --slurm-config $(SLURM)))
RUN_FLAGS    = --profile $(PROFILE)$(if $(call _on,$(FORCE)), --force)$(if $(call _on,$(SMOKE)), --smoke)$(SLURM_FLAGS)$(if $(ARGS), $(ARGS))
# `make lab` passes --allow-root when run as root (GPU-node containers usually run as root);
# LAB_ARGS adds Jupyter options, e.g. LAB_ARGS="--no-browser --ip=0.0.0.0 --port=8888".
LAB_ARGS    ?=
LAB_ROOT     = $(if $(filter 0,$(shell id -u)),--allow-root)
# The torch pin comes from the constraints file, so there is one place to change it.
TORCH_PIN   := $(shell grep -E '^torch==' requirements/constraints.txt)
SETUP_STAMP := .stamps/setup
SETUP_DEPS  := requirements/cpu.txt requirements/constraints.txt pyproject.toml

NOTEBOOKS   := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
NB_TARGETS  := $(patsubst notebooks/%.ipynb,nb-%,$(NOTEBOOKS))

.PHONY: help setup lint format test test-fast reproduce profile lab clean distclean list-notebooks setup-table bench bench-env bench-gpu tiny-model tiny-base $(NB_TARGETS)

help: ## list the targets
	@echo "usage: make TARGET [PROFILE=tiny|paper-3b|paper-7b] [FORCE=1] [SMOKE=1] [SLURM=1|NAME] [ARGS='runner arguments']"
	@echo
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'
	@echo
	@echo "one target per notebook (runs it, after its stale upstream, for PROFILE=$(PROFILE)):"
	@if [ -z "$(NB_TARGETS)" ]; then echo "  (no notebooks/NN_*.ipynb yet)"; fi
	@for t in $(NB_TARGETS); do printf "  %s\n" "$$t"; done

setup: $(SETUP_STAMP) ## create .venv (python3.11, pinned CPU stack with deepspeed and jupyterlab, editable guirl, kernel 'guirl')

# Re-runs only when a requirement file or pyproject.toml changed (or the venv is gone).
# DS_BUILD_OPS=0: deepspeed installs from source without compiling its C++/CUDA ops (none is
# needed on CPU; the few it uses are built just in time on first use and cached).
$(SETUP_STAMP): $(SETUP_DEPS)
	@command -v $(PYTHON311) >/dev/null || { echo "error: $(PYTHON311) not found; install Python 3.11 or run make PYTHON311=/path/to/python3.11" >&2; exit 1; }
	test -x $(PY) || $(PYTHON311) -m venv $(VENV)
	$(PIP) install --quiet "$(TORCH_PIN)" -c requirements/constraints.txt
	DS_BUILD_OPS=0 $(PIP) install --quiet -r requirements/cpu.txt -c requirements/constraints.txt
	$(PIP) install --quiet -e . --no-deps
	$(PY) -m ipykernel install --prefix $(VENV) --name $(KERNEL) --display-name "Python (guirl)" >/dev/null
	@mkdir -p $(dir $@) && touch $@
	@echo "setup done: $(PY) ($$($(PY) --version)), kernel '$(KERNEL)'"

lint: setup ## ruff check + ruff format --check (configured in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup ## apply ruff's fixes and formatting in place
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: lint ## lint, then run the whole test suite in TEST_WORKERS processes (default 2; per-test timeout: TEST_TIMEOUT seconds, default 900)
	$(PY) -m pytest --timeout=$(TEST_TIMEOUT) $(_xdist) $(PYTEST_ARGS)

test-fast: setup ## run the tests that are neither notebook runs nor slow
	$(PY) -m pytest --timeout=$(TEST_TIMEOUT) $(_xdist) -m "not notebook and not slow" $(PYTEST_ARGS)

reproduce: setup ## run, in order, every notebook whose source, config, library or inputs changed (FORCE=1: all; SMOKE=1; SLURM=1: as SLURM jobs); then figures/<profile>/INDEX.md
	$(PY) -m guirl.runner --all $(RUN_FLAGS)
ifeq ($(call _on,$(SLURM)),)
	$(PY) -m guirl.papers index --profile $(PROFILE)
else
	@echo "when the jobs have finished: $(PY) -m guirl.papers index --profile $(PROFILE)"
endif

# PROFILE_TOP: how many items the last table lists
PROFILE_TOP ?= 20
profile: setup ## where the time of the notebooks' last runs went: seconds per notebook and category, then the top items (runs/<profile>/*.timing.json)
	$(PY) -m guirl.breakdown --profile $(PROFILE) --top $(PROFILE_TOP)

# A notebook and, first, the stale notebooks it reads (its metadata.guirl.reads), like make itself.
$(NB_TARGETS): nb-%: notebooks/%.ipynb setup
	$(PY) -m guirl.runner $< --dag $(RUN_FLAGS)

bench: setup ## steps/s of parse + score + reward on one core (scripts/bench_kernels.py)
	taskset -c 0 $(PY) scripts/bench_kernels.py 2>/dev/null || $(PY) scripts/bench_kernels.py

# BENCH_ARGS passes more options, e.g. BENCH_ARGS="--archs 3b --repeats 5" (scripts/bench_gpu.py --help).
BENCH_ARGS  ?=
bench-gpu: setup ## one training step of the 3B and 7B architectures, full vs CASC history at 1AO/3AO: step time, tokens, memory, vision share, MFU (runs/bench-gpu/; CPU: the mid model)
	$(PY) scripts/bench_gpu.py $(BENCH_ARGS)

bench-env: setup ## seconds for 10,000 rendered MiniGUI steps
	$(PY) -m guirl.env.bench --steps 10000

tiny-model: setup ## build (or reuse) the cached random-weight tiny Qwen2.5-VL and print its folder
	$(PY) -c "from guirl.models import build_tiny_model; print(build_tiny_model())"

# Notebook 09 with pretrain.rebuild=true trains a new base from random weights (resuming an interrupted run),
# scores its probes and writes card_meta.json; the install step then replaces lib/guirl/assets/tiny_base/.
tiny-base: setup ## rebuild the shipped pretrained tiny model (notebook 09 with pretrain.rebuild=true, then install it with its card)
	$(PY) -m guirl.runner notebooks/09_tiny_pretraining.ipynb --profile tiny --override pretrain.rebuild=true $(ARGS)
	$(PY) -m guirl.models.tiny_base install "$$($(PY) -c 'from guirl.paths import runs_dir; print(runs_dir("tiny") / "09_tiny_pretraining" / "pretrain")')"

setup-table: setup ## regenerate docs/fidelity/training-setup.md: each paper's training-setup values beside the paper profiles' resolved values
	$(PY) -m guirl.setups --write

list-notebooks: ## print the notebooks that `make reproduce` runs, in order
	@for nb in $(NOTEBOOKS); do echo $$nb; done

lab: setup ## open JupyterLab on the project kernel (offline; installed by setup; --allow-root as root)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ROOT) $(LAB_ARGS)

clean: ## delete runs/, figures/<profile>/ and caches (keeps .venv and data/)
	rm -rf runs .cache .pytest_cache .hypothesis
	find figures -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} + 2>/dev/null || true
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} + 2>/dev/null || true

distclean: clean ## clean, and also delete .venv and the setup stamp
	rm -rf $(VENV) .stamps lib/*.egg-info
