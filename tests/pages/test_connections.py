"""Persistent database connections (codemojex_site/db): a connection the
server ended between requests is replaced before the next request uses it,
and a healthy one is reused without a ``SELECT 1`` round trip.

Django's test client switches off the request signals that run the health
check, so these tests run the check as a request would: Django calls
``close_if_unusable_or_obsolete`` when a request starts, and the check
itself runs when the request first uses the connection."""
import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql import base as django_pg

from tests.games.procs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def on_postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (the health check is the PostgreSQL backend's); "
                    "run with DATABASE_URL=postgres://...")
    assert connection.health_check_enabled, "settings turn CONN_HEALTH_CHECKS on"


def a_request() -> int:
    """What a request does to the connection; answers its backend's pid."""
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_connection_the_server_ended_is_replaced_before_the_request_uses_it():
    pid = a_request()
    params = connection.get_connection_params()
    with psycopg.connect(**{k: params[k] for k in ("host", "port", "user", "dbname") if k in params},
                         autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        wait_for(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(),
                 timeout=10, what="the backend to exit")
    assert a_request() != pid  # no OperationalError: replaced first


def test_a_healthy_connection_is_reused_without_a_select_1(monkeypatch):
    asked = []
    monkeypatch.setattr(django_pg.DatabaseWrapper, "is_usable", lambda self: asked.append(1) or True)
    pid = a_request()
    assert [a_request() for _ in range(3)] == [pid] * 3 and asked == []


def test_a_statement_run_five_times_is_prepared_by_the_server():
    """prepare_threshold: psycopg prepares what a connection repeats (the
    guess POST's statement, the round page's), so PostgreSQL stops parsing
    and planning them."""
    assert connection.settings_dict["OPTIONS"]["prepare_threshold"] == 5
    sql = "SELECT %s::int + 41"
    with connection.cursor() as cursor:
        for _ in range(6):
            cursor.execute(sql, [1])
            assert cursor.fetchone() == (42,)
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        assert any("+ 41" in statement for (statement,) in cursor.fetchall())
