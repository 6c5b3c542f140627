"""Every setting comes from the environment, here and only here, through typed helpers that fail
loudly (django-environ raises ImproperlyConfigured on a malformed value).

With no variables set the studio is *embedded*: SQLite in WAL mode, an in-process Celery worker on an
in-memory broker, an in-memory channel layer, all in the one process `make run` starts. DATABASE_URL
switches to Postgres (psycopg 3 with a connection pool); REDIS_URL switches the broker, the cache and the
channel layer to Redis, with workers started separately (README: production layout)."""
from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import environ
from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")  # optional; real environment variables win

DEBUG = env.bool("DEBUG", default=False)
# KSTUDIO_ENV=production: HTTPS only (redirect, HSTS, secure cookies), a SECRET_KEY and ALLOWED_HOSTS from the
# environment, and `manage.py check --deploy` clean. The default (development) serves plain http on 127.0.0.1.
KSTUDIO_ENV = env.str("KSTUDIO_ENV", default="development")
if KSTUDIO_ENV not in ("development", "production"):
    raise ImproperlyConfigured(f"KSTUDIO_ENV must be development or production, not {KSTUDIO_ENV!r}")
PRODUCTION = KSTUDIO_ENV == "production"
# The embedded default needs a key too; one derived per checkout is stable across restarts and never
# leaves this machine. Any shared deployment sets SECRET_KEY.
SECRET_KEY = env.str("SECRET_KEY", default="")
if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("KSTUDIO_ENV=production needs DEBUG off: unset DEBUG (tracebacks would reach users)")
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured("KSTUDIO_ENV=production needs SECRET_KEY: a random string of at least 50 characters, e.g. "
                                   "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`")
    if not env.str("ALLOWED_HOSTS", default=""):
        raise ImproperlyConfigured("KSTUDIO_ENV=production needs ALLOWED_HOSTS: the studio's host names, comma-separated "
                                   "(e.g. studio.example.com)")
if not SECRET_KEY:
    _key_file = BASE_DIR / "var" / "secret_key"
    _key_file.parent.mkdir(parents=True, exist_ok=True)
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
    SECRET_KEY = _key_file.read_text().strip()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "axes",  # password-login throttling and lockout (django-axes): /accounts/login/ and /admin/login/
    "apps.accounts",
    "apps.problems",
    "apps.runs",
    "apps.kernels",
    "apps.knowledge",
    "apps.endpoints",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from our own static files
    "apps.api",
    "apps.batches",
    "apps.training",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "studio.headers.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a lockout into the 429 page below
]

ROOT_URLCONF = "studio.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "apps.accounts.context.studio",
    ]},
}]
WSGI_APPLICATION = None
ASGI_APPLICATION = "studio.asgi.application"

# --- database -------------------------------------------------------------------------------------
DATABASE_URL = env.str("DATABASE_URL", default="")
if DATABASE_URL:
    if not DATABASE_URL.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, not {DATABASE_URL!r}; unset it for the embedded SQLite database")
    _db = env.db_url("DATABASE_URL")
    _db["ENGINE"] = "django.db.backends.postgresql"
    # psycopg 3's pool: connections are reused across requests and tasks instead of opened per request.
    _db["OPTIONS"] = {"pool": {"min_size": env.int("DB_POOL_MIN", default=1), "max_size": env.int("DB_POOL_MAX", default=10)}}
    _db["CONN_MAX_AGE"] = 0  # the pool owns connection lifetimes; Django requires 0 with a pool
    # The pool checks a connection before lending it: after a Postgres restart, dead ones are replaced.
    _db["CONN_HEALTH_CHECKS"] = True
    DATABASES = {"default": _db}
else:
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(env.path("SQLITE_PATH", default=str(BASE_DIR / "var" / "studio.sqlite3"))),
        # WAL lets the web threads read while the worker thread writes; IMMEDIATE takes the write lock
        # at BEGIN so two writers queue instead of failing half-way with "database is locked".
        "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                    "transaction_mode": "IMMEDIATE", "timeout": 30},
    }}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, cache, channel layer ------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
