"""``./dev run``: migrate, seed the demo, then run web, the live process
(the pages' streams, ``codemojex_site.asgi``, on the next port), score
worker(s), notifier (settlement), the task worker (notifications) and reaper
as child processes until Ctrl-C / SIGTERM.

A small supervisor, not a production process manager: a child that exits on
its own is logged and restarted after a second; SIGTERM/SIGINT is passed to
every child, which finish their jobs in hand and exit."""
import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from echomq.contrib.django import embedded_cluster_dir, is_cluster, valkey_url
from echomq.embedded import redact
from games.management.commands.seed_demo import OPERATORS


class Command(BaseCommand):
    help = "Run the whole demo: migrate, seed, web + live + score workers + notifier + task worker + reaper."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--scoreworkers", type=int, default=2)
        parser.add_argument("--no-web", action="store_true")
        parser.add_argument("--live-port", type=int, default=None,
                            help="the live process's port (default: the next one); the pages open their streams there")
        parser.add_argument("--no-live", action="store_true", help="no live process: the pages poll")

    def _banner(self, host: str, port: int) -> str:
        """The URL and the logins, last, so they do not scroll away."""
        from pathlib import Path

        def login(name: str) -> str:
            path = Path(settings.VAR_DIR) / f"demo-{name}.password"
            return f"{name} / {path.read_text().strip()}" if path.exists() else f"{name} (password unchanged)"

        url = f"http://{host}:{port}/"
        return (f"\n  Codemojex is up: {url}\n  game admin: {url}admin/  login {login('admin')}\n"
                f"  a player:   {url}  login {login('alice')}  (or sign up)\n"
                + "".join(f"  {group.lower()}: {url}admin/  login {login(name)}\n"
                          for name, group in OPERATORS.items())
                + "  Ctrl-C stops everything.\n")

    def handle(self, *args, **o):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("database migrated")
        call_command("seed_demo", stdout=self.stdout)
        if not o["no_web"]:
            call_command("collectstatic", interactive=False, verbosity=0)
        env = dict(os.environ, VALKEY_URL=valkey_url(), PYTHONUNBUFFERED="1")
        if is_cluster():  # the children talk to the same cluster, as RedisCluster clients
            env["VALKEY_CLUSTER"] = "1"
        manage = [sys.executable, "-m", "codemojex_site.manage"]  # a checkout's manage.py, or installed
        specs = {f"scoreworker{i + 1}": manage + ["run_scoreworker"] for i in range(o["scoreworkers"])}
        specs["notifier"] = manage + ["run_notifier"]
        specs["tasks"] = manage + ["run_tasks"]
        specs["reaper"] = manage + ["run_reaper"]
        if not o["no_web"]:
            specs["web"] = [sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                            "codemojex_site.wsgi", "--bind", f"{o['host']}:{o['port']}", "--workers", "2"]
            if o["no_live"]:
                env["LIVE_PUSH"] = "0"
            else:
                # No proxy here to route /live/ on the pages' origin: the pages
                # open their streams on the live process's own port (CORS).
                live_port = o["live_port"] or o["port"] + 1
                env["LIVE_URL"] = f"http://{o['host']}:{live_port}"
                env["LIVE_ORIGINS"] = ",".join(f"http://{h}:{o['port']}" for h in dict.fromkeys(
                    [o["host"], "localhost" if o["host"] == "127.0.0.1" else o["host"]]))
                specs["live"] = [sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                                 "-k", "codemojex_site.live_worker.Worker", "codemojex_site.asgi:application",
                                 "--bind", f"{o['host']}:{live_port}", "--workers", "1"]
        children = {name: subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR) for name, cmd in specs.items()}
        self.stdout.write(f"started {', '.join(children)}; valkey {redact(env['VALKEY_URL'])}")
        if not o["no_web"]:
            self.stdout.write(self._banner(o["host"], o["port"]))
        self.stdout.flush()
        stopping = []
        previous = {sig: signal.signal(sig, lambda s, f: stopping.append(s)) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            while not stopping:
                time.sleep(0.5)
                for name, proc in list(children.items()):
                    if proc.poll() is not None and not stopping:
                        self.stderr.write(f"{name} exited with {proc.returncode}; restarting it in 1s")
                        time.sleep(1)
                        children[name] = subprocess.Popen(specs[name], env=env, cwd=settings.BASE_DIR)
        finally:
            self.stdout.write("stopping: " + ", ".join(children))
            for proc in children.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for name, proc in children.items():
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.stderr.write(f"{name} did not stop in 30s; killing it")
                    proc.kill()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if not settings.ECHOMQ.get("URL"):  # we run the install's embedded server: stop it too
                from echomq import embedded

                if settings.ECHOMQ.get("CLUSTER_NODES"):
                    embedded.stop_cluster(embedded_cluster_dir(settings.ECHOMQ))
                else:
                    embedded.stop(settings.ECHOMQ["EMBEDDED_DIR"])
                self.stdout.write("embedded valkey stopped (its append-only file keeps the queues)")
        self.stdout.write("all stopped")
