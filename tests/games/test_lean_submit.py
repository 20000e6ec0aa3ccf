"""The lean guess POST: the statements it costs (pinned, on SQLite and
PostgreSQL alike), what the cache serves, and the issue-12 refusals that live
in ``submit`` (keys scoped to player and round, repeated guesses, each
refused with nothing charged; a repeated emoji is allowed, as the rules say)."""
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from echomq.contrib import django as emq_django
from games import errors, locks, wallet
from games.guesses import submit
from games.models import Guess, LedgerEntry

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
OTHER = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]
# SQLite: BEGIN (here a SAVEPOINT), the round with my locks, the wallet UPDATE …
# RETURNING, the ledger INSERT, the guess INSERT, COMMIT (RELEASE SAVEPOINT).
# PostgreSQL: one statement (data-modifying CTEs that also check the round is
# open and my locks agree), in autocommit -- here inside the test's
# transaction, so within a SAVEPOINT and its RELEASE.
GUESS_POST_STATEMENTS = 3 if connection.vendor == "postgresql" else 6
FREE_GUESS_STATEMENTS = 4  # no wallet: BEGIN, the round, the guess INSERT, COMMIT


def form(emojis, token=None):
    data = {f"slot{i}": e for i, e in enumerate(emojis)}
    if token:
        data["token"] = token
    return data


def charges(player) -> int:
    return LedgerEntry.objects.filter(player=player, reason="guess").count()


@pytest.fixture
def signed_in(client, make_player):
    p = make_player("lean", keys=20)
    client.force_login(p.user)
    return client, p


def test_guess_post_statements_are_pinned_and_no_session_user_or_player_query(signed_in, make_round):
    client, p = signed_in
    rnd = make_round(secret=S)
    locks.set_lock(p, rnd, 0, "🐼")  # the locks come with the round, in the same statement
    assert client.post(f"/rounds/{rnd.pk}/guess/", form(OTHER, "a" * 32)).status_code == 302  # warms the caches
    with CaptureQueriesContext(connection) as ctx:
        resp = client.post(f"/rounds/{rnd.pk}/guess/", form(["🐼"] + S[1:], "b" * 32))
    assert resp.status_code == 302
    statements = [q["sql"] for q in ctx.captured_queries]
    assert len(statements) == GUESS_POST_STATEMENTS, "\n".join(statements)
    assert not any(t in s for s in statements for t in ("django_session", "auth_user", "games_player"))
    reads = sum(s.lstrip().upper().startswith("SELECT") for s in statements)
    assert reads == (0 if connection.vendor == "postgresql" else 1)  # PostgreSQL: the checks ride in the WITH
    assert Guess.objects.filter(player=p).count() == 2 and charges(p) == 2
    assert wallet.mismatched_wallets() == []


def test_free_guess_skips_the_wallet(signed_in, make_round):
    client, p = signed_in
    rnd = make_round(secret=S, currency="clips", guess_price=0)
    client.post(f"/rounds/{rnd.pk}/guess/", form(OTHER))
    with CaptureQueriesContext(connection) as ctx:
        assert client.post(f"/rounds/{rnd.pk}/guess/", form(S[::-1])).status_code == 302
    assert len(ctx) == FREE_GUESS_STATEMENTS, "\n".join(q["sql"] for q in ctx.captured_queries)
    assert charges(p) == 0 and Guess.objects.filter(player=p).count() == 2


def test_a_password_change_drops_the_cached_user(signed_in, make_round):
    client, p = signed_in
    rnd = make_round(secret=S)
    assert client.get(f"/rounds/{rnd.pk}/").status_code == 200  # user now cached
    p.user.set_password("a new and long passphrase")
    p.user.save()
    resp = client.get(f"/rounds/{rnd.pk}/")
    assert resp.status_code == 302 and "/login/" in resp["Location"]  # the old session no longer matches


def test_valkey_down_the_guess_post_still_works_from_the_database(signed_in, make_round):
    client, p = signed_in
    rnd = make_round(secret=S)
    emq_django.reset_client("redis://127.0.0.1:1/0")  # nothing listens there
    resp = client.post(f"/rounds/{rnd.pk}/guess/", form(S[::-1], "c" * 32))
    assert resp.status_code == 302
    assert Guess.objects.get(player=p).status == "queued" and charges(p) == 1  # the relay sends it later


