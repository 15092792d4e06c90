# teenygrad: the two commands a reader needs are `make book` and `make test`.
# Everything runs in .venv, created from requirements.txt on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
UV     := uv==0.13.9  # the installer `make venv` uses (pinned like the rest)

.PHONY: help venv gpu book check-book test lint lab check exercises mine learner capstone clean

help:
	@echo "make gpu         add the CUDA libraries a real NVIDIA GPU needs (requirements-gpu.txt); not needed for the simulator"
	@echo "make book        build the HTML book into book/_build/html (executes the chapters)"
	@echo "make check-book  open every page of the built book in headless chromium: no console errors, all math typeset"
	@echo "make test        the linter (ruff), then the whole test suite"
	@echo "make lint        the linter alone (configured in pyproject.toml)"
	@echo "make lab         JupyterLab on the repository: the chapters to read, the exercises to solve"
	@echo "make check NB=exercises/01-regression.ipynb   grade one notebook"
	@echo "make exercises   regenerate exercises/ from solutions/ (nbgrader)"
	@echo "make mine        which pieces of teenygrad are yours (recorded in mine/ by make check), which the book's"
	@echo "make learner     write the learner's edition of teenygrad (the exercises' pieces are stubs) to build/learner"
	@echo "make capstone    train the GPT on your pieces, graded by the losses reached (~12 min; QUICK=1: ~1.5 min)"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "teenygrad needs Python 3.11 or newer: make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# uv installs the requirements in about 20 s where pip takes 75 (a fresh machine, no download cache); uv reads
	@# no pip.conf, so where it cannot reach an index (a mirror only pip is configured for) pip installs them instead
	$(BIN)/python -m pip install --quiet $(UV)
	@# --compile-bytecode: uv leaves the .pyc files out unless asked (pip writes them), and where the environment sets
	@# PYTHONDONTWRITEBYTECODE (as on CI machines) Python never writes them either: then every process the book and
	@# the tests start (each grader, sandbox and kernel) compiles numpy, numba, nbgrader, ... from source again,
	@# about 60% of a grader's start-up. Written once here, they are only read after.
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.txt \
		|| $(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q -j 0 teenygrad autograder
	@# jsonschema imports rfc3987-syntax when it is there (an optional extra jupyter-events pulls in), and that builds
	@# 38 parsers at import: 2-3 s in every process that reads a notebook (the grader, each sandbox, the book build).
	@# Nothing here validates IRIs; jsonschema skips that check without it.
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
	touch $(STAMP)

# chapter 11's kernels on a real GPU: the CUDA libraries as wheels (the simulator, used without a GPU, needs none)
gpu: $(STAMP)
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements-gpu.txt \
		|| $(BIN)/python -m pip install --quiet -r requirements-gpu.txt

book: $(STAMP)
	$(BIN)/python book/build.py

# needs chromium (Debian/Ubuntu: apt-get install -y chromium); without it, says so and skips
check-book: $(STAMP)
	$(BIN)/python book/check_browser.py

test: lint
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. chapters/01-regression.ipynb exercises/01-regression.ipynb

check: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make check NB=exercises/01-regression.ipynb"; exit 2; }
	$(BIN)/python -m autograder check "$(NB)"

exercises: $(STAMP)
	$(BIN)/python -m autograder release

mine: $(STAMP)
	@$(BIN)/python -m teenygrad

learner: $(STAMP)
	$(BIN)/python -m teenygrad learner build/learner

capstone: $(STAMP)
	$(BIN)/python -m autograder capstone $(if $(QUICK),--quick)

clean:
	rm -rf book/_build book/chapters book/exercises
