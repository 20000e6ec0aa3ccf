"""Lobby, round page, composing and submitting guesses, locks, the JSON
poll of my guesses, and the leaderboard.

Every POST answers with a redirect (post/redirect/get) on success, and on a
refusal re-renders the round page with the refusal in words and a 4xx
status; ``submit`` and ``set_lock`` change nothing when they refuse, so
nothing is ever charged for an error.
"""
from __future__ import annotations

import functools
import logging
import uuid
from datetime import timedelta
from urllib.parse import quote_plus

import echomq
from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpResponseNotModified, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template import loader
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from .. import engine, leaderboard, live, locks, payouts, push, rides, rounds, schedules, share
from .. import metrics as game_metrics
from ..errors import RepeatedGuess, RoundClosed, RoundExpired, RoundNotFound, SubmitError
from ..forms import ComposeForm, DraftForm, GuessForm, LockForm, compose as compose_draft
from ..guesses import submit
from ..models import Guess, Player, Round, RoundEntry
from ..wallet import DIAMONDS_PER_KEY
from .common import (MAX_GUESSES_SHOWN, amount, emoji_name, load_round_page, my_guesses_in, open_rounds,
                     player_required, remember_player, round_addresses, round_and_my_guesses)
from .common import url as common_url
from .pages import landing
from ..ratelimit import limited

log = logging.getLogger("games.views")

# How each refusal answers: the round or the wallet is in the wrong state
# (409, 402) or the guess itself is malformed (400).
ERROR_STATUS = {"no_round": 404, "closed": 409, "expired": 409, "insufficient_funds": 402, "repeated_guess": 409}
# Refusals of a well-formed guess that posting it again cannot change: the
# answer is a redirect back to the round page (post/redirect/get, so a
# reload does not post again), whose ``refused`` parameter names the reason
# and the page says it where the composer is. A malformed post (only a
# hand-made request, or too few emojis) is still a 400 page.
REFUSED = "refused"
REDIRECTED = {"repeated_guess", "insufficient_funds", "closed", "expired"}


def _get_round(round_id: str) -> Round:
    return get_object_or_404(Round, pk=round_id)


@functools.lru_cache(maxsize=512)
def _keyboard(round_id: str, keyboard: tuple[str, ...]) -> str:
    """The round's keyboard as HTML, one labelled button per key. A keyboard
    never changes after creation, so this is rendered once per round and
    process (it is most of the round page's markup)."""
    action = reverse("compose", args=[round_id])
    return format_html_join("", '<button type="submit" formaction="{}" name="key" value="{}" class="key" '
                            'aria-label="{}">{}</button>', ((action, e, emoji_name(e), e) for e in keyboard))


@functools.lru_cache(maxsize=8192)
def _slot(index: int, emoji: str, locked: bool, lock_url: str) -> SafeString:
    """One position of the composer (``games/_slot.html``): the field the
    form posts, the emoji shown and its lock button. A round has a few
    hundred distinct ones, so each is rendered once per process: the six
    were half of the round page's template work."""
    html = loader.get_template("games/_slot.html").template.render(
        lock_url=lock_url, s={"index": index, "number": index + 1, "emoji": emoji,
                              "name": emoji_name(emoji) if emoji else "", "locked": locked})
    return mark_safe(html)  # rendered (and escaped) by the template


_GUESS_ITEMS_MAX = 20_000
_guess_items: dict[tuple, SafeString] = {}


def _guess_item(row: dict) -> SafeString:
    """One of my guesses on the round page (``games/_guess.html``), from its
    ``guess_row``. What a row shows is fixed by its guess, status, total and
    whether the marks are out (a guess's emojis and breakdown never change),
    so each state of a guess is rendered once per process."""
    key = (row["id"], row["status"], row["total"], "marks" in row)
    html = _guess_items.get(key)
    if html is None:
        if len(_guess_items) >= _GUESS_ITEMS_MAX:
            _guess_items.clear()
        html = _guess_items[key] = mark_safe(loader.get_template("games/_guess.html").template.render(g=row))
    return html


def _slots(rnd: Round, slots: list[str], my_locks: dict[int, str]) -> list[SafeString]:
    lock_url = common_url("lock", rnd.pk)
    return [_slot(i, s, i in my_locks, lock_url) for i, s in enumerate(slots)]


