# Two commands do all set-up on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CPU build of torch from the machine's local wheel: an unpinned torch would pull the CUDA wheels.
TORCH  ?= torch==2.13.0

.PHONY: test run clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -ra

# The web studio arrives with issue 3; until then the product is the evaluation CLI.
run: $(STAMP)
	$(PY) -m agent --help

clean:
	rm -rf $(VENV) .cache