def test_a_token_from_round_a_posted_to_round_b_records_a_guess_in_b(signed_in, make_round):
    client, p = signed_in
    a, b = make_round(secret=S), make_round(secret=S)
    token = "d" * 32
    assert client.post(f"/rounds/{a.pk}/guess/", form(OTHER, token)).status_code == 302
    resp = client.post(f"/rounds/{b.pk}/guess/", form(OTHER, token), follow=True)
    assert "is in, for 1 key" in resp.content.decode()
    assert Guess.objects.filter(player=p, round=b).count() == 1 == Guess.objects.filter(player=p, round=a).count()
    assert charges(p) == 2
    # and within one round the token still answers the first guess, charging nothing
    assert client.post(f"/rounds/{b.pk}/guess/", form(S[::-1], token)).status_code == 302
    assert Guess.objects.filter(player=p, round=b).count() == 1 and charges(p) == 2


def test_a_guess_may_repeat_an_emoji_and_is_charged_and_scored(signed_in, make_round, django_capture_on_commit_callbacks):
    """The rules: every emoji on the keyboard, "a guess may repeat an emoji".
    It is charged once and scored position by position (it cannot reach 600)."""
    from games.workers import score_guess

    from tests.games.conftest import drain

    client, p = signed_in
    rnd = make_round(secret=S)
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/rounds/{rnd.pk}/guess/", form(["🐶", "🐶"] + S[2:], "ab" * 16))
    assert resp.status_code == 302
    locks.set_lock(p, rnd, 5, "🐶")  # a lock can make a repeat too
    with django_capture_on_commit_callbacks(execute=True):
        submit(p, rnd, S)
    drain("cm", score_guess)
    totals = sorted(Guess.objects.filter(player=p).values_list("total", flat=True))
    # 🐶 🐶 🐭 🐹 🐰 🦊: 100 + (100 - 20) + 4 x 100 = 580; 🐶 🐱 🐭 🐹 🐰 🐶: 5 x 100 + (100 - 100) = 500
    assert totals == [500, 580] and charges(p) == 2 and wallet.mismatched_wallets() == []


def test_exact_repeat_of_my_guess_is_refused_but_others_may_guess_it(signed_in, make_round, make_player):
    client, p = signed_in
    rnd = make_round(secret=S)
    assert client.post(f"/rounds/{rnd.pk}/guess/", form(OTHER)).status_code == 302
    before = wallet.balances(p)
    resp = client.post(f"/rounds/{rnd.pk}/guess/", form(OTHER))
    assert resp.status_code == 303 and "You already guessed" in client.get(resp["Location"]).content.decode()
    locks.set_lock(p, rnd, 0, "🐼")  # the same final guess through a lock is the same guess
    with pytest.raises(errors.RepeatedGuess):
        submit(p, rnd, ["🐶"] + OTHER[1:])
    assert wallet.balances(p) == before and charges(p) == 1 and Guess.objects.count() == 1
    submit(make_player(keys=1), rnd, OTHER)  # another player's same guess is fine
    submit(p, make_round(secret=S), OTHER)   # and so is mine in another round
    assert Guess.objects.count() == 3


def test_a_key_replayed_after_its_guess_answers_the_first_even_when_refused_now(signed_in, make_round):
    p = signed_in[1]
    rnd = make_round(secret=S, guess_price=20)
    first = submit(p, rnd, OTHER, idempotency_key="k1")  # spends all 20 keys
    assert submit(p, rnd, OTHER, idempotency_key="k1").pk == first.pk  # not NotEnoughFunds
    assert charges(p) == 1 and wallet.balances(p)["keys"] == 0