EMBEDDED = not REDIS_URL
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured(f"REDIS_URL must be a redis:// URL, not {REDIS_URL!r}; unset it for the embedded in-memory broker")

if EMBEDDED:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"  # the worker is threads of this process (an upload waits on its check)
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    # Redis pub/sub by default: one PUBLISH per event, fanned out to a run's watchers inside each daphne process.
    # channels-redis's list layer ("lists") writes one message per watcher per event; with 200 watchers of one run
    # at 50 events/s on the dev box consumers died on Redis read timeouts (docs/benchmarks.md, "Web load").
    # Both deliver at most once; the consumer recovers a lost push from the database (apps/runs/consumers.py).
    _layer = env.str("KSTUDIO_CHANNEL_LAYER", default="pubsub")
    if _layer not in ("pubsub", "lists"):
        raise ImproperlyConfigured(f"KSTUDIO_CHANNEL_LAYER must be pubsub or lists, not {_layer!r}")
    # Pub/sub channels are global to the Redis server, not per database: without the database number in the
    # prefix, two studios on one Redis (redis://host/0 and redis://host/1) would push each other's run events.
    _redis_db = urlparse(REDIS_URL).path.strip("/") or "0"
    CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer" if _layer == "pubsub" else "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": f"{env.str('CHANNELS_PREFIX', default='kstudio')}:db{_redis_db}"}}}
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL

# --- Celery ----------------------------------------------------------------------------------------
CELERY_TASK_IGNORE_RESULT = True  # state lives in the database; only an upload's check returns a result
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "build"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A message a dead worker had taken comes back after this long; it must exceed the longest step.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Training runs hold their worker for hours: a queue of their own (DESIGN §6), served by `-Q train` workers.
CELERY_TASK_ROUTES = {"apps.training.tasks.*": {"queue": "train"}}

# --- the studio's own knobs -------------------------------------------------------------------------
# Where candidates run. Never asked of torch.cuda here: initialising CUDA in the web process or a Celery
# parent would break forked children, so the presence of nvidia-smi stands in for a GPU.
KSTUDIO_DEVICE = env.str("KSTUDIO_DEVICE", default="cuda" if shutil.which("nvidia-smi") else "cpu")
if KSTUDIO_DEVICE not in ("cpu", "cuda"):
    raise ImproperlyConfigured(f"KSTUDIO_DEVICE must be cpu or cuda, not {KSTUDIO_DEVICE!r}")
KSTUDIO_COMPILE_BASELINE = env.bool("KSTUDIO_COMPILE_BASELINE", default=True)
# Rounds of interleaved timed batches per evaluation (agent/engine/evaluate/session.py): at least MIN, at most MAX while
# the speedup's interval is still wide.
KSTUDIO_EVAL_MIN_ROUNDS = env.int("KSTUDIO_EVAL_MIN_ROUNDS", default=5)
KSTUDIO_EVAL_MAX_ROUNDS = env.int("KSTUDIO_EVAL_MAX_ROUNDS", default=15)
# Device memory (MiB) an evaluation's two jobs may use together (agent/engine/evaluate/memory.py plans from it); 0: the
# GPU's own (its total times the jobs' memory fraction), and no budget on the CPU.
KSTUDIO_EVAL_DEVICE_MEMORY_MB = env.int("KSTUDIO_EVAL_DEVICE_MEMORY_MB", default=0)
# Sanity sweeps only (benchmarks/kernelbench_sweep.py): candidates may call any PyTorch op, so that a problem's own code
# is accepted as its candidate. Never on a studio that judges real kernels: a PyTorch fallback would pass as one.
KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP = env.bool("KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP", default=False)
if PRODUCTION and KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP:
    raise ImproperlyConfigured("KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP is for sanity sweeps on a private studio, never production: "
                               "with it, a PyTorch fallback passes as a kernel")
