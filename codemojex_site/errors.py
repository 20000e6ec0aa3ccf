"""Error pages that cannot fail on a bad request, and the guard that reads
a form body once.

Django's default error views are wrapped in ``requires_csrf_token``, which
runs the CSRF check again and so reads ``request.POST`` again: a body that
could not be parsed the first time (a form sent as UTF-16, a truncated
multipart body, too many fields) raised again inside the 400 view and the
answer became a 500. These views never touch the body, and fall back to a
plain page when the site template itself cannot render (say the database is
down while the header asks it for the player's balances).

``RequestGuard`` fixes the root: it parses a form POST once, before any
middleware (CSRF, sessions, axes) or view asks for it, and answers a bad
body with a 400 on the spot, so nothing downstream ever re-reads it. It
also refuses a NUL character anywhere in the path, the query or a form
field: no input here means one, and PostgreSQL refuses it in a query with
an error (a 500) rather than a miss.
"""
from __future__ import annotations

import logging

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


class RequestGuard:
    """Parse a form POST once, up front; answer 400 if it cannot be read
    or if the path, the query or a form field holds a NUL.

    Forms are UTF-8 (RFC 1866 for urlencoded bodies, and every page here
    is UTF-8), so a form declaring another charset is refused before it is
    read. Any other failure to parse (a malformed multipart body, too many
    fields, a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``) is refused the same
    way, and the request keeps an empty ``POST`` so nothing can raise again.
    Other content types (JSON) are left to the view, which reads
    ``request.body`` itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path_info or "%00" in query or "\x00" in query:
            return bad_request(request, detail="The address holds a NUL character. Nothing was changed.")
        if request.method == "POST" and request.content_type in FORM_TYPES:
            problem = self._problem(request)
            if problem:
                request._post, request._files = QueryDict(), MultiValueDict()
                log.debug("refused an unreadable form POST to %s: %s", request.path, problem)
                return bad_request(request, detail=problem)
        return self.get_response(request)

    @staticmethod
    def _problem(request) -> str:
        charset = (request.content_params or {}).get("charset", "").strip().strip('"').lower()
        if charset and charset not in UTF8:
            return f"This form was sent as {charset[:40]}; forms here must be sent as UTF-8. Nothing was changed."
        try:
            request.POST  # noqa: B018 -- parse now, once
            request.FILES  # noqa: B018
        except (BadRequest, SuspiciousOperation, MultiPartParserError, UnicodeError, LookupError, ValueError,
                OSError) as exc:
            return f"The form could not be read ({type(exc).__name__}). Nothing was changed."
        if any("\x00" in k or any("\x00" in v for v in vs) for k, vs in request.POST.lists()):
            return "A form field holds a NUL character. Nothing was changed."
        return ""
