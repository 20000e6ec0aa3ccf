"""Branded primary keys.

Every game record is named by a 14-byte branded id (``RND…``, ``PLR…``,
``GES…``) minted in Python, so a row has its name before it reaches the
database, the name sorts by creation time, and the same string can name a
queue lane or appear in a job payload without a lookup.
"""
from __future__ import annotations

from django.db import models
from django.utils.deconstruct import deconstructible

from echomq import ids


@deconstructible
class Mint:
    """A picklable, migration-friendly default that mints an id of one brand."""

    def __init__(self, brand: str):
        ids.encode(brand, 0)  # validates the brand early
        self.brand = brand

    def __call__(self) -> str:
        return ids.mint(self.brand)

    def __eq__(self, other) -> bool:
        return isinstance(other, Mint) and other.brand == self.brand

    def __hash__(self) -> int:
        return hash(("Mint", self.brand))


class BrandedIdField(models.CharField):
    """A CharField(14) holding a branded id of ``brand``, minted by default.

    Ids are looked up whole, never by pattern: on PostgreSQL neither this
    column nor a foreign key to it gets Django's extra ``varchar_pattern_ops``
    index (``codemojex_site/db/schema.py``)."""

    pattern_index = False

    def __init__(self, brand: str = "XXX", *args, **kwargs):
        self.brand = brand
        kwargs["max_length"] = ids.LENGTH
        kwargs.setdefault("default", Mint(brand))
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("max_length", None)
        if kwargs.get("default") == Mint(self.brand):
            kwargs.pop("default")
        if kwargs.get("editable") is False:
            kwargs.pop("editable")
        kwargs["brand"] = self.brand
        return name, path, args, kwargs
