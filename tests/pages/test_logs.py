"""Logs say what happened in one line each, exceptions included."""
import io
import logging

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.log import configure_logging

from codemojex_site.logs import OneLineFormatter


def _handler():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(levelname)s %(name)s %(message)s"))
    return stream, handler


def test_an_exception_stays_on_its_records_line():
    stream, handler = _handler()
    log = logging.getLogger("test.one_line")
    log.addHandler(handler)
    try:
        def inner():
            raise ValueError("bad\nthing")
        try:
            inner()
        except ValueError:
            log.exception("it broke:\n%s", "details")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert text.count("\n") == 1, text
    assert "ERROR test.one_line it broke: details [ValueError: bad thing @ " in text
    assert "test_logs.py:" in text and "in inner < " in text  # innermost frame first


def test_the_sites_formatter_is_the_one_line_one():
    assert settings.LOGGING["formatters"]["line"]["()"] == "codemojex_site.logs.OneLineFormatter"
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
    root = logging.getLogger()
    assert any(isinstance(h.formatter, OneLineFormatter) for h in root.handlers)


@pytest.mark.django_db
def test_an_admin_403_logs_one_line(client):
    stream, handler = _handler()
    logging.getLogger("django.request").addHandler(handler)
    try:
        user = get_user_model().objects.create_user("viewer", password="pw-x-12345", is_staff=True)
        client.force_login(user)
        assert client.post("/admin/games/round/", {"action": "void", "_selected_action": ["RND0"]}).status_code == 403
    finally:
        logging.getLogger("django.request").removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith(("WARNING", "ERROR")) for line in lines), lines
