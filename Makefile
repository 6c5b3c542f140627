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

.PHONY: test run assets browser sandbox clean

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

# bubblewrap walls the sandbox off from the studio's files, network and environment (agent/sandbox/bwrap.py);
# without it the sandbox falls back to its inner namespaces and warns loudly.
sandbox:
	@command -v bwrap >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) || \
	    echo "note: bubblewrap missing and not root: the sandbox runs without its outer wall (and says so); install the bubblewrap package"; }

test: $(STAMP) $(MONACO) browser sandbox
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} $(PY) -m pytest -q -ra --durations=15

# The whole studio in one process: set-up, migrations, a first admin (password printed once), then
# daphne with the in-process worker on http://$(HOST):$(PORT)/.
run: $(STAMP) $(MONACO) sandbox
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py ensure_admin
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

clean:
	rm -rf $(VENV) .cache node_modules static/vendor var
