# Two entry points for a fresh clone: `make demo` and `make test`. Each builds .venv by itself.
# torch is installed first and pinned, so that pip never resolves a different (multi-GB CUDA) build here;
# on a GPU machine set TORCH_SPEC=torch to take the CUDA build from PyPI. The editable install is setuptools'
# "compat" mode (a .pth naming this folder), which type checkers follow: mypy on a script of yours sees the package,
# its py.typed and its option types; the default mode's import hook is invisible to them.
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint generate bench-encode bench-collections clean

# Two install levels, each a stamp file: the demo needs only the package and the default model (a light .venv);
# the tests and tools need the dev set (peers, integrations, test suites, linters) on top.
$(VENV)/.base: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[default-model]" --config-settings editable_mode=compat
	touch $@

$(VENV)/.dev: $(VENV)/.base
	$(BIN)/python -m pip install --quiet -e ".[dev]" --config-settings editable_mode=compat
	touch $@

install: $(VENV)/.dev

demo: $(VENV)/.base
	$(BIN)/sbert-qdrant demo

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check sbert_qdrant tests benchmarks examples tools
	$(BIN)/ruff format --check sbert_qdrant tests benchmarks examples tools
	$(BIN)/mypy sbert_qdrant
	$(BIN)/python tools/unasync.py --check

# The sync collection and client store are generated from their async sources: edit those, then run this.
generate: install
	$(BIN)/python tools/unasync.py

bench-encode: install
	$(BIN)/python benchmarks/encode.py --data ../shared/data

bench-collections: install
	$(BIN)/python benchmarks/collection_speed.py --data ../shared/data

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
