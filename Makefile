# The two commands a user needs: `make demo` and `make test`. Each sets up .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime

.PHONY: demo test test-fast lint docs bench clean venv gpu-check gpu-wheels browser-check realworld

# What `make demo` needs: trainprof, torch and numpy (without it torch warns at import, and
# every user's job has it). `make test` adds the dev extras on top.
# torch is pinned so that every run of the suite uses the same build; the pin alone picks no
# CPU or CUDA build: pip takes whichever torch 2.13.0 its index serves (PyTorch's CPU index
# serves the CPU build: README's Install). The line after says which it installed.
$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0 numpy
	@$(BIN)/python -c "import torch; print('torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
	# setuptools warns that the clone's folder has the package's name (it is the package)
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(RUNTIME)
	$(BIN)/trainprof demo

# trainprof's modules compiled once, as pip does on install: with PYTHONDONTWRITEBYTECODE set,
# each of the suite's ~400 trainprof processes compiled them again (0.15 s each).
# Two lanes: first the tests no load can change (unit tests, recorded runs, and slow tests
# marked `parallel`) two at a time; then, one at a time, the jobs whose verdicts judge time
# shares or CPU contention, which a second job beside them would change. Both lanes always run.
test: $(STAMP)
	$(BIN)/python -m compileall -q trainprof
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow or parallel" --durations=10 tests; \
	beside=$$?; \
	$(BIN)/python -m pytest -q -p no:xdist -m "slow and not parallel" --durations=15 tests; \
	alone=$$?; \
	test $$beside -eq 0 -a $$alone -eq 0

# The fast lane, for every change (about 30 s on 2 cores): unit tests, and the analysis and its
# reports on recorded run directories (tests/data); no training job. The tests that run one are
# marked slow (tests/conftest.py) and left to `make test`.
test-fast: $(STAMP)
	$(BIN)/python -m compileall -q trainprof
	$(BIN)/python -m pytest -q -n 2 -m "not slow" --durations=10 tests

lint: $(STAMP)
	$(BIN)/ruff check trainprof tests bench tools
	$(BIN)/ruff format --check trainprof tests bench tools
	$(BIN)/mypy trainprof
	$(BIN)/python -m tools.commit_subjects

# The generated docs (about 1.5 min on 2 idle cores, 4.5 min beside other work; BENCHMARKS.md):
# docs/rules/*.md from the rule registry, and the README's demo report and command excerpts
# from real runs. `python -m tools.docs --examples`
# reruns the zoo for the rules' example findings; `--pages` only writes the rule pages.
docs: $(STAMP)
	$(BIN)/python -m tools.docs

# The benchmarks (≈ 7 min on 2 cores); each row they measured is written over its row in
# docs/BENCHMARKS.md, dated, with this machine (`git diff` shows what moved).
bench: $(STAMP)
	$(BIN)/python -m bench --doc docs/BENCHMARKS.md

# The real-world corpus (realworld/README.md): public training scripts run plain and under
# trainprof on small synthetic data, checked against an expert's expected finding (≤ 10 min).
# torchvision and timm go to $(VENV)/realworld-vision, outside site-packages: the index's
# torchvision is a CUDA build that cannot load its ops beside the CPU torch, and an importable
# but broken torchvision breaks `from transformers import Trainer`. The cases that need them run
# through their cpu_torchvision.py, which puts that folder on sys.path.
$(VENV)/.realworld: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,realworld]'
	$(BIN)/python -m pip install -q --upgrade --no-deps --target $(VENV)/realworld-vision \
		torchvision==0.28.0 timm==1.0.28
	touch $(VENV)/.realworld

realworld: $(VENV)/.realworld
	$(BIN)/python -m pytest -q -p no:cacheprovider -rxXs --tb=short realworld

# On a lent GPU machine: no venv (it has torch and the runtime packages); py-spy, pytest and
# pytest-timeout come from wheels carried in .wheels/ when missing. See bench/gpu_check.py.
gpu-check:
	PYTHONPATH=. $(PY) -m bench.gpu_check $(GPU_CHECK_ARGS)

# Here, before a GPU run: the wheels gpu-check installs on that machine (no network there).
gpu-wheels:
	$(PY) -m pip download -q -d .wheels --only-binary=:all: --python-version 3.12 \
		--platform manylinux2014_x86_64 py-spy pytest pytest-timeout

# The HTML report in a real browser (tests/browser, skipped by `make test` where no Chromium is
# found): installs Debian's chromium first if it is missing (as root, or with passwordless sudo).
browser-check: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || [ -n "$$TRAINPROF_CHROMIUM" ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO=sudo; \
	  else echo "browser-check: no Chromium, and no root to install it: run 'apt-get install chromium' as root, or set TRAINPROF_CHROMIUM to a Chromium binary" >&2; exit 2; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium; }
	TRAINPROF_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q tests/browser

clean:
	rm -rf $(VENV) trainprof-runs .pytest_cache
