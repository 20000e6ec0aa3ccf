"""The console's named permissions and the three operator groups.

Every admin write checks one of these (never just ``is_staff``); GET pages
need the matching view permission. The groups are made by a data migration
(``sync_groups``, idempotent) and ``seed_demo`` puts one demo user in each.
Nobody, superuser included, can read an open round's secret through the
admin, so no group or permission unlocks it.
"""
from __future__ import annotations

GRANT = "games.grant_currency"        # Player: the "Grant currency…" action
SETTLE = "games.settle_round"         # Round: "Settle now" and "Void"
REBUILD = "games.rebuild_leaderboard" # Round: "Rebuild leaderboards" and the board's rebuild button
REFUND = "games.refund_guess"         # Guess: "remove and refund" on a queued guess's job
# RoundSchedule: Django's own add/change/delete (pausing is a change).
ADD_SCHEDULE, CHANGE_SCHEDULE, DELETE_SCHEDULE = (f"games.{a}_roundschedule" for a in ("add", "change", "delete"))
VIEW_QUEUES = "echomq.view_queues"
OPERATE_QUEUES = "echomq.operate_queues"

_VIEW_ALL = [f"games.view_{m}" for m in ("emojiset", "round", "player", "wallet", "ledgerentry", "guess",
                                          "roundentry", "lock", "notification", "operatoraction",
                                          "roundschedule")]

GROUPS: dict[str, list[str]] = {
    # Runs the game: makes and edits rounds and their schedules, settles and voids them, grants currency.
    "Game master": _VIEW_ALL + [
        "games.add_round", "games.change_round", SETTLE, REBUILD,
        ADD_SCHEDULE, CHANGE_SCHEDULE, DELETE_SCHEDULE,
        "games.add_emojiset", "games.change_emojiset",
        GRANT, REFUND, VIEW_QUEUES,
    ],
    # Answers players: reads everything, changes nothing (and sees no secret).
    "Support": _VIEW_ALL + [VIEW_QUEUES],
    # Keeps the queues moving: the dashboard's actions, and what a job links to.
    "Queue operator": ["games.view_round", "games.view_player", "games.view_guess", "games.view_operatoraction",
                       VIEW_QUEUES, OPERATE_QUEUES, REFUND],
}

def sync_groups(apps=None) -> None:
    """Create (or bring up to date) the three groups with exactly their
    permissions. ``apps`` is a migration's app registry, or None for the
    live one. A migration's registry may predate a model the groups name
    (0002 runs before RoundSchedule exists): those permissions are left
    for the later migration that syncs again; the live registry has them all."""
    historical = apps is not None
    if apps is None:
        from django.apps import apps
    _create_model_permissions(apps)
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    known = _defined_permissions(apps) if historical else None
    for name, codenames in GROUPS.items():
        perms = []
        for full in codenames:
            if known is not None and full not in known:
                continue
            app_label, codename = full.split(".")
            perms.append(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(perms)


def _create_model_permissions(apps) -> None:
    """Make the games models' permissions now, with their proper names, as
    post_migrate would after the last migration."""
    from django.contrib.auth.management import create_permissions

    for label in ("games", "echomq"):
        try:
            config = apps.get_app_config(label)
        except LookupError:
            continue
        had = getattr(config, "models_module", None)
        config.models_module = had or True  # a migration's AppConfigStub has none
        try:
            create_permissions(config, apps=apps, verbosity=0)
        finally:
            config.models_module = had


def _defined_permissions(apps) -> set[str]:
    """``app_label.codename`` of every permission the registry's models define."""
    out = set()
    for label in ("games", "echomq"):
        try:
            config = apps.get_app_config(label)
        except LookupError:
            continue
        for model in config.get_models():
            opts = model._meta
            out |= {f"{label}.{action}_{opts.model_name}" for action in opts.default_permissions}
            out |= {f"{label}.{codename}" for codename, _ in opts.permissions}
    return out
