"""The gunicorn worker class of the live process (``codemojex_site.asgi``):

    gunicorn -c python:codemojex_site.gunicorn_conf -k codemojex_site.live_worker.Worker codemojex_site.asgi:application

uvicorn's worker, with two settings its gunicorn flags do not reach:

* the ASGI lifespan on: the hub (the event reader) starts with the worker,
  so ``/readyz`` says whether it reads before the first stream opens;
* ``timeout_graceful_shutdown``: a stream never ends by itself, so after
  SIGTERM uvicorn would wait on them all until gunicorn's
  ``graceful_timeout`` and a kill. Streams are cut after
  ``STREAM_GRACE_S`` instead; each browser opens its stream again
  (``EventSource`` does, after the stream's ``retry``) on another worker
  or host, and polls meanwhile.
"""
from uvicorn_worker import UvicornWorker

STREAM_GRACE_S = 2


class Worker(UvicornWorker):
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "lifespan": "on", "timeout_graceful_shutdown": STREAM_GRACE_S}
