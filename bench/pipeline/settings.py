"""The project's settings plus the bench's bare view (``urls``); served over
plain HTTP on loopback, so cookies are not Secure-only."""
from codemojex_site.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.pipeline.urls"
DEBUG = False
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "root": {"level": "WARNING"}}
