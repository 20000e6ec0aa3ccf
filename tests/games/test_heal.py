"""Boards that heal: Valkey loses the tail of its append-only file (a host
crash under appendfsync everysec, done here for real: SIGKILL, cut the file,
restart) or is flushed; a running reaper brings every live board of an open
round back to its rebuild from the database within seconds, with no operator."""
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import redis

from echomq import embedded
from echomq.contrib import django as emq_django
from games import leaderboard
from games.guesses import submit
from games.workers import score_guess

from .conftest import drain
from .procs import Proc, wait_for

HEAL_WITHIN_S = 10


class AofServer:
    """A valkey-server with an fsync per write, so the file ends exactly at
    the last write and the test can cut a known tail off."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="emq-aof-"))
        self.port = embedded.free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self):
        self.proc = embedded.start_server(self.dir, self.port, appendonly=True,
                                          extra=("--appendfsync", "always"))
        embedded.wait_ready(self.url, proc=self.proc)

    def incr_file(self) -> Path:
        return next((self.dir / "appendonlydir").glob("*.incr.aof"))

    def crash_and_cut(self, size: int) -> int:
        """SIGKILL, cut the AOF back to ``size`` bytes, start again; the bytes cut."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        path = self.incr_file()
        cut = path.stat().st_size - size
        with open(path, "r+b") as f:
            f.truncate(size)
        self.start()
        return cut

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def aof_server():
    server = AofServer()
    emq_django.reset_client(server.url)
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_boards_heal_after_a_lost_aof_tail_and_a_flush(aof_server, make_player, make_round, tmp_path, capsys):
    rnd = make_round()
    other = make_round(kind="blind")
    players = [make_player(f"heal{i}") for i in range(4)]
    first = [submit(p, r.pk, list(r.keyboard[:6])) for p in players[:2] for r in (rnd, other)]
    drain("cm", score_guess)
    assert all(leaderboard.live(r.pk) == leaderboard.from_db(r.pk) for r in (rnd, other))
    c = redis.Redis.from_url(aof_server.url)
    before = aof_server.incr_file().stat().st_size

    # These guesses are scored in the database, but Valkey will lose every
    # write made for them: their jobs and their leaderboard ZADDs.
    later = [submit(p, r.pk, list(r.keyboard[1:7])) for p in players[2:] for r in (rnd, other)]
    drain("cm", score_guess)
    assert len(leaderboard.live(rnd.pk)) == 4
    cut = aof_server.crash_and_cut(before)
    lost = {r.pk: leaderboard.from_db(r.pk) for r in (rnd, other)}
    assert all(len(leaderboard.live(r.pk)) == 2 and len(lost[r.pk]) == 4 for r in (rnd, other)), \
        "cutting the AOF tail should have lost the later ZADDs"
    assert len(first) == len(later) == 4

    reaper = Proc(["run_reaper", "--interval-ms", "100", "--heal-every-s", "0.5"], aof_server.url, tmp_path, "reaper")
    try:
        # The clock starts once the reaper runs: Django's start-up on a loaded machine is not the heal's.
        wait_for(lambda: reaper.ready("reaper started"), timeout=120, what="the reaper to start")
        started = time.monotonic()
        wait_for(lambda: all(leaderboard.live(r.pk) == leaderboard.from_db(r.pk) for r in (rnd, other)),
                 timeout=HEAL_WITHIN_S, what="boards healed after the AOF tail was cut")
        healed_s = time.monotonic() - started

        c.flushall()
        started = time.monotonic()
        wait_for(lambda: all(leaderboard.live(r.pk) == leaderboard.from_db(r.pk) for r in (rnd, other)),
                 timeout=HEAL_WITHIN_S, what="boards healed after a flush")
        flushed_s = time.monotonic() - started
    finally:
        code = reaper.terminate()
    assert code == 0, reaper.output()[-3000:]
    assert "restored" in reaper.output()  # the flush lost scores: said once, as a warning
    with capsys.disabled():
        print(f"\nheal: cut {cut} bytes of AOF; boards equal their rebuild {healed_s:.2f}s after the restart "
              f"(reaper start included), {flushed_s:.2f}s after a flush")