def _in_thread_until_it_waits_on_a_lock(work):
    """Start ``work`` on a thread with its own connection; return once its
    backend waits on a row lock (PostgreSQL's own view, not a clock)."""
    out, pid = {}, []

    def run():
        try:
            with connection.cursor() as c:
                c.execute("SELECT pg_backend_pid()")
                pid.append(c.fetchone()[0])
            out["value"] = work()
        except Exception as exc:
            out["value"] = exc
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    with connection.cursor() as c:
        for _ in range(10_000):
            c.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction sees one cached snapshot
            c.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid[0] if pid else 0])
            row = c.fetchone()
            if row and row[0] == "Lock":
                return t, out
            t.join(0.01)
    raise AssertionError(f"the thread never waited on a lock: {out}")


def _needs_postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL's row locks (SQLite runs one writer at a time); "
                    "run with DATABASE_URL=postgres://...")


@pytest.mark.django_db(transaction=True)
def test_a_submit_racing_settlement_waits_and_then_is_refused(make_player, make_round):
    """Settlement holds the round FOR UPDATE: a submit's share lock waits, then
    sees the round closed and changes nothing -- the guess cannot slip in
    after settlement read the round's guesses."""
    _needs_postgres()
    from games.models import Round

    p = make_player(keys=5)
    rnd = make_round(secret=S)
    with transaction.atomic():
        Round.objects.select_for_update(no_key=True).get(pk=rnd.pk)  # what settle_round does first
        t, out = _in_thread_until_it_waits_on_a_lock(lambda: submit(p, rnd.pk, OTHER))
        Round.objects.filter(pk=rnd.pk).update(status="settled")
    t.join(30)
    assert isinstance(out["value"], errors.RoundClosed), out
    assert not Guess.objects.exists() and charges(p) == 0 and wallet.balances(p)["keys"] == 5


@pytest.mark.django_db(transaction=True)
def test_submits_to_one_round_do_not_wait_for_each_other(make_player, make_round):
    """Two players' submits share the round row: one open submit transaction
    does not hold up another player's."""
    _needs_postgres()
    a, b = make_player(keys=5), make_player(keys=5)
    rnd = make_round(secret=S)
    done = threading.Event()

    def other():
        try:
            submit(b, rnd.pk, OTHER)
            done.set()
        finally:
            connection.close()

    with transaction.atomic():
        submit(a, rnd.pk, OTHER)  # a's transaction stays open, holding its share lock
        t = threading.Thread(target=other)
        t.start()
        assert done.wait(30), "b's submit waited on a's"
    t.join(30)
    assert Guess.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_submit_waiting_on_the_wallet_lock_answers_the_first_guess(make_player, make_round):
    """Deterministic race for one key: A has charged and inserted but not
    committed; B (same key) must wait, then answer A's guess and charge
    nothing. Fails if the check that replaced the re-read under the wallet
    lock (the unique key and the IntegrityError answer) is removed."""
    _needs_postgres()
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    with transaction.atomic():
        first = submit(p, rnd.pk, OTHER, idempotency_key="same").pk
        t, out = _in_thread_until_it_waits_on_a_lock(lambda: submit(p, rnd.pk, S[::-1], idempotency_key="same").pk)
    t.join(30)
    assert out["value"] == first, out
    assert Guess.objects.filter(player=p).count() == 1 and charges(p) == 1
    assert wallet.balances(p)["keys"] == 4 == wallet.ledger_sums(p)["keys"]



def test_the_rows_submit_writes_read_back_as_saved(make_player, make_round):
    """What submit writes (the one statement, or the transaction's saves)
    reads back as it was built: every field of the guess and its ledger
    row reads back equal."""
    p = make_player(keys=5)
    rnd = make_round(secret=S)  # the whole animals set: a ZWJ sequence is one emoji
    g = submit(p, rnd, ["🐕\u200d🦺"] + S[1:], idempotency_key="k")
    stored = Guess.objects.get(pk=g.pk)
    assert {f.name: getattr(stored, f.attname) for f in Guess._meta.concrete_fields} == {
        f.name: getattr(g, f.attname) for f in Guess._meta.concrete_fields}
    charge = LedgerEntry.objects.get(reason="guess", reference=g.pk)
    assert (charge.delta, charge.balance_after, charge.currency) == (-1, 4, "keys")
    assert charge.created_at is not None and stored.created_at is not None


