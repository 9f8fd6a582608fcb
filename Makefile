PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-numpy1 test-python test-dask test-cupy lint typecheck bench bench-gpu coverage clean fuzz docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks docs/hooks.py
	$(VENV)/bin/ruff format --check src tests examples benchmarks docs/hooks.py
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q -p no:cacheprovider

# vmap of Dask arrays (on a local cluster too) and vectorize through Dask: the extra vmapx[dask]
$(VENV)/.dask-installed: $(STAMP)
	$(PY) -m pip install -q -e '.[test,dask]'
	touch $@

test-dask: $(VENV)/.dask-installed
	$(PY) -m pytest -q -p no:cacheprovider tests/test_dask.py tests/test_vectorize.py tests/test_parallel.py tests/test_readme.py

# the documentation site (the extra vmapx[docs]): every example of docs/*.md runs (with
# Dask and scikit-learn installed), then mkdocs builds site/ with warnings as errors
$(VENV)/.docs-installed: $(STAMP)
	$(PY) -m pip install -q -e '.[docs]'
	touch $@

docs: $(VENV)/.docs-installed
	$(PY) -m pytest -q -p no:cacheprovider tests/test_docs.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# the op table on CuPy arrays and the GPU benchmark: the extra vmapx[cupy], on a machine
# with an NVIDIA GPU (CUDA 12); without one the CuPy tests skip
$(VENV)/.cupy-installed: $(STAMP)
	$(PY) -m pip install -q -e '.[test,cupy]'
	touch $@

test-cupy: $(VENV)/.cupy-installed
	$(PY) -m pytest -q -p no:cacheprovider tests/test_cupy.py tests/test_duck.py

bench-gpu: $(VENV)/.cupy-installed
	$(PY) benchmarks/gpu.py

# mypy --strict (pinned in the `lint` extra; settings in pyproject.toml) on a user's script
# that uses every public name, and on the package
typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict tests/typing/user_script.py
	$(VENV)/bin/mypy --strict --follow-imports=silent src/vmapx

# the suite on another Python: make test-python PYTHON_OTHER=python3.13 (its own venv)
PYTHON_OTHER ?= python3.13
VENV_OTHER := .venv-$(notdir $(PYTHON_OTHER))
$(VENV_OTHER)/.installed: pyproject.toml
	$(PYTHON_OTHER) -m venv $(VENV_OTHER)
	$(VENV_OTHER)/bin/python -m pip install -q --upgrade pip
	$(VENV_OTHER)/bin/python -m pip install -q -e '.[test]' 'numpy>=2.4,<2.5'
	touch $@

test-python: $(VENV_OTHER)/.installed
	$(VENV_OTHER)/bin/python -m pytest -q -p no:cacheprovider

# the suite on NumPy 1.26 (the oldest NumPy vmapx supports); tests of NumPy 2 features skip
VENV_NP1 := .venv-np1
$(VENV_NP1)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_NP1)
	$(VENV_NP1)/bin/python -m pip install -q --upgrade pip
	$(VENV_NP1)/bin/python -m pip install -q -e . 'numpy>=1.26,<2' 'pytest>=8' 'hypothesis>=6' 'scipy>=1.11'
	touch $@

test-numpy1: $(VENV_NP1)/.installed
	$(VENV_NP1)/bin/python -m pytest -q -p no:cacheprovider

# the differential fuzzer's long run: VMAPX_FUZZ_SECONDS (default 60), VMAPX_FUZZ_SEED
# (default random; printed, with a reproducer for each failure)
fuzz: $(STAMP)
	cd tests && ../$(PY) -m fuzzing

coverage: $(STAMP)
	$(PY) -m vmapx coverage

$(VENV)/.bench-installed: $(STAMP)
	$(PY) -m pip install -q torch==2.13.0 jax matplotlib
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/run.py --threads 0
	$(PY) benchmarks/fresh.py
	$(PY) benchmarks/mlp_grads.py
	$(PY) benchmarks/ragged.py
	$(PY) benchmarks/parallel.py

clean:
	rm -rf $(VENV) $(VENV_NP1) .venv-python3* .pytest_cache .ruff_cache .mypy_cache site
