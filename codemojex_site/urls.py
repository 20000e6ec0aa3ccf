from django.contrib import admin
from django.urls import include, path

from echomq.contrib.django.metrics import metrics

urlpatterns = [
    path("admin/queues/", include("echomq.contrib.django.urls")),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("", include("games.urls")),
]
