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


urlpatterns = [path("bench/insert/", insert), path("", include("codemojex_site.urls"))]
