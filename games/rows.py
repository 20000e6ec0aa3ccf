"""Rows written and read through a plain cursor, for the hot paths.

The guess POST's one statement on PostgreSQL (``games.guesses``) writes the
guess and its ledger row itself; :func:`mark_saved` tells the instances so.
Reading, :func:`from_row` and :func:`convert` turn a plain cursor's row into
what the ORM would have made of it (the round page's one statement).
"""
from __future__ import annotations

from functools import cache

from django.db import connection


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

