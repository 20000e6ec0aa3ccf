from django.contrib import admin
from django.urls import include, path

from echomq.contrib.django.metrics import metrics

urlpatterns = [
    path("admin/queues/", include("echomq.contrib.django.urls")),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("", include("games.urls")),
]

# Error pages that never read the request body (see codemojex_site.errors).
handler400 = "codemojex_site.errors.bad_request"
handler403 = "codemojex_site.errors.permission_denied"
handler404 = "codemojex_site.errors.page_not_found"
handler500 = "codemojex_site.errors.server_error"
