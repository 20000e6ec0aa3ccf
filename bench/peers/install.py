"""Install each peer of bench/requirements-peers.txt into its own venv.

The peers pin redis-py in ways that exclude each other (see the header of the
requirements file), so every ``# [name]`` block gets ``bench/.venvs/<name>``.
A venv whose block text is unchanged since its last good install is reused.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
REQUIREMENTS = BENCH / "requirements-peers.txt"
VENVS = BENCH / ".venvs"
_BLOCK = re.compile(r"^#\s*\[([a-z0-9_]+)\]\s*$")


def blocks(path: Path = REQUIREMENTS) -> dict[str, list[str]]:
    """{peer: [requirement lines]} in file order."""
    out: dict[str, list[str]] = {}
    current = None
    for raw in path.read_text().splitlines():
        m = _BLOCK.match(raw.strip())
        if m:
            current = m.group(1)
            out[current] = []
            continue
        line = raw.split("#", 1)[0].strip()
        if line and current:
            out[current].append(line)
    return out


def base_python() -> str:
    # The interpreter the project venv was made from (a venv of a venv works too).
    return getattr(sys, "_base_executable", None) or sys.executable


def venv_python(peer: str) -> Path:
    return VENVS / peer / "bin" / "python"


def _stamp(lines: list[str]) -> str:
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()


def installed(peer: str, lines: list[str]) -> bool:
    stamp = VENVS / peer / ".bench-installed"
    return venv_python(peer).exists() and stamp.exists() and stamp.read_text() == _stamp(lines)


def install(peer: str, lines: list[str], *, force: bool = False, timeout: float = 300,
            log=print) -> str | None:
    """Make the peer's venv; None when ready, else a one-line reason."""
    if not force and installed(peer, lines):
        return None
    venv = VENVS / peer
    log(f"  installing {peer}: {' '.join(lines)}")
    try:
        if force or not venv_python(peer).exists():
            subprocess.run([base_python(), "-m", "venv", "--clear", str(venv)], check=True,
                           capture_output=True, timeout=120)
        req = venv / "requirements.txt"
        req.write_text("\n".join(lines) + "\n")
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-r", str(req)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"pip install timed out after {timeout:.0f}s"
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"could not create venv: {exc}"
    if proc.returncode != 0:
        errs = [l for l in (proc.stderr or "").splitlines() if l.startswith("ERROR")]
        return "pip install failed: " + (errs[0] if errs else (proc.stderr or "").strip()[-200:])
    (venv / ".bench-installed").write_text(_stamp(lines))
    return None


def main(argv=None) -> int:
    wanted = set(argv if argv is not None else sys.argv[1:])
    bad = 0
    for peer, lines in blocks().items():
        if wanted and peer not in wanted:
            continue
        reason = install(peer, lines, force=True)
        print(f"{peer}: {'ok' if reason is None else reason}")
        bad += reason is not None
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
