"""Puts the queue pages in the admin's app list and sidebar."""
from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import path, reverse

from .models import VIEW, Dashboard


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """Users with ``echomq.view_queues`` see a "Queues dashboard" entry that
    leads to ``echomq:overview``. There is nothing to add, change or delete:
    the queues live in Valkey."""

    def _may_view(self, request) -> bool:
        return request.user.is_active and request.user.is_staff and request.user.has_perm(VIEW)

    def has_module_permission(self, request):
        return self._may_view(request)

    def has_view_permission(self, request, obj=None):
        return self._may_view(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [path("", self.admin_site.admin_view(self.redirect), name="%s_%s_changelist" % info)]

    def redirect(self, request):
        return HttpResponseRedirect(reverse("echomq:overview"))
