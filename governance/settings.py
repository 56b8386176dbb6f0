"""Arbiter settings: one 12-factor module.

Every value that differs between a laptop and production comes from the environment
(see ``.env.example``). With nothing set, Arbiter runs on SQLite and a Celery broker kept
in files, so ``make run`` needs no server. ``DATABASE_URL`` and ``CELERY_BROKER_URL``
switch to PostgreSQL and Redis.

A ``.env`` file in the project folder (``ARBITER_ENV_FILE`` names another; empty: none) is
read first, for the variables the environment does not set. ``make run`` and ``make test``
write one for the demo (debug on, a generated secret key), so that every ``manage.py``
command works as the README writes it; production sets its variables in the environment
(docker compose's ``env_file``) and still refuses to start without ``DJANGO_SECRET_KEY``.
"""

import os
from datetime import timedelta
from ipaddress import ip_network
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent


def env_file_load(path: Path) -> None:
    """Set each ``NAME=value`` line of ``path`` (if it exists) that the environment lacks."""
    if not path.is_file():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.removeprefix("export ").split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        os.environ.setdefault(name.strip(), value)


_env_file = os.environ.get("ARBITER_ENV_FILE", ".env")
if _env_file:
    env_file_load(BASE_DIR / _env_file)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG")
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off (see .env.example)."
        )
    SECRET_KEY = "arbiter-insecure-development-key-only-for-debug"
# .env.example's placeholder passes Django's length checks: refuse it by name in production.
PLACEHOLDER_SECRET_KEY = "change-me-to-a-long-random-string-of-at-least-fifty-characters"
if not DEBUG and SECRET_KEY == PLACEHOLDER_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is .env.example's placeholder: set a long random secret of your own "
        "(for example: python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# Where the embedded defaults keep their files (SQLite database, broker folders). A relative
# path is taken from the project folder; the result is absolute, as the broker's URLs need.
DATA_DIR = (BASE_DIR / os.environ.get("ARBITER_DATA_DIR", "var")).resolve()

INSTALLED_APPS = [
    "governance.apps.ArbiterAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "mozilla_django_oidc",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "simple_history",
    "governance",
    "queues",
    "approvals",
    "reports",
]

