"""``games.rows``: rows read through a plain cursor come back exactly as the
ORM builds them (aware datetimes, decoded JSON, any field order), and rows
written through it read back as saved."""
import pytest
from django.db import connection

from games import locks
from games.guesses import submit
from games.models import Guess, Round
from games.rows import from_row, loaded

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def test_from_row_reads_a_subset_in_any_order_as_the_orm_does(make_player, make_round):
    g = submit(make_player(keys=3), make_round(secret=S), S[::-1], idempotency_key="k")
    fields = ("created_at", "emojis_final", "round_id", "id", "status")  # not the model's order
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(qn(f) for f in fields)} FROM {qn(Guess._meta.db_table)} WHERE id = %s",
                       [g.pk])
        row = cursor.fetchone()
    got = from_row(Guess, fields, row)
    want = Guess.objects.only(*fields).get(pk=g.pk)
    assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert got.created_at.tzinfo is not None and got.emojis_final == S[::-1]
    assert got.get_deferred_fields() == want.get_deferred_fields()


def test_round_with_locks_reads_the_round_as_the_orm_does(make_player, make_round):
    p, rnd = make_player(), make_round(secret=S)
    locks.set_lock(p, rnd, 2, "🐭")
    fields, mine = locks.round_with_locks(rnd.pk, p.pk)
    got = Round.from_db(connection.alias, locks.ROUND_FIELDS, fields)
    want = Round.objects.get(pk=rnd.pk)
    assert {f: getattr(got, f) for f in locks.ROUND_FIELDS} == {f: getattr(want, f) for f in locks.ROUND_FIELDS}
    assert mine == {2: "🐭"}
    assert locks.round_with_locks("RND" + "0" * 11, p.pk) == (None, {})


def _same_instance(got, want) -> None:
    """Two instances as alike as Django can tell: the same attributes (and
    so the same deferred fields) and the same state."""
    assert type(got) is type(want)
    mine, theirs = dict(got.__dict__), dict(want.__dict__)
    # (an empty fields_cache is the same as none: ModelState makes it on first use)
    state = [{k: v for k, v in vars(x.pop("_state")).items() if not (k == "fields_cache" and v == {})}
             for x in (mine, theirs)]
    assert state[0] == state[1]
    assert mine == theirs
    assert got.get_deferred_fields() == want.get_deferred_fields()
    assert (got._state.adding, got._state.db) == (False, "default")


def test_loaded_makes_what_from_db_makes(make_player, make_round):
    """``loaded`` builds instances without ``Model.__init__``: they hold the
    very attributes and state ``Model.from_db`` gives, a deferred field
    loads from the database, and a loaded instance saves as an update."""
    g = submit(make_player(keys=3), make_round(secret=S), S, idempotency_key="k")
    fields = ("id", "player_id", "round_id", "emojis_final", "status", "created_at")
    values = (g.id, g.player_id, g.round_id, S, "queued", g.created_at)
    got, = loaded(Guess, "default", fields, [values])
    _same_instance(got, Guess.from_db("default", fields, values))
    assert got.idempotency_key == "k"  # deferred: read from the row
    got.status = Guess.Status.REFUNDED
    got.save(update_fields=["status"])
    assert Guess.objects.get(pk=g.pk).status == Guess.Status.REFUNDED


def test_loaded_takes_djangos_road_for_a_model_with_init_receivers():
    """A receiver of ``pre_init`` or ``post_init`` for the model (an app
    that counts or fills instances) sees every instance ``loaded`` makes,
    as it would from ``from_db``."""
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    fields, values = ("id", "status"), ("GES1", "queued")
    post_init.connect(receiver, sender=Guess)
    try:
        got, = loaded(Guess, "default", fields, [values])
    finally:
        post_init.disconnect(receiver, sender=Guess)
    assert seen == [got]
    _same_instance(got, Guess.from_db("default", fields, values))
    assert loaded(Guess, "default", fields, [values])[0].status == "queued" and len(seen) == 1
