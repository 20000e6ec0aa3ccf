"""Rows written and read through a plain cursor, for the hot paths.

The guess POST's one statement on PostgreSQL (``games.guesses``) writes the
guess and its ledger row itself; :func:`mark_saved` tells the instances so.
Reading, :func:`from_row` and :func:`convert` turn a plain cursor's row into
what the ORM would have made of it (the round page's one statement), and
:func:`loaded` makes many instances of one model the way ``Model.from_db``
does, for a fraction of the CPU (the round page's guesses).

:func:`loaded` leans on how Django builds an instance, not on a public API:
``Model.from_db`` calls ``Model.__init__``, which sends ``pre_init``, gives
the instance a fresh ``ModelState`` (``django.db.models.base``), sets the
loaded fields' attributes and sends ``post_init``; ``from_db`` then marks
the state loaded (``adding`` False, ``db`` the alias). :func:`loaded` does
the same directly -- a new object, the attributes in its ``__dict__``, a
``ModelState`` -- which costs a fifth of it per instance, and takes Django's
own road whenever that could differ: a model with a receiver of either
signal, or with its own ``__init__`` or ``from_db``. ``tests/games/test_rows``
compares what both make, and the canary (``tests/test_private_names.py``)
names ``ModelState``.
"""
from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init


def mark_saved(*objs) -> None:
    """The rows are in the database (a statement of ours wrote them)."""
    for obj in objs:
        obj._state.adding, obj._state.db = False, connection.alias


# -- reading ----------------------------------------------------------------
@cache
def _converters(model, attnames: tuple[str, ...], vendor: str) -> tuple:
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    out = []
    for name in attnames:
        col = by_attname[name].get_col(model._meta.db_table)
        out.append((col, tuple(connection.ops.get_db_converters(col) + col.get_db_converters(connection))))
    return tuple(out)


def convert(model, attnames: tuple[str, ...], values) -> list:
    """A plain cursor's values for these fields, as the ORM would read them:
    the same backend and field converters (aware datetimes on SQLite,
    decoded JSON everywhere), looked up once per model and columns."""
    out = []
    for (col, converters), value in zip(_converters(model, attnames, connection.vendor), values):
        for converter in converters:
            value = converter(value, col, connection)
        out.append(value)
    return out


@cache
def _model_order(model, attnames: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    position = {f.attname: i for i, f in enumerate(model._meta.concrete_fields)}
    order = tuple(sorted(range(len(attnames)), key=lambda i: position[attnames[i]]))
    return tuple(attnames[i] for i in order), order


def from_row(model, attnames: tuple[str, ...], values):
    """A model instance from a plain cursor's row (only these fields loaded;
    ``Model.from_db`` wants them in the model's field order)."""
    values = convert(model, attnames, values)
    names, order = _model_order(model, attnames)
    return model.from_db(connection.alias, names, [values[i] for i in order])


def _plain(model) -> bool:
    """Whether ``Model.from_db`` would do for ``model`` just what
    :func:`loaded` does: no ``__init__`` or ``from_db`` of its own, no
    receiver of ``pre_init`` or ``post_init`` for it (checked per call:
    receivers can connect at any time)."""
    return (model.__init__ is Model.__init__ and model.from_db.__func__ is Model.from_db.__func__
            and not pre_init.has_listeners(model) and not post_init.has_listeners(model))


def loaded(model, alias: str, attnames: tuple[str, ...], rows) -> list:
    """Instances of ``model`` as ``model.from_db(alias, attnames, values)``
    makes them, one per ``values`` in ``rows`` (each in ``attnames``' order,
    already converted; the model's other fields deferred), built directly
    (see the module's docstring); through ``from_db`` itself when the model
    is not plain."""
    if not _plain(model):
        return [model.from_db(alias, attnames, values) for values in rows]
    out = []
    new = model.__new__
    for values in rows:
        obj = new(model)
        state = ModelState()
        state.adding, state.db = False, alias
        obj.__dict__.update(zip(attnames, values), _state=state)
        out.append(obj)
    return out