def get_shows_round(view):
    """For the POST-only addresses of a round (guess, lock, compose): a GET
    -- reopening or reloading the address a refused post left in the
    browser -- goes to the round page instead of a bare 405."""
    @functools.wraps(view)
    def inner(request, round_id: str, *args, **kwargs):
        if request.method in ("GET", "HEAD"):
            return HttpResponseRedirect(common_url("round", round_id))
        return view(request, round_id, *args, **kwargs)
    return inner


@functools.lru_cache(maxsize=4096)
def _quoted(emoji: str) -> str:
    return quote_plus(emoji)


SENT = "sent"  # the query parameter naming the guess a POST just took


def _round_url(rnd: Round | str, slots: list[str] | None = None, *, sent: str = "", refused: str = "") -> str:
    """The round page, carrying the draft in the query so it survives the
    redirect (``urlencode`` of the slots, each emoji quoted once per process),
    and the id of the guess just sent, which the page confirms, or the
    code of the refusal, which the page explains."""
    url = common_url("round", rnd.pk if isinstance(rnd, Round) else rnd)
    query = "&".join(f"slot{i}={_quoted(s)}" for i, s in enumerate(slots or []) if s)
    for name, value in ((SENT, sent), (REFUSED, refused)):
        if value:
            query = f"{query}&{name}={value}" if query else f"{name}={value}"
    return f"{url}?{query}" if query else url


def _refusal_words(code: str | None, rnd: Round, slots: list[str], balance: int, guesses: list[Guess]) -> str:
    """What a redirected refusal (``REFUSED``) says, rebuilt from the page's
    own state; nothing when that state does not bear it out (a stale or
    hand-made address)."""
    if code == "repeated_guess" and rnd.is_open and all(slots) and any(g.emojis_final == slots for g in guesses):
        return RepeatedGuess(slots).message
    if code == "insufficient_funds" and rnd.is_open and balance < rnd.guess_price:
        return (f"Not enough {rnd.currency}: a guess costs {amount(rnd.guess_price, rnd.currency)}, "
                f"you have {amount(balance, rnd.currency)}.")
    if code == "closed" and rnd.status != Round.Status.OPEN:
        return RoundClosed(rnd.get_status_display()).message
    if code == "expired" and rnd.status == Round.Status.OPEN and not rnd.is_open:
        return RoundExpired().message
    return ""


def _sent_note(rnd: Round, guesses: list[Guess], sent: str | None) -> str:
    """"Guess … is in, for 1 key." when ``sent`` names one of my guesses
    here and was not refunded (the address a guess POST redirects to says
    which); else nothing.
    The redirect carries it, not a one-time message cookie: a signed cookie
    set on every guess and cleared on the next page cost the pair more CPU
    than anything else it does besides the database and Valkey."""
    if not sent:
        return ""
    g = next((g for g in guesses if g.id == sent), None)
    if g is None or g.status == Guess.Status.REFUNDED:  # (the round's price is fixed at creation)
        return ""
    return f"Guess {' '.join(g.emojis_final)} is in, for {amount(rnd.guess_price, rnd.currency)}."


def _sealed(rnd: Round) -> bool:
    """A blind round shows no totals until it is revealed."""
    return rnd.kind == Round.Kind.BLIND and not rnd.revealed


# What the poll reads of its round besides my guesses.
POLL_ROUND_FIELDS = ("id", "kind", "status", "ends_at")


def guess_row(g: Guess, rnd: Round) -> dict:
    """What a player may see of their own guess: the total once
    ``feedback_visible``; the per-position marks only once the round is
    settled (they say where each emoji sits in the secret)."""
    sealed = _sealed(rnd) and g.status != Guess.Status.REFUNDED
    scored = g.feedback_visible()
    row = {
        "id": g.id,
        "emojis": list(g.emojis_final),
        "status": "sealed" if sealed else g.status,
        "total": g.total if scored else None,
        "percentage": g.percentage if scored else None,
        "created_at": g.created_at.isoformat(),
    }
    if rnd.revealed and scored and g.breakdown:
        row["marks"] = share.marks(g.breakdown)
    return row


