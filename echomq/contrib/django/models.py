"""No tables: EchoMQ keeps everything in Valkey.

``Dashboard`` is an unmanaged, table-less model. It exists so the admin
lists "Queues dashboard" in its app list and sidebar (the admin builds those
from registered models), and to hold the dashboard's two permissions:

* ``echomq.view_queues``: read the queue pages (every GET);
* ``echomq.operate_queues``: pause, resume, requeue, remove and cancel (every
  POST, and the confirmation pages that lead to one), and pause or resume a
  queue's schedules.

A project grants them like any model permission (groups, users).
"""
from django.db import models

VIEW = "echomq.view_queues"
OPERATE = "echomq.operate_queues"


class Dashboard(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_queues", "Can view the queue dashboard"),
            ("operate_queues", "Can pause, resume, requeue, remove and cancel queue jobs"),
        ]
        verbose_name = "queues dashboard"
        verbose_name_plural = "queues dashboard"
