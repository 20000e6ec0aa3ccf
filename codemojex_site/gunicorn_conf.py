"""gunicorn's settings for the site:
``gunicorn -c python:codemojex_site.gunicorn_conf codemojex_site.wsgi``.

Command-line flags still win (``--bind``, ``--workers``). What this adds:

* gunicorn's own lines in the site's format (``LOG_FORMAT``: ``line``, or
  ``json`` for one JSON object per line), and no access log: the site logs
  each request itself, with its request id, and leaves the health checks out
  (``codemojex_site.logs.RequestLog``).
* ``graceful_timeout``: after SIGTERM a worker finishes the requests in
  flight for up to ``GRACEFUL_TIMEOUT`` seconds (default 30; the systemd
  unit's stop timeout is longer).
* ``workers`` from ``WEB_CONCURRENCY`` (gunicorn's own variable; default 2).
* No control socket (gunicorn 27's runtime interface, by default one path in
  the user's home shared by every instance): nothing here uses it.
"""
import os

from codemojex_site.logs import gunicorn_config

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
graceful_timeout = int(os.environ.get("GRACEFUL_TIMEOUT", "30"))
accesslog = None
control_socket_disable = True  # a gunicorn older than 27 ignores the name
logconfig_dict = gunicorn_config(os.environ.get("LOG_FORMAT", "line"))
