"""``python -m echomq.conformance --url redis://host:port/db [--cluster]``

Checks the server at ``--url`` with the bundle in ``lua/`` against every
vector in ``lua/conformance/``: first the coverage (see ``runner.coverage``),
then each case, one line per case. Exits 0 when everything passed, 1 when a
case failed or the coverage has a gap, 2 when the server cannot be reached.
The vectors use queue ``conformance`` (keys ``emq:{conformance}:*``): the
runner deletes that queue's keys before and after each case.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import redis

from ..embedded import redact
from ..errors import UNAVAILABLE
from . import runner


def connect(url: str, cluster: bool):
    if cluster:
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(url, socket_timeout=10)
    return redis.Redis.from_url(url, socket_timeout=10)


def describe(client) -> str:
    info = client.info("server")
    if isinstance(next(iter(info.values()), None), dict):  # a cluster answers per node
        info = next(iter(info.values()))
    if info.get("valkey_version"):
        return f"valkey {info['valkey_version']}"
    return f"redis {info.get('redis_version', '?')}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echomq.conformance", description=__doc__.split("\n\n")[1])
    parser.add_argument("--url", required=True, help="the server to check, e.g. redis://127.0.0.1:6379/8")
    parser.add_argument("--cluster", action="store_true", help="the URL names a node of a cluster")
    parser.add_argument("--only", help="run the cases whose script/name contains this text")
    parser.add_argument("--vectors", type=Path, default=runner.VECTORS_DIR,
                        help="the vector files (default: lua/conformance)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    docs = runner.load_vectors(args.vectors)
    gaps = runner.coverage(docs)
    try:
        client = connect(args.url, args.cluster)
        total = sum(len(d["cases"]) for d in docs.values())
        print(f"echomq conformance: {len(docs)} scripts, {total} cases, on {redact(args.url)} ({describe(client)})",
              flush=True)

        def report(result):
            if result.ok and not args.quiet:
                print(f"ok    {result.script}/{result.name}", flush=True)
            elif not result.ok:
                print(f"FAIL  {result.script}/{result.name}: {result.rule}", flush=True)
                for diff in result.diffs:
                    print(f"        {diff}", flush=True)

        results = runner.run(client, docs, only=args.only, report=report)
    except UNAVAILABLE as exc:
        print(f"cannot reach {redact(args.url)}: {exc}", file=sys.stderr)
        return 2
    for gap in gaps:
        print(f"coverage: {gap}")
    if not gaps:
        print("coverage: every script has vectors; every error code it can answer is answered")
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed or gaps or not results else 0


if __name__ == "__main__":
    sys.exit(main())
