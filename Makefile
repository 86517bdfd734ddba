# harness-replay: every target sets up what it needs (a uv-managed .venv pinned to harness 0.62.0).
HARNESS ?= 0.62.0
VENV    ?= .venv
PY      := $(VENV)/bin/python
UV      := $(shell command -v uv 2>/dev/null || echo $(VENV)-uv/bin/uv)

.PHONY: setup demo test test-fast bench reliability record clean

$(VENV)-uv/bin/uv:
	python3 -m venv $(VENV)-uv && $(VENV)-uv/bin/pip install -q uv

$(VENV)/.installed: pyproject.toml | $(UV)
	$(UV) venv -q --allow-existing $(VENV)
	$(UV) pip install -q --python $(PY) -e '.[dev]' 'pydantic-ai-harness==$(HARNESS)'
	touch $@

setup: $(VENV)/.installed

## demo: replay every bundled cassette on the installed harness, then a two-version matrix
demo: setup
	-$(VENV)/bin/replay run
	-$(VENV)/bin/replay check cassettes/seed000 cassettes/seed001
	$(VENV)/bin/replay matrix --harness 0.54.0 --harness $(HARNESS) seed000/long seed001/keep_user_messages_true

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

bench: setup
	$(PY) bench/run.py

reliability: setup
	$(PY) bench/reliability.py

record: setup
	$(VENV)/bin/replay record --force

clean:
	rm -rf $(VENV) $(VENV)-uv .replay
