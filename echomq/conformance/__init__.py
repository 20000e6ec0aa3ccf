"""Conformance vectors: the Lua bundle's behaviour as language-neutral data.

``lua/conformance/<script>.json`` holds, for every script of the bundle, cases
of the state of a queue before a call, the KEYS and ARGV sent, the reply or
error, and the exact state after, with clock rules for the values the server
clock makes (``format``). Any client in any runtime that loads the same
scripts can run them against a server: ``python -m echomq.conformance --url
redis://...`` does (``runner``), and so does the Node client in
``clients/node``. docs/protocol.md describes the format for other runtimes.

The cases are written by hand (``cases/<script>.py``, with ``dsl``) and their
outcomes recorded from a real server (``python -m echomq.conformance.generate``);
the recorded files are reviewed as the specification they are.
"""
