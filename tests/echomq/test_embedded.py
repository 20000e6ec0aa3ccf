"""The install's embedded Valkey: one server shared by every process, and
no one else's: it asks for a password kept owner-only in its directory."""
import json
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from echomq import embedded

ROOT = Path(__file__).resolve().parents[2]


def ensure_in_subprocess(directory) -> str:
    out = subprocess.run([sys.executable, "-c", "import sys; from echomq import embedded; "
                          "print(embedded.ensure(sys.argv[1]))", str(directory)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_one_server_per_install_shared_by_processes(tmp_path):
    try:
        with ThreadPoolExecutor(4) as pool:  # four processes race to start it
            urls = set(pool.map(ensure_in_subprocess, [tmp_path] * 4))
        assert len(urls) == 1
        url = urls.pop()
        assert embedded.ensure(tmp_path) == url
        c = redis.Redis.from_url(url)
        assert c.config_get("appendonly") == {"appendonly": "yes"}
        assert c.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert c.config_get("bind")["bind"].split()[0] == "127.0.0.1"
        c.set("kept", "1")
    finally:
        assert embedded.stop(tmp_path) is True
    assert embedded.running_url(tmp_path) is None
    assert embedded.stop(tmp_path) is False
    # Started again, the append-only file brings the data back.
    url = embedded.ensure(tmp_path)
    try:
        assert redis.Redis.from_url(url).get("kept") == b"1"
    finally:
        embedded.stop(tmp_path)


def test_a_server_that_cannot_start_is_a_clear_error(tmp_path):
    (tmp_path / "data").write_text("a file where the data directory should be")
    with pytest.raises(embedded.EmbeddedValkeyError, match="valkey-server"):
        embedded.ensure(tmp_path)


def test_the_server_asks_for_a_password_kept_owner_only(tmp_path):
    """Loopback is open to every user of the host: without the password
    (0600, in a 0700 directory, never on the server's command line) a
    client is refused."""
    directory = tmp_path / "valkey"
    url = embedded.ensure(directory)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=urlsplit(url).port).ping()
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=urlsplit(url).port, password="guess").ping()
        assert redis.Redis.from_url(url).ping()
        secret = (directory / "password").read_text().strip()
        assert len(secret) >= 32 and urlsplit(url).password == secret
        assert stat.S_IMODE((directory / "password").stat().st_mode) == 0o600
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        for config in directory.glob("*.conf"):
            assert stat.S_IMODE(config.stat().st_mode) == 0o600
        pid = int((directory / "valkey.pid").read_text())
        assert secret not in Path(f"/proc/{pid}/cmdline").read_text()
        assert secret not in embedded.redact(url) and "***" in embedded.redact(url)
        assert secret not in json.dumps(json.loads((directory / "embedded.json").read_text()))
    finally:
        embedded.stop(directory)


def test_a_server_started_before_passwords_is_restarted_with_one(tmp_path):
    """An install upgraded while its open server runs: that server is not
    used; the next ensure() shuts it down and starts it again, with a
    password, on the same data."""
    port = embedded.free_port()
    open_url = f"redis://127.0.0.1:{port}/0"
    proc = embedded.start_server(tmp_path / "data", port)  # as an older version ran it: no password
    try:
        embedded.wait_ready(open_url, proc=proc)
        redis.Redis.from_url(open_url).set("kept", "1")
        (tmp_path / "embedded.json").write_text(json.dumps({"url": open_url, "port": port}))
        assert embedded.running_url(tmp_path) is None
        url = embedded.ensure(tmp_path)
        assert proc.wait(10) == 0  # shut down cleanly, its AOF written
        assert urlsplit(url).password and redis.Redis.from_url(url).get("kept") == b"1"
    finally:
        if proc.poll() is None:
            proc.kill()
        embedded.stop(tmp_path)


def test_redact_hides_only_the_password():
    assert embedded.redact("redis://:s3cret@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert embedded.redact("rediss://ops:s3cret@valkey.example:6380/2") == "rediss://ops:***@valkey.example:6380/2"
    assert embedded.redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