if KSTUDIO_EVAL_DEVICE_MEMORY_MB < 0:
    raise ImproperlyConfigured("KSTUDIO_EVAL_DEVICE_MEMORY_MB must be 0 (the device's own memory) or a positive size in MiB")
KSTUDIO_CANDIDATE_WALL_SECONDS = env.int("KSTUDIO_CANDIDATE_WALL_SECONDS", default=300)
KSTUDIO_BUILD_SECONDS = env.int("KSTUDIO_BUILD_SECONDS", default=600)
# The user's own problem, run by the reference's job in every evaluation: generous, but a problem
# that starts hanging after it passed its upload check must not hold a GPU worker for long.
KSTUDIO_REFERENCE_WALL_SECONDS = env.int("KSTUDIO_REFERENCE_WALL_SECONDS", default=300)
KSTUDIO_CACHE_DIR = env.str("KSTUDIO_CACHE_DIR", default="")  # empty: the engine's default
# A step claimed by a worker that then vanished is taken over after this long (see apps/runs/steps.py).
KSTUDIO_STEP_LEASE_SECONDS = env.int("KSTUDIO_STEP_LEASE_SECONDS", default=1800)
# An uploaded problem is imported and run once in a worker's sandbox; longer than this and it is refused.
KSTUDIO_PROBLEM_CHECK_SECONDS = env.int("KSTUDIO_PROBLEM_CHECK_SECONDS", default=60)
# The library keeps an accepted kernel only when it beats the faster PyTorch baseline (eager or torch.compile)
# by at least this factor and its timing was steady (agent/knowledge/library.py); slower ones stay candidates of their run.
KSTUDIO_LIBRARY_MIN_SPEEDUP = env.float("KSTUDIO_LIBRARY_MIN_SPEEDUP", default=1.05)
if not 0 < KSTUDIO_LIBRARY_MIN_SPEEDUP < 1000:
    raise ImproperlyConfigured(f"KSTUDIO_LIBRARY_MIN_SPEEDUP must be a factor such as 1.05, not {KSTUDIO_LIBRARY_MIN_SPEEDUP}")
# On a shared development machine every CPU timing may be noisy; this keeps such kernels anyway (never in production).
KSTUDIO_LIBRARY_KEEP_NOISY = env.bool("KSTUDIO_LIBRARY_KEEP_NOISY", default=False)
# Agent runs: the defaults of a run's budgets (a user may ask for less, never more than the maxima).
KSTUDIO_AGENT_MAX_TURNS = env.int("KSTUDIO_AGENT_MAX_TURNS", default=20)
KSTUDIO_AGENT_MAX_TOKENS = env.int("KSTUDIO_AGENT_MAX_TOKENS", default=400_000)
KSTUDIO_AGENT_WALL_SECONDS = env.int("KSTUDIO_AGENT_WALL_SECONDS", default=3600)
KSTUDIO_AGENT_MAX_GPU_SECONDS = env.float("KSTUDIO_AGENT_MAX_GPU_SECONDS", default=3600.0)
# Per-user quotas (apps/runs/quotas.py): past one, starting a run answers 429 with the limit named.
KSTUDIO_QUOTA_RUNS_IN_FLIGHT = env.int("KSTUDIO_QUOTA_RUNS_IN_FLIGHT", default=50)  # unfinished: queued or running
KSTUDIO_QUOTA_QUEUED_RUNS = env.int("KSTUDIO_QUOTA_QUEUED_RUNS", default=30)  # not started yet
KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY = env.float("KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY", default=86400.0)  # past 24 hours
# A batch's new sources are each checked in the sandbox before anything is stored: at most this many a request.
KSTUDIO_BATCH_MAX_SOURCES = env.int("KSTUDIO_BATCH_MAX_SOURCES", default=20)
for _name in ("KSTUDIO_AGENT_MAX_TURNS", "KSTUDIO_AGENT_MAX_TOKENS", "KSTUDIO_AGENT_WALL_SECONDS",
              "KSTUDIO_AGENT_MAX_GPU_SECONDS", "KSTUDIO_QUOTA_RUNS_IN_FLIGHT", "KSTUDIO_QUOTA_QUEUED_RUNS",
              "KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY", "KSTUDIO_BATCH_MAX_SOURCES"):
    if not globals()[_name] > 0:
        raise ImproperlyConfigured(f"{_name} must be positive, not {globals()[_name]}")
