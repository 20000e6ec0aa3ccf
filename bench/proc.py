"""A worker subprocess and the lines it prints (READY / PROGRESS / RESULT)."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class WorkerProc:
    def __init__(self, argv: list[str], log_path: Path, *, code_dir: Path | None = None):
        """code_dir: a snapshot of echomq/ and lua/ to import instead of the
        work tree (it becomes the cwd and leads PYTHONPATH)."""
        path = [str(code_dir)] if code_dir else []
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path + [str(REPO)]), PYTHONUNBUFFERED="1")
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, cwd=code_dir or REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=self._log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.progress: tuple[int, float, float] | None = None  # count, s, cpu s
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            text = raw.decode(errors="replace").rstrip("\n")
            kind, _, rest = text.partition(" ")
            if kind in ("READY", "RESULT", "PROGRESS"):
                self.lines.put((kind, rest, time.perf_counter()))
            else:
                self._log.write(raw)
        self.lines.put(("EOF", "", time.perf_counter()))

    def next_line(self, timeout: float):
        """(kind, payload, t) or None on timeout. PROGRESS is recorded, not returned."""
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            try:
                kind, rest, t = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if kind == "PROGRESS":
                count, secs, cpu = rest.split()
                self.progress = (int(count), float(secs), float(cpu))
                continue
            if kind == "RESULT":
                return kind, json.loads(rest), t
            return kind, rest, t

    def tail(self, n: int = 3) -> str:
        self._log.flush()
        try:
            lines = [l for l in self.log_path.read_text(errors="replace").splitlines() if l.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-n:])[-300:]

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self, term_wait: float = 2.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if not self.wait_exit(term_wait):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.wait_exit(5)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers in the group
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()


def run_once(argv: list[str], log_path: Path, timeout: float):
    """Run a short command that prints one RESULT; (result or None, error text)."""
    w = WorkerProc(argv, log_path)
    try:
        line = w.next_line(timeout)
        while line is not None and line[0] not in ("RESULT", "EOF"):
            line = w.next_line(timeout)
        if line is None:
            return None, f"timed out after {timeout:.0f}s"
        if line[0] == "EOF":
            w.wait_exit(5)
            return None, f"exited {w.proc.returncode}: {w.tail()}"
        return line[1], ""
    finally:
        w.kill()


def callgrind_total(files) -> int:
    """The instructions callgrind counted, summed over its output files
    (one per process or thread dump): each file's ``totals:`` line."""
    return sum(next(int(line.split()[1]) for line in Path(f).read_text().splitlines() if line.startswith("totals:"))
               for f in files)
