# The two commands a newcomer needs:
#   make demo   set up (venv, torch CPU, cag, offline models) and run the main job
#   make test   set up and run the default test suite (offline, CPU, tiny models)
VENV ?= .venv
STAMP := $(VENV)/.cag-setup-done

.PHONY: setup demo test test-slow bench

$(STAMP): pyproject.toml scripts/setup.sh
	CAG_VENV=$(VENV) bash scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/cag demo

test: setup
	$(VENV)/bin/python -m pytest -q

test-slow: setup
	$(VENV)/bin/python -m pytest -q -m slow -s

bench: setup
	$(VENV)/bin/python benchmarks/bench_foundation.py
