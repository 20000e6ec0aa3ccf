"""No tables: EchoMQ keeps everything in Valkey.

``Dashboard`` is an unmanaged, table-less model that exists only so the admin
lists "Queues dashboard" in its app list and sidebar (the admin builds those
from registered models); its admin entry redirects to the queue pages.
"""
from django.db import models


class Dashboard(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "queues dashboard"
        verbose_name_plural = "queues dashboard"
