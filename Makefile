# crossover — developer entry points. `make test` and `make demo` work on a fresh
# machine with only Python, pip, gcc and cmake.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CACHE ?= $(HOME)/.cache/crossover

.PHONY: test demo venv lint typecheck unit browser-deps engines models clean

$(BIN)/crossover: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/crossover

# Debian's chromium for the report's browser test (skipped quietly if apt is absent;
# the browser test then fails loudly rather than skipping).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || true)

# Real engines + real model, cached under $(CACHE) keyed by source version: llama-server,
# and tritonserver (the pinned nvidia-pytriton wheel) with libllama.so for its llama.cpp
# model (a second, shared-library build of the same source: docs/triton.md).
engines: venv
	$(BIN)/crossover engines install llamacpp
	$(BIN)/crossover engines install triton

models: venv
	$(BIN)/crossover models fetch gemma3-270m

# every folder of Python (tests/test_makefile.py); scripts/h200/sglang-stage/walk.py is a
# throwaway kept as it ran on the H200, not held to the style
LINT_PATHS := src tests bench scripts --extend-exclude scripts/h200/sglang-stage/walk.py

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q

test:
	rm -rf $(VENV)
	$(MAKE) venv browser-deps engines models
	$(MAKE) lint typecheck unit

demo: venv engines models
	$(BIN)/crossover demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
