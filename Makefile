# `make run` installs what the app needs and opens it; `make test` adds the test tools (dev extra, and
# Ray for the cluster tests) and runs everything CI runs.
# TORCH_SPEC / TORCH_INDEX pick the torch build. The default is whatever pip finds for torch==2.13.0: the CPU
# wheel where pip has one locally, but plain PyPI's Linux wheel is the CUDA build, so on a fresh Linux machine
# name TORCH_INDEX=https://download.pytorch.org/whl/cpu. To change the build of an existing .venv (e.g. to
# CUDA), one command reinstalls torch:
#   make torch TORCH_INDEX=https://download.pytorch.org/whl/cu126
PYTHON ?= python3.11
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
VENV ?= .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
TEST_STAMP := $(VENV)/.installed-test
PIP_TORCH = $(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))

.PHONY: run test lint venv torch clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON); set PYTHON=python3.x"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(PIP_TORCH)

$(APP_STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(TEST_STAMP): $(APP_STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,cluster]"
	touch $@

venv: $(APP_STAMP)

# Replace torch in an existing .venv by the build TORCH_SPEC/TORCH_INDEX name (CPU <-> CUDA): the old
# build is removed first, so pip cannot call it "already satisfied" (2.13.0+cpu satisfies torch==2.13.0).
torch: | $(BIN)/python
	$(BIN)/python -m pip uninstall -q -y torch
	$(PIP_TORCH)
	$(BIN)/python -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda or 'none', \
		'available' if torch.cuda.is_available() else 'not available')"

run: $(APP_STAMP)
	$(BIN)/leanseg-gui $(firstword $(wildcard assets/samples/*.png))

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy core gui
	$(BIN)/lint-imports

# The core tests run on two workers (pytest-xdist), a whole file to a worker so its module fixtures are built once:
# most of their time is subprocesses starting torch, one core each. The GUI tests are short and run in one process.
test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests/core
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q tests/gui

clean:
	rm -rf $(VENV) build *.egg-info
