from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/queues/", include("echomq.contrib.django.urls")),
    path("admin/", admin.site.urls),
    path("", include("games.urls")),
]