def _reveal(rnd: Round) -> dict | None:
    """Secret, nonce and the commitment check, once the round is settled."""
    secret = rnd.public_secret
    if secret is None:
        return None
    out = {"secret": [(e, emoji_name(e)) for e in secret], "nonce": rnd.public_nonce}
    if rnd.kind == Round.Kind.BLIND and rnd.public_nonce:
        out["check_ok"] = rounds.verify_commitment(rnd.commitment, secret, rnd.public_nonce)
        out["check_command"] = "printf '" + "\\x1e".join([*secret, rnd.public_nonce]) + "' | sha256sum"
    return out


def _with_my_unscored(snap: dict, guesses: list[Guess]) -> dict:
    """Count my guesses still being scored in the panel's figures: Valkey
    counts a guess (and its player) once it is scored, so right after my
    guess the panel said "no guesses in the last minute" while the lobby,
    a moment later, counted me as playing."""
    since = timezone.now() - timedelta(milliseconds=live.ACTIVITY_WINDOW_MS)
    queued = [g for g in guesses if g.status == Guess.Status.QUEUED]
    snap["recent"] += sum(1 for g in queued if g.created_at >= since)
    if queued and not any(g.status == Guess.Status.SCORED for g in guesses):
        snap["players"] += 1  # my first guess: not on the board yet
    return snap


def _live(request, rnd: Round, guesses: list[Guess]) -> dict | None:
    ride = rides.taken(request, "live", request.user.pk, request.player.pk)
    snap = live.snapshot(rnd, request.player.pk, request.user.get_username(), board=not _sealed(rnd), ride=ride)
    if snap is not None:
        _with_my_unscored(snap, guesses)
        snap["recent_words"] = live.activity_words(snap["recent"])
        snap["top_html"], snap["around_html"] = _board_rows(snap["top"]), _board_rows(snap["around"])
    return snap


_BOARD_ROW = '<li value="{}"{}><span>{}{}</span> <span class="num">{}</span></li>'


def _board_rows(rows: list[dict]) -> SafeString:
    """The live panel's rows of the board (``live.snapshot``'s ``top`` or
    ``around``), as the round page shows them: a rank, a name, a total,
    and which one is me. Put together here rather than in the template,
    where its half-dozen lookups per row were the page's longest loop."""
    if not rows:
        return SafeString()
    return mark_safe("".join(_BOARD_ROW.format(_digits(row["rank"]), ' class="me"' if row["me"] else "",
                                               escape(row["name"]), " (you)" if row["me"] else "",
                                               _digits(row["total"])) for row in rows))


def _digits(n) -> str:
    return str(n) if n.__class__ is int else escape(n)


def render_round(request, rnd: Round, *, slots: list[str] | None = None, error: str = "",
                 status: int = 200, my_locks: dict[int, str] | None = None, guesses: list[Guess] | None = None,
                 sent: str | None = None, refused: str | None = None):
    """The round page; also the answer to a refused POST (with ``error``).

    Its SQL is pinned by a test: the player (wallet, unread count), the
    round, my locks and my guesses come in one statement (``round_page``),
    the best total is taken from the guesses already read, and the players
    around you come from Valkey (``games.live``)."""
    player = request.player
    playable = rnd.is_open
    if not playable:
        my_locks = {}
    elif my_locks is None:
        my_locks = locks.locks_for(player.pk, rnd.pk)
    slots = compose_draft(slots or [""] * engine.SIZE, my_locks)
    guesses = my_guesses_in(rnd, player.pk) if guesses is None else guesses
    rows = [guess_row(g, rnd) for g in guesses]
    totals = [r["total"] for r in rows if r["total"] is not None]
    best = max(totals) if totals else None
    if len(guesses) == MAX_GUESSES_SHOWN and not _sealed(rnd):  # older guesses not read: ask the entry
        best = RoundEntry.objects.filter(round=rnd, player=player).values_list("best_total", flat=True).first()
    payout = next((p for p in (rnd.result or {}).get("payouts", []) if p["player"] == player.pk), None)
    wallet = getattr(player, "wallet", None)
    balance = wallet.balance(rnd.currency) if wallet else 0
    if refused and not error:
        error = _refusal_words(refused, rnd, slots, balance, guesses)
    context = {
        "rnd": rnd,
        "links": round_addresses(rnd.pk),
        "price": amount(rnd.guess_price, rnd.currency),
        "sealed": _sealed(rnd),
        "playable": playable,
        "keyboard_html": _keyboard(rnd.pk, tuple(rnd.keyboard)) if playable else "",
        # The six positions and my guesses are each one piece of markup:
        # each item is rendered once per process, and the page puts the
        # pieces in as they are, not one template output (an escape check
        # and a copy) each.
        "slots": mark_safe("".join(_slots(rnd, slots, my_locks))) if playable else "",
        "guesses": rows,
        "guess_items": mark_safe("".join([_guess_item(row) for row in rows])),
        "best": None if _sealed(rnd) else best,
        "balance": balance,
        "token": uuid.uuid4().hex,
        "error": error,
        "note": _sent_note(rnd, guesses, sent),
        "reveal": _reveal(rnd),
        "payout": payout,
        "payout_words": payouts.told(rnd.kind, payout) if payout else "",
        "rules": payouts.explain_round(rnd),
        "live": _live(request, rnd, guesses),
        "share": share.card(rnd, guesses, request.build_absolute_uri(common_url("watch", rnd.pk)))
        if rnd.revealed and guesses else "",
        "scoring": share.LEGEND,
        "diamonds_per_key": DIAMONDS_PER_KEY,
        "repeated": [e for e in dict.fromkeys(slots) if e and slots.count(e) > 1],
        "stream": _stream(rnd, "round"),
    }
    return render(request, "games/round.html", context, status=status)


