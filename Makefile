# Two commands: `make run` opens the app, `make test` runs everything CI runs.
# TORCH_SPEC picks the torch build; the default is the CPU wheel. For CUDA, e.g.:
#   make run TORCH_SPEC=torch==2.13.0 TORCH_INDEX=https://download.pytorch.org/whl/cu126
PYTHON ?= python3.11
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint venv clean

$(STAMP): pyproject.toml Makefile
	@command -v $(PYTHON) >/dev/null || { echo "needs $(PYTHON); set PYTHON=python3.x"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[dev,cluster]"
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/leanseg-gui $(firstword $(wildcard assets/samples/*.png))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy core
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -q tests/core
	@# one process per GUI test file: a batch-dialog test followed by a model-load error in the same
	@# process segfaults inside Qt (open bug, see the note); each file alone passes
	for f in tests/gui/test_*.py; do QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
