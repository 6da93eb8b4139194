# `make demo` and `make test` work on a fresh machine: they create .venv and install into it first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean sample check-workflows

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/researchy-subq demo --out demo-output

test: $(STAMP) check-workflows
	$(BIN)/python -m pytest -q

check-workflows: $(STAMP)
	$(BIN)/zizmor --offline --min-severity medium .github/
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/check-jsonschema --builtin-schema vendor.dependabot .github/dependabot.yml

sample: $(STAMP)
	$(BIN)/python scripts/make_sample.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
