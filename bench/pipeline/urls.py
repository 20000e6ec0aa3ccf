"""The game's URLs plus ``bench/insert/``: the bare floor every ratio is
taken against -- a Django view that does one INSERT and nothing else, on a
persistent connection of its own (the ``bare`` alias)."""
from django.db import connections
from django.http import HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

TABLE = "bench_ping"


@csrf_exempt
def insert(request):
    with connections["bare"].cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (at) VALUES (now())")
    return HttpResponse(b"ok", content_type="text/plain")


def signed_in(request):
    """The floor of any player's request: the session, the user and (for a
    POST) the CSRF check, then one INSERT -- what every game page pays
    before it does any game work."""
    if not request.user.is_authenticated:
        return HttpResponse(b"log in", status=401, content_type="text/plain")
    return insert(request)


urlpatterns = [path("bench/insert/", insert), path("bench/signed-in/", signed_in),
               path("", include("codemojex_site.urls"))]