def test_with_no_valkey_at_all_signing_in_and_guessing_work_from_the_database(client, make_player, make_round,
                                                                              settings):
    """Before the embedded Valkey is started (nothing configured, none
    running) the cache is a miss, never an error: a new session is created,
    the guess is taken (it stays queued for the relay)."""
    emq_django.reset_client(None)
    settings.ECHOMQ = {**settings.ECHOMQ, "URL": "", "EMBEDDED_DIR": "/nonexistent/valkey"}
    p = make_player("novalkey", keys=3)
    client.force_login(p.user)
    rnd = make_round(secret=S)
    emq_django.reset_client("redis://127.0.0.1:1/0")  # the queue, too, is unreachable
    assert client.post(f"/rounds/{rnd.pk}/guess/", form(OTHER, "e" * 32)).status_code == 302
    assert charges(p) == 1


@pytest.mark.django_db(transaction=True)
def test_settling_while_a_first_guess_is_scored_does_not_deadlock(make_player, make_round):
    """The score worker holds a player's first guess in the round (its batch
    lock) when settlement takes the round and waits for that guess; the
    worker then writes the player's round entry, whose foreign-key check
    share-locks the round. Settlement's round lock must not block that
    check (it did with FOR UPDATE: a deadlock, one side rolled back)."""
    _needs_postgres()
    from games import settlement
    from games.models import Round, RoundEntry
    from games.scoring import apply_score, lock_batch, score_many

    p = make_player(keys=5)
    rnd = make_round(secret=S, prize_pool=10)
    g = submit(p, rnd.pk, OTHER)
    with transaction.atomic():
        got = lock_batch({g.pk: []})[g.pk]  # the worker's first statement: the guess row, FOR UPDATE
        t, out = _in_thread_until_it_waits_on_a_lock(lambda: settlement.settle_round(rnd.pk, force=True).action)
        apply_score(got, got.round)
        score_many([got])  # the round entry INSERT: its FK check must not wait on settlement
    t.join(30)
    assert out["value"] == "settled", out
    assert Round.objects.get(pk=rnd.pk).status == "settled"
    assert RoundEntry.objects.get(round=rnd, player=p).attempts == 1
    assert Guess.objects.get(pk=g.pk).status == "scored"


@pytest.mark.parametrize("change", ["price", "currency"])
def test_a_round_repriced_outside_the_admin_is_charged_as_it_is_now(make_player, make_round, change):
    """Each process caches a round's price and currency for its
    one-statement charge (PostgreSQL). A change made with a plain UPDATE --
    a shell, a migration, not the admin -- must not be charged at the old
    values: the statement refuses, and the transaction reads the row (and
    refreshes the cache). On SQLite the transaction always reads the row."""
    from games.models import Round

    p = make_player(keys=10, clips=10)
    rnd = make_round(secret=S)
    first = submit(p, rnd.pk, OTHER)  # the process caches the round now
    assert (first.price, first.currency) == (1, "keys")
    if change == "price":
        Round.objects.filter(pk=rnd.pk).update(guess_price=3)
        g = submit(p, rnd.pk, S[::-1])
        assert (g.price, g.currency) == (3, "keys")
        assert LedgerEntry.objects.get(reference=g.pk).delta == -3 and wallet.balances(p)["keys"] == 10 - 1 - 3
    else:
        Round.objects.filter(pk=rnd.pk).update(currency="clips", guess_price=2)
        g = submit(p, rnd.pk, S[::-1])
        assert (g.price, g.currency) == (2, "clips")
        assert wallet.balances(p) == {"keys": 9, "clips": 8, "diamonds": 0}
    assert wallet.mismatched_wallets() == []
    with CaptureQueriesContext(connection) as ctx:
        g = submit(p, rnd.pk, [S[1]] * 6)  # the next guess: the cache says what the row says, one statement again
    assert len(ctx) == GUESS_POST_STATEMENTS, "\n".join(q["sql"] for q in ctx.captured_queries)
    assert (g.price, g.currency) == {"price": (3, "keys"), "currency": (2, "clips")}[change]
    assert wallet.mismatched_wallets() == []
