# The two commands a user needs: `make demo` and `make test`. Each sets up .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean venv gpu-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: a looser spec could pull a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/trainprof demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check trainprof tests bench
	$(BIN)/ruff format --check trainprof tests bench
	$(BIN)/mypy trainprof

bench: $(STAMP)
	$(BIN)/python -m bench

# On a lent GPU machine: no venv (it has torch and the runtime packages); py-spy, pytest and
# pytest-timeout come from wheels carried in .wheels/ when missing. See bench/gpu_check.py.
gpu-check:
	PYTHONPATH=. $(PY) -m bench.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) trainprof-runs .pytest_cache
