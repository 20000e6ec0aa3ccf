"""Django's PostgreSQL schema editor, without pattern indexes on ids.

For every indexed ``varchar`` column Django adds a second index with
``varchar_pattern_ops``, for ``LIKE 'abc%'`` queries. Nothing here searches
ids by pattern (the admin's search is ``UPPER(…) LIKE``, which that index
cannot serve), yet on ``games_guess`` those indexes were four of twelve,
each written by every guess INSERT and by every scoring UPDATE. A field
(or the field a foreign key points to) with ``pattern_index = False`` gets
no such index.
"""
from __future__ import annotations

from django.db.backends.postgresql import schema


def wants_pattern_index(field) -> bool:
    target = field.target_field if field.is_relation else field
    return getattr(target, "pattern_index", True)


class DatabaseSchemaEditor(schema.DatabaseSchemaEditor):
    def _create_like_index_sql(self, model, field):
        if not wants_pattern_index(field):
            return None
        return super()._create_like_index_sql(model, field)
