# harness-replay: every target sets up what it needs (a uv-managed .venv pinned to harness 0.62.0).
HARNESS ?= 0.62.0
VENV    ?= .venv
PY      := $(VENV)/bin/python
UV      := $(shell command -v uv 2>/dev/null || echo $(VENV)-uv/bin/uv)

.PHONY: setup demo test test-fast test-floors test-pythons lint bench reliability record clean

$(VENV)-uv/bin/uv:
	python3 -m venv $(VENV)-uv && $(VENV)-uv/bin/pip install -q uv

# --compile-bytecode: with PYTHONDONTWRITEBYTECODE (common in CI images) every one of the ~100 Python
# processes the test suite starts would otherwise compile pydantic-ai again (≈1 s CPU each).
$(VENV)/.installed: pyproject.toml | $(UV)
	$(UV) venv -q --allow-existing $(VENV)
	$(UV) pip install -q --compile-bytecode --python $(PY) -e '.[dev]' 'pydantic-ai-harness==$(HARNESS)'
	touch $@

setup: $(VENV)/.installed

# Exit status 1 means "found a change or violation", which is what the demo is there to show;
# only 2 (bad input, broken cassette) fails it.
ok1 = status=$$?; [ $$status -le 1 ]

## demo: replay every bundled cassette on the installed harness, check them, then a two-version matrix
demo: setup
	@echo "== 1/3 replay every bundled cassette on the installed harness ($(HARNESS)): expect all same"
	@$(VENV)/bin/replay run; $(ok1)
	@echo
	@echo "== 2/3 invariant checks on the seed recordings: the seed regressions, found on one version"
	@$(VENV)/bin/replay check cassettes/seed000 cassettes/seed001 cassettes/seed003; $(ok1)
	@echo
	@echo "== 3/3 before you upgrade: the same cassettes on 0.54.0 and $(HARNESS), each in its own uv environment"
	@$(VENV)/bin/replay matrix --harness 0.54.0 --harness $(HARNESS) seed000/long seed001/keep_user_messages_true seed002/whitespace; $(ok1)

# Parallel on every core (pytest-xdist; worksteal evens out the long integration tests).
test: setup
	$(PY) -m pytest -q -n auto --dist worksteal

lint: setup
	$(VENV)/bin/ruff check replay tests scenarios bench
	$(PY) -m mypy

# The floors in pyproject are claims: install the lowest versions they allow (uv's lowest-direct:
# every direct requirement at its floor) into their own venvs and prove them.
# 1. the suite (minus the slow multi-version tests) on the floors, harness pinned as the suite expects;
# 2. the lowest harness/pydantic-ai-slim allowed replays every bundled cassette without an error
#    (.ci/check_lowest_harness.py: a scenario of a capability that harness has not got is excused).
FLOORS ?= $(VENV)-floors
test-floors: | $(UV)
	rm -rf $(FLOORS) $(FLOORS)-harness
	$(UV) venv -q $(FLOORS)
	$(UV) pip install -q --compile-bytecode --python $(FLOORS)/bin/python --resolution lowest-direct -e '.[dev]' 'pydantic-ai-harness==$(HARNESS)'
	@$(UV) pip freeze --python $(FLOORS)/bin/python | grep -iE '^(typer|click|deepdiff|msgpack|rich|pydantic|pytest|hypothesis)=' | tr '\n' ' '; echo
	$(FLOORS)/bin/python -m pytest -q -m "not slow" -n 2
	$(UV) venv -q $(FLOORS)-harness
	$(UV) pip install -q --python $(FLOORS)-harness/bin/python --resolution lowest-direct -e .
	@$(UV) pip freeze --python $(FLOORS)-harness/bin/python | grep -iE '^pydantic-ai-(slim|harness)=' | tr '\n' ' '; echo
	$(FLOORS)-harness/bin/replay run --out $(FLOORS)-harness/results --format json > $(FLOORS)-harness/run.json; [ $$? -le 2 ]  # 2: an error verdict, judged below
	$(FLOORS)-harness/bin/python .ci/check_lowest_harness.py $(FLOORS)-harness/run.json

# The classifiers claim 3.12 and 3.13 as well; .venv is 3.11. In a venv of each: the unit and conformance
# suites, then every bundled cassette replayed (recorded on 3.11: each must be `same`, a `changed` there is
# the interpreter's doing). The interpreter comes from pyenv's versions, then `pythonX.Y` on PATH (`uv venv
# -p 3.12` fails on the pyenv shim of a version installed but not selected); a Python this machine lacks
# is said and skipped, not downloaded.
PYTHONS ?= 3.12 3.13
test-pythons: | $(UV)
	@set -e; for v in $(PYTHONS); do \
	  py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -n 1); \
	  if [ -z "$$py" ] && command -v python$$v >/dev/null && python$$v -c '' 2>/dev/null; then py=$$(command -v python$$v); fi; \
	  if [ -z "$$py" ]; then echo "test-pythons: no Python $$v on this machine (pyenv, PATH): skipped"; continue; fi; \
	  venv=$(VENV)-py$$v; \
	  $(UV) venv -q --allow-existing -p $$py $$venv; \
	  $(UV) pip install -q --compile-bytecode --python $$venv/bin/python -e '.[dev]' 'pydantic-ai-harness==$(HARNESS)'; \
	  echo "== $$($$venv/bin/python -V): tests/unit, tests/conformance, replay run"; \
	  $$venv/bin/python -m pytest -q -n 2 tests/unit tests/conformance; \
	  $$venv/bin/replay run --out $$venv/results > $$venv/run.txt || { cat $$venv/run.txt; exit 1; }; \
	  tail -n 1 $$venv/run.txt; \
	done

test-fast: setup
	$(PY) -m pytest -q -n auto --dist worksteal -m "not slow"

bench: setup
	$(PY) bench/run.py

reliability: setup
	$(PY) bench/reliability.py

record: setup
	$(VENV)/bin/replay record --force

clean:
	rm -rf $(VENV) $(VENV)-uv $(VENV)-floors $(VENV)-floors-harness $(VENV)-py3.* .replay
