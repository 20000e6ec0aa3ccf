"""The project's settings plus the bench's bare view (``urls``); served over
plain HTTP on loopback, so cookies are not Secure-only."""
from codemojex_site.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.pipeline.urls"
DEBUG = False
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
# The bare view's own alias keeps one connection per worker in every run, so
# the floor the ratios are taken against does not move with the project's
# connection settings.
DATABASES["bare"] = {**DATABASES["default"], "CONN_MAX_AGE": 600, "CONN_HEALTH_CHECKS": False}  # noqa: F405
# 200 players post faster at saturation than the 3 guesses/s the game lets
# one player send, and a refused 429 is not the path being measured. The
# limit is still counted on every POST (the same script call), only higher.
RATE_LIMITS = {**RATE_LIMITS, "guess": "20/s"}  # noqa: F405
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "root": {"level": "WARNING"}}