KSTUDIO_MAX_UPLOAD_BYTES = env.int("KSTUDIO_MAX_UPLOAD_BYTES", default=1_000_000)
# An open run websocket asks the database this often for events whose push was lost (apps/runs/consumers.py).
KSTUDIO_WS_RESYNC_SECONDS = env.float("KSTUDIO_WS_RESYNC_SECONDS", default=5.0)
if KSTUDIO_WS_RESYNC_SECONDS <= 0:
    raise ImproperlyConfigured(f"KSTUDIO_WS_RESYNC_SECONDS must be positive, not {KSTUDIO_WS_RESYNC_SECONDS}")
KSTUDIO_SIGNUP_OPEN = env.bool("KSTUDIO_SIGNUP_OPEN", default=False)
# The embedded worker's threads (one process does everything in the embedded default).
KSTUDIO_EMBEDDED_WORKER_THREADS = env.int("KSTUDIO_EMBEDDED_WORKER_THREADS", default=2)
# Training runs write their data, checkpoints and logs under here (one directory per run), on the train workers.
KSTUDIO_TRAINING_DIR = str(env.path("KSTUDIO_TRAINING_DIR", default=str(BASE_DIR / "var" / "training")))
# Any request body past this is refused with 413, the limit stated, before Django reads it (studio/body_limit.py):
# Django's ASGI handler would otherwise spool a body of any size to disk. A batch of many sources needs room.
KSTUDIO_MAX_REQUEST_BYTES = env.int("KSTUDIO_MAX_REQUEST_BYTES", default=16 * 1024 * 1024)
if KSTUDIO_MAX_REQUEST_BYTES < 3 * KSTUDIO_MAX_UPLOAD_BYTES:
    raise ImproperlyConfigured(f"KSTUDIO_MAX_REQUEST_BYTES ({KSTUDIO_MAX_REQUEST_BYTES}) must be at least 3x "
                               f"KSTUDIO_MAX_UPLOAD_BYTES ({KSTUDIO_MAX_UPLOAD_BYTES}): a form carries a file and pasted text")
# Django's own form-data cap sits at the request cap, so what passes the cap is parsed and an oversized module
# gets the upload check's message (its size and the limit) rather than a bare "Bad Request".
DATA_UPLOAD_MAX_MEMORY_SIZE = KSTUDIO_MAX_REQUEST_BYTES
# A module within the limit stays in memory; a larger file spills to disk, bounded by the request cap.
FILE_UPLOAD_MAX_MEMORY_SIZE = KSTUDIO_MAX_UPLOAD_BYTES + 1
DATA_UPLOAD_MAX_NUMBER_FILES = 5  # every form takes one module

# --- the REST API (apps/api) ----------------------------------------------------------------------------
def _rate(name: str, default: str) -> str:
    """A throttle rate such as "120/min": DRF would only fail on the first request, so check it here."""
    value = env.str(name, default=default)
    count, _, period = value.partition("/")
    if not count.isdigit() or period[:1] not in ("s", "m", "h", "d"):
        raise ImproperlyConfigured(f"{name} must look like 120/min (a count, then s, min, hour or day), not {value!r}")
    return value