def _refused(request, rnd: Round, err: SubmitError, slots: list[str]):
    return render_round(request, rnd, slots=slots, error=err.message, status=ERROR_STATUS.get(err.code, 400))


def _form_refused(request, rnd: Round, form: DraftForm):
    """A malformed post (only a hand-made request gets here): say why, 400."""
    problems = [str(e) for errs in form.errors.values() for e in errs]
    return render_round(request, rnd, slots=form.slots(), error=" ".join(problems), status=400)


@require_GET
def lobby(request):
    """The front door: the landing page for a visitor, the lobby for a
    player."""
    if not request.user.is_authenticated:
        return landing(request)
    return _lobby(request)


@player_required
def _lobby(request):
    """Open rounds, newest first, with my best total in each; and the
    closed rounds I played lately, to find my results."""
    player = request.player
    now = timezone.now()
    open_rounds_ = open_rounds()
    best = dict(RoundEntry.objects.filter(player=player, round__in=open_rounds_)
                .values_list("round_id", "best_total"))
    played = set(Guess.objects.filter(player=player, round__in=open_rounds_).values_list("round_id", flat=True))
    playing = live.players_in([r.pk for r in open_rounds_])
    rows = [{"rnd": r, "best": None if _sealed(r) else best.get(r.pk), "played": r.pk in played,
             "rules": payouts.explain_round(r), "playing": playing.get(r.pk)} for r in open_rounds_]
    recent = (Round.objects.filter(guesses__player=player)
              .filter(Q(status__in=[Round.Status.SETTLED, Round.Status.VOIDED]) | Q(ends_at__lte=now))
              .distinct().order_by("-ends_at")[:10])
    return render(request, "games/lobby.html", {"rows": rows, "recent": recent, "ended": just_ended(),
                                                "coming": coming_next(), "stream": push.stream_url("lobby")})


JUST_ENDED = 5
JUST_ENDED_WITHIN = timedelta(days=1)


def just_ended(now=None) -> list[dict]:
    """Rounds closed in the last day, the latest first, each with its
    winners' names (the lobby's "Just ended"; each links to its watch page)."""
    since = (now or timezone.now()) - JUST_ENDED_WITHIN
    closed = list(Round.objects.filter(status__in=[Round.Status.SETTLED, Round.Status.VOIDED], settled_at__gte=since)
                  .only("id", "title", "kind", "status", "prize_pool", "settled_at", "result")
                  .order_by("-settled_at")[:JUST_ENDED])
    winners = {p["player"] for r in closed for p in (r.result or {}).get("payouts", [])}
    names = dict(Player.objects.filter(pk__in=winners).values_list("pk", "user__username")) if winners else {}
    return [{"rnd": r, "winners": [(names.get(p["player"], "(gone)"), p["prize"])
                                   for p in (r.result or {}).get("payouts", [])[:3]]} for r in closed]


