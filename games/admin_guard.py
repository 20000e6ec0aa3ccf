"""What keeps the admin console honest: secrets stay sealed, query strings
are checked before any query runs, and actions check their permission.

*Sealed* data is what would let someone read or infer a round's secret
before it is revealed: the secret and nonce themselves, a guess's emojis
and breakdown (``found_at`` marks the secret's positions), a blind round's
totals, a lock's emoji. Pages show it only once the round is settled
(``Round.revealed``); nobody can filter, search or sort by it at all, at any
time, because a filter over a list spans open rounds too.

A changelist accepts only the query parameters its own controls make: its
``list_filter`` parameters, the search box ``q`` (plain text), ``o`` naming
sortable columns, ``p`` a page number. Anything else -- an unknown or sealed
lookup, a regex, a NUL byte, a page past the end -- is a 400 page in the
admin's look, before the database sees it.
"""
from __future__ import annotations

import re

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, ERROR_FLAG, ORDER_VAR, PAGE_VAR, SEARCH_VAR
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.template.response import TemplateResponse

from .admin_forms import SafeJSONField
from .models import Guess, Lock, Round, RoundEntry

# model -> fields no list may filter, search or sort by, and no page shows
# while the row's round is unrevealed.
SEALED = {
    Round: {"secret", "nonce"},
    Guess: {"emojis_sent", "emojis_final", "breakdown", "total"},
    RoundEntry: {"best_total", "best_guess"},
    Lock: {"emoji"},
}
HIDDEN = "sealed until the reveal"
# Django's own changelist controls, which carry no lookup.
CONTROLS = {"_popup", "_to_field", "_facets", ERROR_FLAG, ALL_VAR}
MAX_SEARCH = 200
MAX_PAGE = 1_000_000
_ORDER = re.compile(r"-?\d{1,3}(\.-?\d{1,3}){0,9}")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class Refused(Exception):
    """A request the console answers with a 400 page: ``message`` says why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def refusal(request, model_admin, message: str, status: int = 400):
    return TemplateResponse(request, "admin/games/refused.html", {
        **model_admin.admin_site.each_context(request), "opts": model_admin.opts,
        "title": "Not allowed" if status == 403 else "Bad request", "message": message, "status": status,
    }, status=status)


def sealed_field(model, lookup: str) -> str | None:
    """The sealed field ``lookup`` reaches (through relations too), or None."""
    for part in lookup.split(LOOKUP_SEP):
        if part in SEALED.get(model, ()):
            return f"{model._meta.model_name}.{part}"
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return None
        if not field.is_relation or field.related_model is None:
            return None
        model = field.related_model
    return None


def is_revealed(rnd: Round | None) -> bool:
    return rnd is not None and rnd.revealed


class GuardedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose lists take only their own controls' parameters,
    never expose sealed fields, and whose actions answer 403 to a user who
    lacks the action's permission (Django would only hide the action).
    Its JSON inputs refuse what Python's JSON parser cannot take."""

    formfield_overrides = {models.JSONField: {"form_class": SafeJSONField}}

    def filter_parameters(self, request) -> set[str]:
        """The query parameters this list's filters make."""
        out = set()
        for item in self.get_list_filter(request):
            name = item[0] if isinstance(item, (list, tuple)) else item
            if isinstance(name, type):  # a SimpleListFilter
                out.add(name.parameter_name)
                continue
            out |= {name, f"{name}__exact", f"{name}__isnull"}
            try:
                field = self.model._meta.get_field(name.split(LOOKUP_SEP)[0])
            except FieldDoesNotExist:
                continue
            if field.is_relation and field.related_model is not None:
                out.add(f"{name}__{field.related_model._meta.pk.name}__exact")
        return out

    def lookup_allowed(self, lookup, value, request):
        return lookup in self.filter_parameters(request) and sealed_field(self.model, lookup) is None

    def sortable_columns(self, request) -> dict[int, str]:
        """Column index -> what it sorts by, for the sortable columns only."""
        out = {}
        columns = list(self.get_list_display(request))
        if self.get_actions(request):  # as the ChangeList does: column 0 is the checkbox
            columns = ["action_checkbox", *columns]
        for i, name in enumerate(columns):
            order = None
            if name == "action_checkbox":
                order = None
            elif callable(name):
                order = getattr(name, "admin_order_field", None)
            elif hasattr(self, name):
                order = getattr(getattr(self, name), "admin_order_field", None)
            else:
                try:
                    self.model._meta.get_field(name)
                    order = name
                except FieldDoesNotExist:
                    order = None
            if order and sealed_field(self.model, str(order).lstrip("-")) is None:
                out[i] = str(order)
        return out

    def check_query(self, request) -> None:
        """Raise Refused for any parameter this list's controls do not make."""
        allowed = self.filter_parameters(request)
        columns = None
        for key, values in request.GET.lists():
            for value in values:
                if "\x00" in key or "\x00" in value:
                    raise Refused("The query string holds a NUL byte.")
                if "\ufffd" in key or "\ufffd" in value:
                    raise Refused("The query string is not valid UTF-8.")
            value = values[-1]
            if key == SEARCH_VAR:
                if len(value) > MAX_SEARCH or _CONTROL_CHARS.search(value):
                    raise Refused(f"Search for plain text of at most {MAX_SEARCH} characters.")
            elif key == PAGE_VAR:
                if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
                    raise Refused(f"p must be a page number, got {value!r}.")
            elif key == ORDER_VAR:
                if value == "":
                    continue
                if not _ORDER.fullmatch(value):
                    raise Refused(f"o must list column numbers like 2.-3, got {value!r}.")
                columns = self.sortable_columns(request) if columns is None else columns
                for part in value.split("."):
                    if int(part.lstrip("-")) not in columns:
                        raise Refused(f"Column {part.lstrip('-')} of this list cannot be sorted by.")
            elif key in CONTROLS:
                continue
            else:
                sealed = sealed_field(self.model, key)
                if sealed:
                    raise Refused(f"Filtering by {key} is refused: {sealed} is secret until its round "
                                  "is revealed, and a filter would let anyone infer it.")
                if key not in allowed:
                    known = ", ".join(sorted(allowed)) or "nothing"
                    raise Refused(f"Unknown filter {key!r}: this list filters by {known}.")
                self.check_filter_value(key, value)

    def check_filter_value(self, key: str, value: str) -> None:
        """A filter's value must be one its control can send."""
        name, _, lookup = key.rpartition(LOOKUP_SEP)
        if lookup == "isnull":
            if value not in ("True", "False", "1", "0"):
                raise Refused(f"{key} must be True or False, got {value!r}.")
            return
        if lookup != "exact":
            return
        try:
            field = self.model._meta.get_field(name)
        except FieldDoesNotExist:
            return  # a relation's pk: its own field checks it (a bad one is refused below)
        if field.choices and value not in {str(k) for k, _ in field.flatchoices}:
            raise Refused(f"{key} must be one of {', '.join(str(k) for k, _ in field.flatchoices)}, got {value!r}.")

    def get_changelist_instance(self, request):
        try:
            return super().get_changelist_instance(request)
        except IncorrectLookupParameters as exc:
            raise Refused(f"The list's filters or page do not fit ({exc or 'no such page'}).") from None

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        try:
            self.check_query(request)
            self.check_action_permission(request)
            return super().changelist_view(request, extra_context)
        except Refused as err:
            return refusal(request, self, err.message)

    def check_action_permission(self, request) -> None:
        """A POSTed action the user may not run is a 403, not a quiet
        "no action selected"."""
        if request.method != "POST" or "action" not in request.POST:
            return
        declared = {a.name for a in self._get_base_actions()}
        allowed = set(self.get_actions(request))
        for name in request.POST.getlist("action"):
            if name in declared and name not in allowed:
                raise PermissionDenied(f"You may not run {name!r} here.")


def hidden_words(rnd: Round | None) -> str:
    """Why a sealed value of ``rnd`` is not shown, in its kind's words: a
    blind round reveals; a classic one is settled (its totals are public
    meanwhile, so its guesses' emojis stay hidden); a voided one never shows."""
    if rnd is not None and rnd.status == Round.Status.VOIDED:
        return "hidden for good: the round was voided and its secret is never revealed"
    if rnd is not None and rnd.kind == Round.Kind.CLASSIC:
        return "hidden until the round is settled"
    return HIDDEN


def sealed_value(value, rnd: Round | None):
    """``value`` once ``rnd`` is revealed, else the words saying why not."""
    return value if is_revealed(rnd) else hidden_words(rnd)
