# Two commands do all set-up on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CPU build of torch from the machine's local wheel: an unpinned torch would pull the CUDA wheels.
TORCH  ?= torch==2.13.0
MONACO := static/vendor/monaco/vs/loader.js
HOST   ?= 127.0.0.1
PORT   ?= 8000

# The tests run against the real local Postgres and Redis unless the environment says otherwise.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/kstudio_test
TEST_REDIS_URL    ?= redis://127.0.0.1:6379/13

.PHONY: test test-fast lint run assets browser sandbox clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# Monaco from the npm package, copied under static/ (gitignored) and served from our own origin.
$(MONACO): package.json
	npm install --no-audit --no-fund --silent
	npm run --silent build
	touch $(MONACO)

assets: $(MONACO)

# Headless Chromium for the browser test (Debian's packages; skipped with a reason where absent).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) || \
	    echo "note: chromium/chromium-driver missing and not root: the browser test will skip"; }

# bubblewrap walls the sandbox off from the studio's files, network and environment (agent/engine/sandbox/bwrap.py);
# without it the sandbox falls back to its inner namespaces and warns loudly.
sandbox:
	@command -v bwrap >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) || \
	    echo "note: bubblewrap missing and not root: the sandbox runs without its outer wall (and says so); install the bubblewrap package"; }

# The guards CI runs before the tests: pyflakes' checks (ruff) and the import contract (import-linter: agent/ and
# trainer/ never import Django or the studio; no import cycle in apps/). Both are configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check --output-format concise .
	$(VENV)/bin/lint-imports

TEST_ENV := DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)}
# pytest-xdist workers: most of a test's time is spent waiting on processes it started, so two workers keep a 2-core
# box busy. A file's tests run on one worker, in order, sharing their module fixtures (--dist loadfile; loadgroup's
# marks are lost under pytest 9, whose node ids xdist 3.8 can no longer suffix); each worker has its own Postgres
# and Redis databases (tests/worker_env.py). TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)

# Everything (what CI runs): the real sandbox, builds, workers, browser and trainer stages.
test: $(STAMP) $(MONACO) browser sandbox
	$(TEST_ENV) $(PY) -m pytest -q -ra $(XDIST) --durations=40

# The inner loop, a few minutes: all but the tests marked `slow` (real builds, workers, browsers, training).
test-fast: $(STAMP) $(MONACO)
	$(TEST_ENV) $(PY) -m pytest -q -ra $(XDIST) -m "not slow" --durations=10

# The whole studio in one process: set-up, migrations, a first admin (password printed once), then
# daphne with the in-process worker on http://$(HOST):$(PORT)/.
run: $(STAMP) $(MONACO) sandbox
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py ensure_admin --host $(HOST) --port $(PORT)
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

clean:
	rm -rf $(VENV) .cache node_modules static/vendor var
