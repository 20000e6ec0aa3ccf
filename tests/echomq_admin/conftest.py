"""The queue dashboard against the suite's real Valkey (never a fake)."""
from __future__ import annotations

import pytest

from echomq import Queue
from echomq.contrib.django import reset_client
from echomq.contrib.django.models import OPERATE, VIEW


@pytest.fixture(autouse=True)
def fast_test_settings(settings):
    """With DEBUG off the project stores static files through a manifest
    that only ``collectstatic`` writes; admin pages render ``{% static %}``
    links, so the tests use the plain storage instead. A fast hasher keeps
    making users cheap."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def emq(valkey_server, r, settings):
    """Point the Django integration at the test Valkey (flushed by ``r``), with
    the game's three queues configured; put things back afterwards."""
    settings.ECHOMQ = {"URL": valkey_server.url, "QUEUES": ["cm", "cm.settle", "cm.notify"]}
    reset_client(valkey_server.url)
    yield r
    reset_client(None)


@pytest.fixture
def queue(emq):
    return Queue("cm", emq)


def make_dead(q: Queue, payload=b"x", error="boom") -> str:
    """Enqueue, claim and fail a job once with max_attempts=1: a dead letter.
    Call it while the queue has no other ready job (claims take the oldest)."""
    jid, _ = q.enqueue(payload)
    job = q.claim(lease_ms=60_000)
    assert job.id == jid
    assert q.retry(job.id, job.attempts, delay_ms=0, max_attempts=1, error=error) == "dead"
    return jid


def staff_user(django_user_model, name: str, *perms: str):
    """A staff user (not a superuser) holding exactly ``perms``."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(name, password=f"pw-{name}-123", is_staff=True)
    for full in perms:
        app_label, codename = full.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


@pytest.fixture
def staff_client(client, django_user_model):
    """A queue operator: staff with the view and operate permissions."""
    client.force_login(staff_user(django_user_model, "ops", VIEW, OPERATE))
    return client


@pytest.fixture
def viewer_client(client, django_user_model):
    """Staff who may only read the dashboard."""
    client.force_login(staff_user(django_user_model, "viewer", VIEW))
    return client


@pytest.fixture
def player_client(client, django_user_model):
    user = django_user_model.objects.create_user("player", password="pw-player-123")
    client.force_login(user)
    return client
