"""The install's embedded Valkey: one server shared by every process."""
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