REST_FRAMEWORK = {
    # Tokens for scripts and studio-cli (made on /accounts/tokens/); the session for the browsable docs.
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps.api.authentication.ThrottledTokenAuthentication",
                                       "rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apps.api.pagination.Pagination",
    "PAGE_SIZE": env.int("API_PAGE_SIZE", default=50),
    # Counted in the default cache: Redis when REDIS_URL is set, so every web process shares the counts.
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.throttles.UserThrottle", "apps.api.throttles.AnonThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": _rate("API_THROTTLE_USER", "3000/hour"),
                               "anon": _rate("API_THROTTLE_ANON", "60/hour")},
    "EXCEPTION_HANDLER": "apps.api.errors.handle",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.api.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Kernel Studio API",
    "DESCRIPTION": "Problems, runs, kernels and batch jobs. Authenticate with `Authorization: Token <key>` "
                   "(make one on /accounts/tokens/).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"RunKindEnum": "apps.runs.models.Run.Kind", "EndpointKindEnum": "apps.endpoints.models.ModelEndpoint.Kind",
                            "BatchKindEnum": "apps.batches.models.Batch.Kind"},
}

# --- security headers and HTTPS ----------------------------------------------------------------------------
# Every mode: no framing, no MIME sniffing, no referrer to other sites, a strict CSP (studio/headers.py).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Scripts only from our own files (no inline script: Swagger UI's init script is served separately). Monaco
# and Swagger UI set inline styles and start web workers from blob: URLs; CSP3's 'self' covers the run
# page's websocket to the same host.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:",
    "font-src 'self' data:", "worker-src 'self' blob:", "connect-src 'self'", "object-src 'none'",
    "base-uri 'self'", "form-action 'self'", "frame-ancestors 'none'",
])
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
# Production only: the development default must keep working over plain http on 127.0.0.1.
SECURE_SSL_REDIRECT = PRODUCTION
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=PRODUCTION)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=PRODUCTION)
# Behind a proxy that terminates TLS, requests reach daphne as http: trust its X-Forwarded-Proto (only then:
# a client could send the header itself to a studio it reaches directly).
if env.bool("TRUST_X_FORWARDED_PROTO", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- auth, static, the rest ---------------------------------------------------------------------------
# Password logins (the studio's form and the admin's) go through django-axes: after KSTUDIO_LOGIN_FAILURE_LIMIT
# failures in a row for one username from one address, that pair is locked out for KSTUDIO_LOGIN_COOLOFF_MINUTES
# (a 429 page saying so; `manage.py axes_reset` unlocks). The pair, not the address alone: a stranger guessing
# cannot lock a user out from their own address. API tokens are throttled by the API (apps/api/throttles.py).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("KSTUDIO_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("KSTUDIO_LOGIN_COOLOFF_MINUTES", default=15))
if AXES_FAILURE_LIMIT < 1 or AXES_COOLOFF_TIME <= timedelta(0):
    raise ImproperlyConfigured("KSTUDIO_LOGIN_FAILURE_LIMIT and KSTUDIO_LOGIN_COOLOFF_MINUTES must be positive")
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client's address: REMOTE_ADDR, unless a proxy in front is trusted to set X-Forwarded-For (a client reaching
# daphne directly could otherwise send a new address with every guess).
AXES_IPWARE_META_PRECEDENCE_ORDER = (("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR") if env.bool("TRUST_X_FORWARDED_FOR", default=False)
                                     else ("REMOTE_ADDR",))
# Django's hashers (PBKDF2 first) unless KSTUDIO_PASSWORD_HASHERS names others: the tests name MD5 (tests/conftest.py),
# since a PBKDF2 login costs about a second on a loaded 2-core box and a lockout test logs in a dozen times.
PASSWORD_HASHERS = env.list("KSTUDIO_PASSWORD_HASHERS", default=list(global_settings.PASSWORD_HASHERS))
if PRODUCTION and any("MD5" in hasher for hasher in PASSWORD_HASHERS):
    raise ImproperlyConfigured("KSTUDIO_ENV=production refuses an MD5 password hasher: unset KSTUDIO_PASSWORD_HASHERS")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "problems:list"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = str(env.path("STATIC_ROOT", default=str(BASE_DIR / "var" / "staticfiles")))
# static/ holds our JS/CSS; static/vendor/ (gitignored) holds Monaco's min/vs copied from node_modules.
STATICFILES_DIRS = [BASE_DIR / "static"]
Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing one before collectstatic
# Serve straight from the source folders too, so a checkout works before collectstatic has run.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