MIDDLEWARE = [
    # First: /healthz and /readyz for orchestrators (plain HTTP, any Host, no session).
    "governance.toolkit.health.HealthProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    # NUL bytes and over-long values in the URL, query or form body: a 400 naming the field.
    "governance.toolkit.bad_input.RejectBadInputMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A session begun through the identity provider: is the account still there? (toolkit.oidc)
    "governance.toolkit.oidc.ProviderSessionCheckMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    "csp.middleware.CSPMiddleware",
    # Every write made with an API token is recorded (account, token, outcome, pipeline run).
    "governance.toolkit.auth.ApiWriteAuditMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into a 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "governance.urls"
WSGI_APPLICATION = "governance.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": ["governance.templatetags.arbiter"],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{DATA_DIR / 'arbiter.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        # Long-lived processes (Celery workers) must not reuse a connection the server closed.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    # Tests that hand work to a separate worker process need a database file both can open.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-arbiter.sqlite3")}
    # Writers queue for the lock (BEGIN IMMEDIATE, then wait up to the timeout) instead of
    # failing with "database is locked" when a read transaction tries to become a write.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": int(os.environ.get("ARBITER_SQLITE_TIMEOUT", "20")),
        "transaction_mode": "IMMEDIATE",
    }

# SQLite has no INCLUDE columns: its indexes with them (the review's workload_wait_review and
# workload_hour_review) are plain indexes there, which is what it needs; PostgreSQL reads them
# index-only.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "governance.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# django-axes first: it refuses a locked-out login before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # The model backend for people: service accounts never sign in to the pages.
    "governance.toolkit.auth.PeopleOnlyBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "governance" / "locale"]
# One date format per language, on every page and in mails (governance/formats/).
FORMAT_MODULE_PATH = ["governance.formats"]
TIME_ZONE = os.environ.get("ARBITER_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", DATA_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Security (secure unless DEBUG; each can be overridden from the environment) ---
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = int(
    os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0" if DEBUG else "31536000")
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
# The header only consents to the browsers' preload list; submitting the domain is a separate,
# manual step. Set DJANGO_SECURE_HSTS_PRELOAD=0 for a domain that must never be preloaded.
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("DJANGO_BEHIND_TLS_PROXY"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Brute force: login lockout with back-off (django-axes) ---
AXES_ENABLED = env_bool("ARBITER_LOGIN_LOCKOUT", True)
# Wrong passwords in a row, for one username from one address, before the lockout.
AXES_FAILURE_LIMIT = int(os.environ.get("ARBITER_LOGIN_FAILURE_LIMIT", "5"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The first lockout lasts ARBITER_LOGIN_COOLOFF_MINUTES; each further wrong password while
# locked out doubles it, up to a day (``login_cool_off``).
ARBITER_LOGIN_COOLOFF_MINUTES = int(os.environ.get("ARBITER_LOGIN_COOLOFF_MINUTES", "5"))
AXES_COOLOFF_TIME = "governance.selectors.people.login_cool_off"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_HTTP_RESPONSE_CODE = 429
# The client's address (lockout, throttles, audit, /metrics): X-Forwarded-For is believed
# only from these proxies (comma-separated addresses or networks, e.g. 10.0.0.5,10.1.0.0/16);
# empty: the connecting address is the client's.
ARBITER_TRUSTED_PROXIES = env_list("ARBITER_TRUSTED_PROXIES")
for _proxy in ARBITER_TRUSTED_PROXIES:
    try:
        ip_network(_proxy, strict=False)
    except ValueError as _error:
        raise ImproperlyConfigured(
            f"ARBITER_TRUSTED_PROXIES: {_proxy!r} is not an address or a network."
        ) from _error
AXES_CLIENT_IP_CALLABLE = "governance.toolkit.client.client_address"

# --- Content-Security-Policy (django-csp): scripts only from this site, never inline ---
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # Plotly and Swagger UI set styles at run time; styles cannot run code.
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Cache: throttling counters (set ARBITER_CACHE_URL to Redis with several processes) ---
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["ARBITER_CACHE_URL"],
        }
        if os.environ.get("ARBITER_CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Email (console in development and the demo) ---
EMAIL_BACKEND = os.environ.get(
    "DJANGO_EMAIL_BACKEND", "governance.toolkit.console.ReadableConsoleEmailBackend"
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "arbiter@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# --- Celery: an embedded broker in files by default, Redis when CELERY_BROKER_URL says so ---
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "celery" / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "processed_folder": str(DATA_DIR / "celery" / "processed"),
        "store_processed": False,
        # Exchange bindings; kombu's default is a "control" folder in the working directory.
        "control_folder": str(DATA_DIR / "celery" / "control"),
    }
    CELERY_RESULT_BACKEND = CELERY_RESULT_BACKEND or f"file://{DATA_DIR / 'celery' / 'results'}"
    for _folder in ("broker", "processed", "results", "control"):
        (DATA_DIR / "celery" / _folder).mkdir(parents=True, exist_ok=True)
else:
    CELERY_RESULT_BACKEND = CELERY_RESULT_BACKEND or CELERY_BROKER_URL
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER")
# Every task is idempotent (safe to run twice), so a message is acknowledged only once its task
# has finished: a worker killed mid-task (its machine lost, a pool process killed) leaves the
# message with the broker, which hands it to a worker again (tests/governance/test_worker_lost.py).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A lost broker connection cancels the running tasks: their messages cannot be acknowledged
# any more and come back anyway.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# No task runs longer than this: the pool process of one that does is killed (the task is then
# failed, not repeated). The longest are a review build of a large site and a first sync.
CELERY_TASK_TIME_LIMIT = int(os.environ.get("ARBITER_TASK_TIME_LIMIT", "3600"))
# Redis redelivers a message not acknowledged within this many seconds (a worker lost without
# a word). It must be longer than the longest task, or a task still running would be started
# a second time; also longer than the longest countdown (a sync's retry waits up to 10 min).
ARBITER_BROKER_VISIBILITY_TIMEOUT = int(
    os.environ.get("ARBITER_BROKER_VISIBILITY_TIMEOUT", str(2 * CELERY_TASK_TIME_LIMIT))
)
if ARBITER_BROKER_VISIBILITY_TIMEOUT <= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"ARBITER_BROKER_VISIBILITY_TIMEOUT ({ARBITER_BROKER_VISIBILITY_TIMEOUT} s) must be "
        f"longer than ARBITER_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT} s): a task still "
        "running would be handed to a second worker."
    )
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": ARBITER_BROKER_VISIBILITY_TIMEOUT}
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {
        "visibility_timeout": ARBITER_BROKER_VISIBILITY_TIMEOUT
    }
CELERY_RESULT_EXPIRES = timedelta(days=1)
CELERY_TIMEZONE = TIME_ZONE
# The hourly workload rollup rereads jobs changed this long before its watermark (evidence
# that arrives late), see queues.services.workload.rollup.
ARBITER_ROLLUP_LOOKBACK_HOURS = int(os.environ.get("ARBITER_ROLLUP_LOOKBACK_HOURS", "6"))
# Kueue: seconds between two passes of Arbiter's enforcer (aging, minimum runtime, daily
# maximum, tier caps, grant ends: queues.services.kueue.enforce).
KUEUE_ENFORCE_SECONDS = int(os.environ.get("ARBITER_KUEUE_ENFORCE_SECONDS", "30"))
# Beat: however many processes run, one sends the schedule (a lock in Redis; see
# governance.celery.SingleBeatScheduler). A lost holder's lock expires after this many seconds,
# then another beat takes over; each beat checks at least every CELERY_BEAT_MAX_INTERVAL s.
CELERY_BEAT_SCHEDULER = "governance.celery:SingleBeatScheduler"
CELERY_BEAT_LOCK_SECONDS = int(os.environ.get("ARBITER_BEAT_LOCK_SECONDS", "60"))
CELERY_BEAT_MAX_INTERVAL = 10
CELERY_BEAT_SCHEDULE = {
    "review-reminders": {
        "task": "governance.tasks.review_reminders_send",
        "schedule": crontab(minute=0, hour="*/6"),
    },
    "grants-transition": {
        "task": "governance.tasks.grants_transition",
        "schedule": timedelta(minutes=1),
    },
    # Requests follow their grants; requesters and approvers hear 24 h before and at expiry.
    "requests-sync": {
        "task": "approvals.tasks.requests_sync",
        "schedule": timedelta(minutes=1),
    },
    "idempotency-keys-purge": {
        "task": "approvals.tasks.idempotency_keys_purge",
        "schedule": timedelta(hours=1),
    },
    # Scheduler sync: retry clusters whose applied rules are behind, and look for drift.
    "scheduler-sync-due": {
        "task": "queues.tasks.sync_due_clusters",
        "schedule": timedelta(minutes=5),
    },
    # What Slurm cannot hold natively (untyped GPU requests), Arbiter's guard holds.
    "scheduler-guard": {
        "task": "queues.tasks.guard_clusters",
        "schedule": timedelta(minutes=1),
    },
    "scheduler-out-of-sync": {
        "task": "queues.tasks.out_of_sync_check",
        "schedule": timedelta(minutes=5),
    },
    # Workload evidence: one collection task per cluster every minute (each holds its own
    # lease, so a slow or down cluster never delays another).
    "workload-collect": {
        "task": "queues.tasks.collect_workload",
        "schedule": timedelta(minutes=1),
    },
    "workload-checks": {
        "task": "queues.tasks.workload_checks",
        "schedule": timedelta(minutes=1),
    },
    # The monthly review: the previous calendar month, built on the 1st (once; see
    # reports.services.review_request_scheduled).
    "monthly-review": {
        "task": "reports.tasks.monthly_review_schedule",
        "schedule": crontab(minute=30, hour=0, day_of_month="1"),
    },
    # The review's hourly pre-aggregate of the workload evidence (incremental, idempotent).
    "workload-hours-roll-up": {
        "task": "queues.tasks.workload_hours_roll_up",
        "schedule": timedelta(minutes=5),
    },
    # Every minute: a hand-made change to what Arbiter owns is seen within a minute, and
    # the check queues the sync that restores it (drift_check_all).
    "scheduler-drift-check": {
        "task": "queues.tasks.drift_check_clusters",
        "schedule": timedelta(minutes=1),
    },
    # Kueue: what Kueue cannot hold (aging, a cautious class's minimum runtime and daily
    # maximum, a tier's GPU caps, a grant's end), Arbiter's enforcer holds on the Workloads.
    "kueue-enforce": {
        "task": "queues.tasks.enforce_kueue_clusters",
        "schedule": timedelta(seconds=KUEUE_ENFORCE_SECONDS),
    },
}

# --- REST API ---
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated client gets 401 with a WWW-Authenticate challenge.
        "governance.toolkit.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A token acts only within its scopes (a view's ``required_scope``; by default ``read``
    # for safe methods, ``request`` for the others); sessions are not limited by scopes.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "governance.toolkit.auth.TokenScopePermission",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    # Per token, per user and (anonymous) per address; rates in ARBITER_API_RATES below.
    "DEFAULT_THROTTLE_CLASSES": [
        "governance.toolkit.throttles.TokenRateThrottle",
        "governance.toolkit.throttles.UserRateThrottle",
        "governance.toolkit.throttles.AnonRateThrottle",
    ],
    # Hostile JSON (nested too deep, NUL bytes in strings) is a 400, not a server error.
    "DEFAULT_PARSER_CLASSES": [
        "governance.toolkit.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    # drf-spectacular's, with the token scope each operation needs.
    "DEFAULT_SCHEMA_CLASS": "governance.toolkit.api.ScopedAutoSchema",
    "EXCEPTION_HANDLER": "governance.toolkit.api.exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
# API rate limits (requests per second, minute, hour or day); a client over one gets a 429
# with Retry-After. ARBITER_API_THROTTLE=0 turns throttling off.
ARBITER_API_THROTTLE = env_bool("ARBITER_API_THROTTLE", True)
ARBITER_API_RATES = {
    "token": os.environ.get("ARBITER_API_RATE_TOKEN", "600/min"),
    "user": os.environ.get("ARBITER_API_RATE_USER", "1200/min"),
    "anon": os.environ.get("ARBITER_API_RATE_ANON", "60/min"),
}
# How long an API Idempotency-Key is remembered (a retry after that files a new request).
ARBITER_IDEMPOTENCY_KEY_HOURS = max(1, int(os.environ.get("ARBITER_IDEMPOTENCY_KEY_HOURS", "24")))
# Password links by mail (a reset, or a first password): at most this many asked for from one
# address, and sent to one account (n/min, n/hour, n/day); over it, a 429 for the address and
# nothing more sent to the account (the page answers the same, so it tells no account apart).
ARBITER_PASSWORD_LINK_RATE_ADDRESS = os.environ.get("ARBITER_PASSWORD_LINK_RATE_ADDRESS", "10/hour")
ARBITER_PASSWORD_LINK_RATE_ACCOUNT = os.environ.get("ARBITER_PASSWORD_LINK_RATE_ACCOUNT", "3/hour")
# API tokens: days a new token lives unless its maker says otherwise, and the most they may
# choose (the deployer's cap).
ARBITER_TOKEN_MAX_DAYS = int(os.environ.get("ARBITER_TOKEN_MAX_DAYS", "365"))
ARBITER_TOKEN_DEFAULT_DAYS = int(os.environ.get("ARBITER_TOKEN_DEFAULT_DAYS", "90"))
SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Governed rules of the shared GPU pool: tiers, quotas, pools, flavors, "
    "preemption classes and projects.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed package (drf-spectacular-sidecar), not a CDN: /api/docs/
    # works offline and its version is the one pinned with the project.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "EditKindEnum": "governance.models.EditKind",
        "PreemptionKindEnum": "governance.models.PreemptionKind",
        "RequestKindEnum": "approvals.models.RequestKind",
        "RequestStateEnum": "approvals.models.RequestState",
    },
}

# --- History: reasons may be longer than simple-history's default 100 characters ---
SIMPLE_HISTORY_HISTORY_CHANGE_REASON_USE_TEXT_FIELD = True
SIMPLE_HISTORY_REVERT_DISABLED = True

# --- Arbiter ---
# Dotted paths of callables run (after commit) with ``revision_id=`` whenever the effective
# rules change: applied rule changes, grants starting or ending. The scheduler sync hooks in
# here; with none, the ``RulesRevision`` rows alone record that a sync is due.
ARBITER_ON_RULES_CHANGED: list[str] = ["queues.services.sync_enqueue_for_revision"]
# Workload evidence for the apps that may not import ``queues`` (approvals, governance):
# ``(project=, days=)`` → running/pending GPUs against guarantee and maximum, usage and waits
# by category; ``(project=, job_ids=)`` → each named job's state and why it waits. Plain data.
ARBITER_WORKLOAD_EVIDENCE = "queues.selectors.project_workload_summary"
ARBITER_JOBS_STATUS = "queues.selectors.jobs_status"
# Scheduler sync: seconds a sync holds its cluster's lease (a crashed worker's lease expires),
# retries with exponential backoff while the scheduler does not answer, and the timeout of
# each Slurm command.
ARBITER_SYNC_LEASE_SECONDS = int(os.environ.get("ARBITER_SYNC_LEASE_SECONDS", "900"))
# Minutes a cluster's rules may stay due before ops are alerted (mail and in-app).
ARBITER_OUT_OF_SYNC_MINUTES = int(os.environ.get("ARBITER_OUT_OF_SYNC_MINUTES", "30"))
ARBITER_SLURM_TIMEOUT = int(os.environ.get("ARBITER_SLURM_TIMEOUT", "60"))
# Seconds the submit table a Slurm sync writes beside slurm.conf stays valid: the guard
# renews it each minute while the cluster is in sync; past it, Arbiter's job_submit plugin
# refuses GPU jobs of governed projects (fails safe).
ARBITER_SLURM_SUBMIT_TABLE_TTL = int(os.environ.get("ARBITER_SLURM_SUBMIT_TABLE_TTL", "900"))
# Kubernetes/Kueue clusters: the directory whose files (a bearer token or a kubeconfig) a
# cluster's settings may name, the Kueue CRDs generated objects are validated against
# (empty: the Kueue v0.17.0 CRDs shipped in queues/kueue_crds), and each API call's timeout.
ARBITER_KUBE_CREDENTIALS_DIR = os.environ.get("ARBITER_KUBE_CREDENTIALS_DIR", "")
ARBITER_KUEUE_CRDS_DIR = os.environ.get("ARBITER_KUEUE_CRDS_DIR", "")
ARBITER_KUBE_TIMEOUT = int(os.environ.get("ARBITER_KUBE_TIMEOUT", "30"))
# Cluster connections carry no commands: the directories of Slurm client binaries (sacctmgr,
# squeue, scontrol) that ops may choose for a cluster, colon-separated absolute paths (empty:
# only the worker's PATH).
ARBITER_SLURM_BIN_DIRS = [
    item for item in os.environ.get("ARBITER_SLURM_BIN_DIRS", "").split(":") if item.strip()
]
# /metrics (Prometheus): a bearer token and/or the client networks allowed to scrape.
ARBITER_METRICS_TOKEN = os.environ.get("ARBITER_METRICS_TOKEN", "")
ARBITER_METRICS_ALLOWED_NETWORKS = env_list("ARBITER_METRICS_ALLOWED_NETWORKS")
# Days before a review is due at which the owner is reminded and the item is listed as due.
ARBITER_REVIEW_DUE_WINDOW_DAYS = int(os.environ.get("ARBITER_REVIEW_DUE_WINDOW_DAYS", "14"))
# The monthly review's queries run on this many database connections at once (PostgreSQL,
# outside a transaction: each reads the same snapshot); 1 runs them one after another.
ARBITER_REVIEW_CONNECTIONS = max(1, int(os.environ.get("ARBITER_REVIEW_CONNECTIONS", "2")))
# The address people open Arbiter at; mails (review reminders) link to pages under it.
ARBITER_SITE_URL = os.environ.get("ARBITER_SITE_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Sign-in: the organisation's identity provider (OpenID Connect) and local passwords ---
# ARBITER_OIDC_ISSUER turns the provider on: its endpoints and keys come from the issuer's
# discovery document (/.well-known/openid-configuration) unless set one by one below. The
# authorization-code flow with PKCE (S256), state and nonce (mozilla-django-oidc); the ID
# token's signature (the provider's JWKS), issuer, audience, expiry and nonce are checked.
ARBITER_OIDC_ISSUER = os.environ.get("ARBITER_OIDC_ISSUER", "").rstrip("/")
ARBITER_OIDC_ENABLED = bool(ARBITER_OIDC_ISSUER)
OIDC_RP_CLIENT_ID = os.environ.get("ARBITER_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("ARBITER_OIDC_CLIENT_SECRET", "")
if ARBITER_OIDC_ENABLED and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "ARBITER_OIDC_ISSUER is set: set ARBITER_OIDC_CLIENT_ID and ARBITER_OIDC_CLIENT_SECRET "
        "too (see .env.example)."
    )
OIDC_RP_SCOPES = os.environ.get("ARBITER_OIDC_SCOPES", "openid profile email groups")
OIDC_RP_SIGN_ALGO = os.environ.get("ARBITER_OIDC_SIGN_ALGO", "RS256")
# Empty: from the discovery document.
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("ARBITER_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("ARBITER_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("ARBITER_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("ARBITER_OIDC_JWKS_ENDPOINT", "")
OIDC_OP_END_SESSION_ENDPOINT = os.environ.get("ARBITER_OIDC_END_SESSION_ENDPOINT", "")
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True  # the logout's id_token_hint
# How Arbiter authenticates at the token endpoint: "basic" (client_secret_basic) or "post".
OIDC_TOKEN_USE_BASIC_AUTH = os.environ.get("ARBITER_OIDC_TOKEN_AUTH", "basic") == "basic"
OIDC_TIMEOUT = int(os.environ.get("ARBITER_OIDC_TIMEOUT", "10"))
OIDC_VERIFY_SSL = env_bool("ARBITER_OIDC_VERIFY_TLS", True)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
OIDC_REDIRECT_FIELD_NAME = "next"
# The claims Arbiter reads (the subject is always "sub").
ARBITER_OIDC_USERNAME_CLAIM = os.environ.get("ARBITER_OIDC_USERNAME_CLAIM", "preferred_username")
ARBITER_OIDC_EMAIL_CLAIM = os.environ.get("ARBITER_OIDC_EMAIL_CLAIM", "email")
ARBITER_OIDC_GIVEN_NAME_CLAIM = os.environ.get("ARBITER_OIDC_GIVEN_NAME_CLAIM", "given_name")
ARBITER_OIDC_FAMILY_NAME_CLAIM = os.environ.get("ARBITER_OIDC_FAMILY_NAME_CLAIM", "family_name")
ARBITER_OIDC_LOCALE_CLAIM = os.environ.get("ARBITER_OIDC_LOCALE_CLAIM", "locale")
# The claim that lists the person's directory groups (empty: groups are not used). When set,
# a token without it is refused: a missing claim must not read as "in no group".
ARBITER_OIDC_GROUPS_CLAIM = os.environ.get("ARBITER_OIDC_GROUPS_CLAIM", "groups")


def env_mapping(name: str) -> dict[str, list[str]]:
    """``group=value,group=value`` → {group: [value, ...]} (a group may map to several)."""
    result: dict[str, list[str]] = {}
    for item in env_list(name):
        group, sep, value = item.partition("=")
        if not sep or not group.strip() or not value.strip():
            raise ImproperlyConfigured(f"{name}: write each entry as group=value, not {item!r}.")
        result.setdefault(group.strip(), []).append(value.strip())
    return result


# Directory groups → project memberships: "group=project-slug[:lead]". The directory decides
# the memberships of the projects named here (added and removed at each sign-in, signed by
# Arbiter with the issuer, claim and group in the history); other projects are left alone.
ARBITER_OIDC_PROJECT_GROUPS = env_mapping("ARBITER_OIDC_PROJECT_GROUPS")
# Directory groups that ask for a site role or a tier's ownership: "group=ops",
# "group=approver", "group=tier:<slug>". A claim never grants them: it proposes a rule change
# that a second person approves. Leaving a site role's group takes the role away at once.
ARBITER_OIDC_ROLE_GROUPS = env_mapping("ARBITER_OIDC_ROLE_GROUPS")
# Before an API token or a page session of a person linked to the provider is accepted
# (whatever their password), Arbiter asks the provider (a refresh-token grant) whether the
# account still exists, at most this often.
ARBITER_OIDC_RECHECK_MINUTES = int(os.environ.get("ARBITER_OIDC_RECHECK_MINUTES", "15"))
# Everyone linked to the provider who still holds a token or a session is asked about every
# minute once their last answer is older than the interval (less the minute): a person
# disabled there loses their tokens within ARBITER_OIDC_RECHECK_MINUTES, used or not.
CELERY_BEAT_SCHEDULE["identities-recheck"] = {
    "task": "governance.tasks.identities_recheck",
    "schedule": timedelta(minutes=1),
}
# Local passwords (the demo's accounts). Off: only the break-glass accounts named in
# ARBITER_BREAK_GLASS_USERS may still sign in with a password.
ARBITER_LOCAL_LOGIN = env_bool("ARBITER_LOCAL_LOGIN", True)
ARBITER_BREAK_GLASS_USERS = env_list("ARBITER_BREAK_GLASS_USERS")


def provider_form_action(policy: dict, issuer: str, end_session: str = "") -> dict:
    """The CSP with the provider's origins in ``form-action``: signing out (a form) is
    redirected to the provider's end-session endpoint, which browsers check against it."""
    from urllib.parse import urlsplit

    origins = []
    for url in (issuer, end_session):
        parts = urlsplit(url)
        if parts.scheme and parts.netloc:
            origins.append(f"{parts.scheme}://{parts.netloc}")
    directives = dict(policy["DIRECTIVES"])
    directives["form-action"] = list(dict.fromkeys([*directives["form-action"], *origins]))
    return {**policy, "DIRECTIVES": directives}


if ARBITER_OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("governance.toolkit.oidc.ProviderBackend")
    CONTENT_SECURITY_POLICY = provider_form_action(
        CONTENT_SECURITY_POLICY, ARBITER_OIDC_ISSUER, OIDC_OP_END_SESSION_ENDPOINT
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # A refused request (4xx) is one line in the log, never a traceback.
    "filters": {
        "client_errors": {"()": "governance.toolkit.console.ClientErrorsWithoutTraceback"},
        "require_debug_false": {"()": "django.utils.log.RequireDebugFalse"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["client_errors"]},
        "mail_admins": {
            "level": "ERROR",
            "filters": ["require_debug_false"],
            "class": "django.utils.log.AdminEmailHandler",
        },
    },
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
    # Django's own loggers print once, through the same filtered handler.
    "loggers": {
        "django": {"handlers": ["console", "mail_admins"], "level": "INFO", "propagate": False}
    },
}
