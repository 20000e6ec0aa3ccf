"""The WSGI entry point: what start-up made is frozen out of the
collector's way (``gc.freeze``), and the application still answers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import gc, io, sys
import codemojex_site.wsgi as w
frozen = gc.get_freeze_count()
status = []
env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
       "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1",
       "REMOTE_ADDR": "127.0.0.1", "wsgi.errors": sys.stderr}
body = b"".join(w.application(env, lambda s, h, e=None: status.append(s)))
print(frozen, status[0], gc.isenabled())
"""


def test_the_wsgi_process_freezes_what_start_up_made_and_still_serves(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), CODEMOJEX_DEV="1", CODEMOJEX_VAR_DIR=str(tmp_path))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    frozen, status, enabled = out.stdout.split()[-4], " ".join(out.stdout.split()[-3:-1]), out.stdout.split()[-1]
    assert int(frozen) > 10_000  # Django and the apps, frozen
    assert status == "200 OK" and enabled == "True"  # the collector still runs for what requests leave
