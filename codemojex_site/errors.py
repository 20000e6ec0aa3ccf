"""Error pages that cannot fail on a bad request, and the guard that reads
a form body once.

Django's default error views are wrapped in ``requires_csrf_token``, which
runs the CSRF check again and so reads ``request.POST`` again: a body that
could not be parsed the first time (a form sent as UTF-16, a truncated
multipart body, too many fields) raised again inside the 400 view and the
answer became a 500. These views never touch the body, and fall back to a
plain page when the site template itself cannot render (say the database is
down while the header asks it for the player's balances).

``RequestGuard`` fixes the root: once the address has resolved to a view
that takes a form, it parses the form POST once, before the CSRF check or
the view asks for it, and answers a bad body with a 400 on the spot, so
nothing downstream ever re-reads it. A body larger than any form here is
refused from its ``Content-Length`` before a byte of it is read, file parts
included (Django's own limit leaves those out), and a POST to an address
with no view is a 404 whose body is never read. It also refuses a NUL
character anywhere in the path, the query or a form field: no input here
means one, and PostgreSQL refuses it in a query with an error (a 500)
rather than a miss.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpResponse, HttpResponseServerError, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.template import loader
from django.utils.datastructures import MultiValueDict
from django.utils.html import escape

log = logging.getLogger("codemojex.errors")

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
UTF8 = {"utf-8", "utf8"}
_PLAIN = ('<!doctype html><html lang="en"><meta charset="utf-8"><title>{title} · Codemojex</title>'
          '<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem">'
          '<h1>{title}</h1><p>{text}</p><p><a href="/">Back to the lobby</a></p></body></html>')


def _page(request, template: str, status: int, title: str, text: str, **context) -> HttpResponse:
    """The site's error page, or a plain one if the site page cannot render."""
    try:
        body = loader.render_to_string(template, {"detail": text, **context}, request=request)
    except Exception:  # noqa: BLE001 -- an error page must answer whatever broke
        log.exception("error page %s could not render; answering the plain page", template)
        body = _PLAIN.format(title=escape(title), text=escape(text))
    return HttpResponse(body, status=status)


def bad_request(request, exception=None, detail: str = ""):
    return _page(request, "400.html", 400, "Bad request", detail or "The request could not be understood.")


def permission_denied(request, exception=None):
    return _page(request, "403.html", 403, "Not allowed", "You do not have access to this page.")


def page_not_found(request, exception=None):
    return _page(request, "404.html", 404, "Not found", "There is no page here.")


def server_error(request):
    """The 500 page renders without the request (no context processors, no
    database), so it answers whatever went wrong."""
    try:
        return HttpResponseServerError(loader.render_to_string("500.html"))
    except Exception:  # noqa: BLE001
        log.exception("500.html could not render")
        return HttpResponseServerError(_PLAIN.format(title="Something went wrong",
                                                     text="The error was logged. Please try again in a moment."))


def _is_form_post(request) -> bool:
    return request.method == "POST" and request.content_type in FORM_TYPES


class RequestGuard:
    """Refuse what no form here can be before reading it; parse a form POST
    once its address has a view; answer 400 if it cannot be read or if the
    path, the query or a form field holds a NUL.

    Before routing, from the headers alone: a form body whose
    ``Content-Length`` is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (no form
    here comes near it; file parts count), or that declares a charset other
    than UTF-8 (RFC 1866 for urlencoded bodies, and every page here is
    UTF-8). After routing (``process_view``, before the CSRF check reads
    the form): the parse, for a view the CSRF check covers -- a
    ``csrf_exempt`` view reads its own body. Any failure to parse (a
    malformed multipart body, too many fields) is refused the same way, and
    the request keeps an empty ``POST`` so nothing can raise again. Other
    content types (JSON) are left to the view, which reads ``request.body``
    itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path_info or "%00" in query or "\x00" in query:
            return bad_request(request, detail="The address holds a NUL character. Nothing was changed.")
        if _is_form_post(request):
            problem = self._unreadable_unread(request)
            if problem:
                return self._refuse(request, problem)
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if _is_form_post(request) and not getattr(view_func, "csrf_exempt", False):
            problem = self._problem(request)
            if problem:
                return self._refuse(request, problem)
        return None

    @staticmethod
    def _refuse(request, problem: str):
        request._post, request._files = QueryDict(), MultiValueDict()
        log.debug("refused a form POST to %s: %s", request.path, problem)
        return bad_request(request, detail=problem)

    @staticmethod
    def _unreadable_unread(request) -> str:
        """What the headers alone say is wrong with the form, or ""."""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return "The form's length is not a number. Nothing was changed."
        if limit is not None and length > limit:
            return f"This form is larger than any form here ({limit // 1024} KiB at most). Nothing was changed."
        charset = (request.content_params or {}).get("charset", "").strip().strip('"').lower()
        if charset and charset not in UTF8:
            return f"This form was sent as {charset[:40]}; forms here must be sent as UTF-8. Nothing was changed."
        return ""

    @staticmethod
    def _problem(request) -> str:
        try:
            request.POST  # noqa: B018 -- parse now, once
            request.FILES  # noqa: B018
        except (BadRequest, SuspiciousOperation, MultiPartParserError, UnicodeError, LookupError, ValueError,
                OSError) as exc:
            return f"The form could not be read ({type(exc).__name__}). Nothing was changed."
        if any("\x00" in k or any("\x00" in v for v in vs) for k, vs in request.POST.lists()):
            return "A form field holds a NUL character. Nothing was changed."
        return ""