def coming_next() -> list[dict]:
    """The rounds the active schedules will open next, soonest first, for
    the lobby's "Coming next" (each ``{"title", "kind", "opens_at"}``; a
    schedule's rows hold no secret). Computed at most every few seconds per
    process (``schedules.coming_soon``); the lobby shows the section only
    when this has something."""
    return schedules.coming_soon()


@require_GET
@player_required(load=False)
@rides.ride_along("live", live.snapshot_riding)
def round_page(request, round_id: str):
    """The player (wallet, unread count), the round, my locks and my
    guesses come in one statement (``load_round_page``); the rest from
    Valkey."""
    page = load_round_page(request.user, round_id)
    request.player = page.player
    remember_player(request, page.player)
    if page.round is None:
        raise Http404("No such round.")
    return render_round(request, page.round, slots=DraftForm.from_query(request.GET), my_locks=page.locks,
                        guesses=page.guesses, sent=request.GET.get(SENT), refused=request.GET.get(REFUSED))


@require_POST
@player_required
def compose(request, round_id: str):
    """A keyboard tap, backspace or clear with JavaScript off."""
    rnd = _get_round(round_id)
    form = ComposeForm(request.POST, keyboard=rnd.keyboard)
    if not form.is_valid():
        return _form_refused(request, rnd, form)
    slots = compose_draft(form.slots(), locks.locks_for(request.player.pk, rnd.pk),
                          key=form.cleaned_data["key"] or None, op=form.cleaned_data["op"] or None)
    return HttpResponseRedirect(_round_url(rnd, slots))


@require_POST
@player_required
def lock(request, round_id: str):
    """Lock a position to what the draft shows there, or unlock it."""
    rnd = _get_round(round_id)
    form = LockForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, rnd, form)
    slots, position = form.slots(), form.cleaned_data["lock"]
    try:
        if position is not None:
            locks.set_lock(request.player, rnd, position, slots[position])
            messages.success(request, f"Position {position + 1} is locked to {slots[position]}. Locks are "
                                      "free: your next guesses keep it until you unlock it.")
        else:
            position = form.cleaned_data["unlock"]
            slots[position] = locks.locks_for(request.player.pk, rnd.pk).get(position, slots[position])
            locks.remove_lock(request.player, rnd, position)
            messages.success(request, f"Position {position + 1} is unlocked.")
    except SubmitError as err:
        return _refused(request, rnd, err, slots)
    return HttpResponseRedirect(_round_url(rnd, slots))


@require_POST
@player_required
@limited("guess")
def guess(request, round_id: str):
    """Submit the draft. The page comes back with the guess listed as
    queued; the poll (or a reload) shows its score. An accepted guess reads
    the round only inside ``submit`` (see there for the statements it
    costs); a refused one reads it again to show the page with the reason."""
    form = GuessForm(request.POST)
    if not form.is_valid():
        game_metrics.refused("form")
        return _form_refused(request, _get_round(round_id), form)
    try:
        g = submit(request.player, round_id, form.emojis(), idempotency_key=form.cleaned_data["token"] or None)
    except RoundNotFound:
        raise Http404("That round does not exist.") from None
    except SubmitError as err:
        game_metrics.refused(err.code)
        if err.code in REDIRECTED:
            back = HttpResponseRedirect(_round_url(round_id, form.slots(), refused=err.code) + "#guess-error")
            back.status_code = 303  # See Other: the browser GETs the round page
            return back
        return _refused(request, _get_round(round_id), err, form.slots())
    return HttpResponseRedirect(_round_url(round_id, form.slots(), sent=g.id))


