# The README's two commands: `make demo` and `make test`. Both create .venv if missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export JAX_PLATFORMS ?= cpu

.PHONY: demo test test-slow install clean bench

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*; touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dpmt demo

# two workers: the suite is mostly single-threaded XLA compilation (see pyproject.toml)
test: $(STAMP)
	$(PY) -m pytest -q -n 2

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
