PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench coverage clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks

test: lint
	$(PY) -m pytest -q -p no:cacheprovider

coverage: $(STAMP)
	$(PY) -m vmapx coverage

$(VENV)/.bench-installed: $(STAMP)
	$(PY) -m pip install -q torch==2.13.0 jax matplotlib
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/run.py
	$(PY) benchmarks/mlp_grads.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