@never_cache
@require_GET
@player_required(json=True)
@rides.ride_along("etag", live.etag_riding)
def my_guesses(request, round_id: str):
    """The page's poll: my guesses in the round, newest first, my best, and
    the live view of the others (players, recent activity, the top of the
    board and my neighbours, from Valkey). Only the asking player's guesses;
    totals and the board withheld while a blind round is sealed.

    Answers 304 when nothing changed since the poll's last answer (its
    ``If-None-Match`` is ``live.etag``): no round, no guesses read."""
    tag = live.etag(round_id, request.player.pk,
                    ride=rides.taken(request, "etag", request.user.pk, request.player.pk))
    if tag is not None and request.headers.get("If-None-Match") == tag:
        response = HttpResponseNotModified()
        response["ETag"] = tag
        return response
    rnd, guesses = round_and_my_guesses(round_id, request.player.pk, POLL_ROUND_FIELDS)
    if rnd is None:
        return JsonResponse({"error": "That round does not exist."}, status=404)
    answer = poll_answer(rnd, guesses, _live(request, rnd, guesses))
    response = JsonResponse(answer, json_dumps_params={"ensure_ascii": False})
    if tag is not None and not any(r["status"] == Guess.Status.QUEUED for r in answer["guesses"]):
        response["ETag"] = tag  # never reuse an answer still waiting for a score
    return response


def round_state(rnd: Round) -> dict:
    """What a page script needs to know of the round itself (a change of
    status makes the round page reload)."""
    return {"id": rnd.pk, "status": rnd.status, "open": rnd.is_open, "sealed": _sealed(rnd)}


def poll_answer(rnd: Round, guesses: list[Guess], live_panel: dict | None) -> dict:
    """The round page's update for its player: the round's state, my
    guesses (``guess_row``: only what I may see), my best and the panel.
    The poll answers it, and the live stream pushes it when one of my
    guesses is scored (``games.push``)."""
    rows = [guess_row(g, rnd) for g in guesses]
    totals = [r["total"] for r in rows if r["total"] is not None]
    return {"round": round_state(rnd), "guesses": rows, "best": max(totals) if totals else None, "live": live_panel}


def with_my_unscored(snap: dict | None, guesses: list[Guess]) -> dict | None:
    """The panel with my guesses still being scored counted (see ``_with_my_unscored``)."""
    if snap is not None:
        _with_my_unscored(snap, guesses)
        snap["recent_words"] = live.activity_words(snap["recent"])
    return snap


def _standings(rnd: Round) -> tuple[list[leaderboard.Standing], bool]:
    """The top of the board from Valkey; from the database (the authority)
    when Valkey does not answer, so the page still works."""
    try:
        return leaderboard.public_top(rnd, 100), True
    except echomq.UNAVAILABLE as exc:
        log.warning("leaderboard %s read from the database, Valkey unreachable: %s", rnd.pk, exc)
        return leaderboard.standings_from_db(rnd.pk)[:100], False


@require_GET
@player_required
def leaderboard_page(request, round_id: str):
    """Best total per player, ties to who got there first; hidden while a
    blind round is sealed."""
    rnd = _get_round(round_id)
    if _sealed(rnd):
        return render(request, "games/leaderboard.html", {"rnd": rnd, "sealed": True, "stream": _stream(rnd)})
    rows, from_valkey = board_rows(rnd, request.player.pk)
    return render(request, "games/leaderboard.html", {"rnd": rnd, "rows": rows, "live": from_valkey,
                                                      "rules": payouts.explain_round(rnd), "stream": _stream(rnd)})


def board_rows(rnd: Round, me: str | None = None) -> tuple[list[dict], bool]:
    """The leaderboard's rows (best total per player; never called while a
    blind round is sealed) and whether they came from Valkey. ``me`` marks
    the asking player's row; a push (``games.push``) sends the rows to every
    reader of the board and each page marks its own by name."""
    standings, from_valkey = _standings(rnd)
    names = dict(Player.objects.filter(pk__in=[s.player_id for s in standings])
                 .values_list("pk", "user__username"))
    prizes = {p["player"]: p["prize"] for p in (rnd.result or {}).get("payouts", [])}
    return [{"rank": s.rank, "place": payouts.place(rnd.kind, standings, s)[0],
             "name": names.get(s.player_id, "(gone)"), "total": s.total,
             "percentage": round(s.total / 6), "prize": prizes.get(s.player_id),
             "me": s.player_id == me} for s in standings], from_valkey


def _stream(rnd: Round, name: str = "board") -> str:
    """A page's live stream while its round is open (``games.push``)."""
    return push.stream_url(name, rnd.pk) if rnd.status in (Round.Status.OPEN, Round.Status.REVEALING) else ""
