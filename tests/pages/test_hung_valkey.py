"""A Valkey that stops answering (a hung host, SIGSTOP) costs a page one
short timeout per client, not four in a row: pages still answer, from the
database, and no request waits out redis-py's default retries."""
import os
import signal
import time

import pytest

from echomq.contrib import django as emq_django
from echomq.contrib.django import failfast
from tests.conftest import Server

pytestmark = pytest.mark.django_db


@pytest.fixture
def hung():
    server = Server()
    os.kill(server.proc.pid, signal.SIGSTOP)  # accepts connections (the kernel does), never answers
    yield server
    os.kill(server.proc.pid, signal.SIGCONT)
    server.stop()
    failfast.forget()


def test_pages_answer_while_valkey_hangs(play, make_round, hung, settings):
    rnd = make_round()
    assert play.get(f"/rounds/{rnd.pk}/").status_code == 200  # session and identity cached, on the good server
    settings.ECHOMQ = {**settings.ECHOMQ, "SOCKET_TIMEOUT": 1.0}
    emq_django.reset_client(hung.url)  # the queue client and the cache both look there now
    started = time.monotonic()
    page = play.get(f"/rounds/{rnd.pk}/")
    spent = time.monotonic() - started
    assert page.status_code == 200 and "Live view unavailable" in page.content.decode()
    # one timeout (1 s), then every other call fails fast: not six calls x four attempts x 1 s
    assert spent < 3, f"a page waited {spent:.1f}s on a hung Valkey"
    started = time.monotonic()
    assert play.get(f"/rounds/{rnd.pk}/").status_code == 200
    assert time.monotonic() - started < 1, "the next page waited again"


def test_a_server_that_answers_again_is_used_again_after_the_pause(hung):
    import redis

    client = redis.Redis.from_url(hung.url, socket_timeout=0.5, connection_class=failfast.FailFastConnection)
    with pytest.raises(redis.exceptions.TimeoutError):
        client.ping()
    with pytest.raises(redis.exceptions.ConnectionError, match="not waiting on it again"):
        client.ping()  # at once: the pause is on
    os.kill(hung.proc.pid, signal.SIGCONT)
    for key in list(failfast._hung_until):
        failfast._hung_until[key] = 0.0  # the pause is over
    assert client.ping() is True and not failfast._hung_until
