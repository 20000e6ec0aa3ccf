"""Peer job queues for the bench: one small adapter module each.

Each adapter runs inside its own venv (see install.py) through
``python -m bench.peers.run <peer> fill|work ...`` and defines:

* ``DIST``: the distribution whose version is reported;
* ``CONFIGS``: {config name: description}; the first is the default;
* ``fill(url, n)``: enqueue n no-op jobs on queue ``bench``; returns a short
  description of the enqueue path used;
* ``work(url, n, concurrency, config, tally, ready)``: run ONE worker process
  whose no-op job calls ``tally.hit()``; call ``ready()`` right before the
  worker loop starts; block (the harness kills the process once the tally
  has printed its RESULT).
"""
PEERS = ("rq", "arq", "saq", "dramatiq", "huey", "celery", "bullmq")
QUEUE = "bench"
