"""The systemd units in deploy/: parsed, each with the policy a service
needs (restart, SIGTERM, a stop timeout that covers its drain, liveness),
and each command line one that exists: the installed console script, a
management command that is there, and arguments its parser accepts."""
from __future__ import annotations

import importlib
import importlib.util
import shlex
import tomllib
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import get_commands, load_command_class

from codemojex_site import gunicorn_conf
from echomq.consumer import Consumer

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BIN = "/opt/codemojex/venv/bin/"
WORKERS = {"run_scoreworker", "run_tasks", "run_notifier", "run_reaper"}
SERVICES = sorted(DEPLOY.glob("*.service"))


def parse(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A unit file: {section: [(key, value), ...]} (keys may repeat, as ExecStart does)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None and key.strip().isidentifier(), f"{path.name}:{number}: {line!r}"
        current.append((key.strip(), value.strip()))
    return sections


def values(unit: dict, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def one(unit: dict, section: str, key: str) -> str:
    [value] = values(unit, section, key)
    return value


def seconds(text: str) -> float:
    units = {"": 1, "s": 1, "min": 60, "ms": 0.001}
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    return float(number) * units[text[len(number):]]


def command_lines() -> list[tuple[str, list[str]]]:
    return [(path.name, shlex.split(line)) for path in SERVICES for line in values(parse(path), "Service", "ExecStart")]


def test_there_is_a_unit_for_the_web_and_each_worker_and_the_target_wants_them():
    run = {argv[1] for _, argv in command_lines() if argv[0] == BIN + "codemojex"}
    assert WORKERS <= run
    assert any(argv[0] == BIN + "gunicorn" for _, argv in command_lines())
    target = parse(DEPLOY / "codemojex.target")
    wanted = set(one(target, "Unit", "Wants").split())
    long_running = {p.name for p in SERVICES if one(parse(p), "Service", "Type") != "oneshot"}
    assert wanted == {name for name in long_running if "@" not in name}  # templates are enabled per instance
    for name in long_running:
        unit = parse(DEPLOY / name)
        assert one(unit, "Unit", "PartOf") == "codemojex.target"
        assert one(unit, "Install", "WantedBy") == "codemojex.target"


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_each_service_restarts_stops_with_sigterm_and_waits_out_its_drain(path):
    unit = parse(path)
    service_type = one(unit, "Service", "Type")
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    assert one(unit, "Service", "EnvironmentFile") == "/etc/codemojex/env"
    assert one(unit, "Service", "User") == "codemojex"
    if service_type == "oneshot":
        return
    assert one(unit, "Service", "Restart") == "always"
    assert one(unit, "Service", "KillMode") == "mixed"  # SIGTERM to the main process, which drains its own
    stop = seconds(one(unit, "Service", "TimeoutStopSec"))
    [argv] = [shlex.split(line) for line in values(unit, "Service", "ExecStart")]
    if argv[0].endswith("gunicorn"):
        assert stop > gunicorn_conf.graceful_timeout  # requests in flight finish first
    else:
        # Handlers get grace_ms, then the last acks get up to three tries of a socket timeout each.
        drain = Consumer.__init__.__kwdefaults__["grace_ms"] / 1000 + 3 * settings.ECHOMQ["SOCKET_TIMEOUT"]
        assert stop > drain
        # Liveness: READY=1 and watchdog pings from echomq.health, slower than its stale threshold allows.
        assert service_type == "notify" and seconds(one(unit, "Service", "WatchdogSec")) > 0


@pytest.mark.parametrize("unit_name,argv", command_lines(), ids=lambda v: v if isinstance(v, str) else " ".join(v[1:3]))
def test_each_command_line_exists(unit_name, argv):
    program = argv[0]
    assert program.startswith(BIN), program
    script = program[len(BIN):]
    if script == "codemojex":
        declared = tomllib.loads((ROOT / "distributions" / "codemojex" / "pyproject.toml").read_text())
        target = declared["project"]["scripts"]["codemojex"]
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func))
        name, args = argv[1], argv[2:]
        app = get_commands()[name]  # KeyError: no such management command
        command = load_command_class(app, name)
        command.create_parser("codemojex", name).parse_args(args)  # SystemExit on an unknown option
    elif script == "gunicorn":
        from gunicorn.config import Config

        parsed = Config().parser().parse_args(argv[1:])
        assert parsed.config.startswith("python:")
        assert importlib.util.find_spec(parsed.config.removeprefix("python:")) is not None
        [app] = parsed.args
        if parsed.worker_class is None:  # the pages: the WSGI application
            assert importlib.util.find_spec(app) is not None and app == settings.WSGI_APPLICATION.rsplit(".", 1)[0]
        else:  # the live process: the ASGI application under uvicorn's worker
            module, _, attr = parsed.worker_class.rpartition(".")
            assert isinstance(getattr(importlib.import_module(module), attr), type)
            module, _, attr = app.partition(":")
            assert app == "codemojex_site.asgi:application" and callable(getattr(importlib.import_module(module), attr))
    else:
        pytest.fail(f"{unit_name}: {program} is neither the codemojex command nor gunicorn")
