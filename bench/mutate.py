"""A small mutation run over echomq/ and lua/: do the tests notice a bug?

    .venv/bin/python -m bench.mutate                 # 60 sampled mutants, seed 11
    .venv/bin/python -m bench.mutate --n 200 --seed 3 --files lua/retry.lua,echomq/consumer.py
    .venv/bin/python -m bench.mutate --list          # every candidate mutant, none run
    .venv/bin/python -m bench.mutate --files games/wallet.py --tests tests/games,tests/pages

Each mutant is one small change on one line (a flipped comparison, ``and``
for ``or``, ``+ 1`` for ``- 1``, a constant moved by one, a deleted
``redis.call`` / statement). The work tree is copied once to a temporary
directory; each mutant is written into the copy, the fast EchoMQ tests
(``tests/echomq`` on Valkey, without the slow real-process ones; ``--tests``
names others, e.g. the game's for a file of ``games/``) run there with ``-x``,
and the file is restored. A mutant is *killed* when the tests fail or time
out, *survived* when they pass. Prints one line per mutant and the score;
the survivors are the list of tests still to write. Sampling is seeded, so
two runs with the same seed try the same mutants (before / after scores).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = ("echomq/*.py", "lua/*.lua", "lua/include/*.lua")
SKIP_FILES = {"echomq/embedded.py"}  # starts servers; its tests are slow ones

# (name, pattern, replacement) applied to one occurrence on one line.
COMMON = [
    ("and->or", r"\band\b", "or"),
    ("or->and", r"\bor\b", "and"),
    ("<=-><", r"<=", "<"),
    (">=->>", r">=", ">"),
    ("<-><=", r"(?<![<=-])<(?![<=])", "<="),
    (">->>=", r"(?<![>=-])>(?![>=])", ">="),
    ("+1->-1", r"\+ 1\b", "- 1"),
    ("-1->+1", r"- 1\b", "+ 1"),
]
LUA = COMMON + [
    ("==->~=", r"==", "~="),
    ("~=->==", r"~=", "=="),
    ("'1'->'0'", r"'1'", "'0'"),
    ("return 1->0", r"return 1\b", "return 0"),
    ("num+1", r"(?<![\w.'\"])([1-9]\d{0,5})(?![\w.'\"])", None),
]
PY = COMMON + [
    ("==->!=", r"==", "!="),
    ("!=->==", r"!=", "=="),
    ("True->False", r"\bTrue\b", "False"),
    ("False->True", r"\bFalse\b", "True"),
    ("not-", r"\bnot ", ""),
    ("num+1", r"(?<![\w.'\"])([1-9]\d{0,5})(?![\w.'\"])", None),
]
LUA_DELETE = re.compile(r"^\s*(redis\.call|wake\(|lane_settle|lane_release_active|count\(|make_ready|keep_|"
                        r"drop_cancelled|arg_)")
PY_DELETE = re.compile(r"^\s*(self\.[\w.]+(\(|\s*[+-]?=)|[\w.]+\.(add|append|set|pop|discard|put)\()")


def _skippable(line: str, lua: bool) -> bool:
    s = line.strip()
    if not s:
        return True
    if lua:
        return s.startswith("--")
    return s.startswith(("#", '"', "'", "import ", "from ", "def ", "class ", "@", "log.", "raise ")) or \
        "log." in s or s.endswith('"""')


def candidates(files: list[str]) -> list[tuple[str, int, str, str]]:
    """(file, line number, operator, new line) for every mutant."""
    out = []
    for rel in files:
        lua = rel.endswith(".lua")
        ops = LUA if lua else PY
        in_doc = False
        for i, line in enumerate((REPO / rel).read_text().splitlines()):
            if not lua and line.count('"""') == 1:
                in_doc = not in_doc
                continue
            if lua and (line.startswith("--[[") or line.startswith("]]")):
                in_doc = line.startswith("--[[")
                continue
            if in_doc or _skippable(line, lua):
                continue
            code = line.split("--", 1)[0] if lua else line.split("  #", 1)[0]
            for name, pat, rep in ops:
                for m in re.finditer(pat, code):
                    if m.start() > 0 and code[:m.start()].count("'") % 2 == 1 and name != "'1'->'0'":
                        continue  # inside a Lua / Python string
                    new = str(int(m.group(1)) + 1) if rep is None else rep
                    out.append((rel, i, name, line[:m.start()] + new + line[m.end():]))
            deleter = LUA_DELETE if lua else PY_DELETE
            if deleter.match(line) and not line.rstrip().endswith((",", "(", "\\")) and \
                    line.count("(") == line.count(")"):
                indent = line[:len(line) - len(line.lstrip())]
                # The deleted statement rides along as a comment, so every
                # deletion prints (and --rerun matches) as itself.
                gone = line.strip()
                out.append((rel, i, "delete", indent + (f"do end -- deleted: {gone}" if lua else f"pass  # deleted: {gone}")))
    return out


TEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", "-k", "not redis7",
             "--ignore=tests/echomq/test_embedded.py", "--ignore=tests/echomq/test_cluster.py"]
TESTS = ["tests/echomq"]


def run_tests(work: Path, timeout: float, *, output: Path | None = None,
              tests: list[str] = TESTS) -> tuple[bool, float]:
    """The fast EchoMQ tests on Valkey only (the Redis 7.0 twins, the cluster
    and embedded-server tests are left out to keep a mutant under a minute).
    ``output`` keeps what pytest printed (the baseline's, to say why it failed)."""
    t0 = time.monotonic()
    # The settings refuse to load without SECRET_KEY unless told this is a developer's machine.
    # The tests' servers get their directories under our own temp dir, so the
    # ones a killed run leaves behind can be found (and are, below).
    tmp = work.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, CODEMOJEX_DEV="1", TMPDIR=str(tmp))
    sink = open(output, "wb") if output else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *TEST_ARGS, *tests], cwd=work, stdout=sink,
                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        return proc.wait(timeout) == 0, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_servers_under(tmp)
        if output:
            sink.close()


def _kill_servers_under(tmp: Path) -> int:
    """SIGKILL every process whose command line names a path under ``tmp``:
    the valkey-servers of a test run killed at its timeout (they run in
    sessions of their own, so the run's process group did not take them)."""
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(tmp).encode() in cmdline:
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mutate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=60, help="mutants to try (sampled); 0 for all")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--files", help="comma list of paths (default: echomq/*.py, lua/*.lua, lua/include/*.lua)")
    ap.add_argument("--tests", default=",".join(TESTS),
                    help="comma list of test paths each mutant runs (default: tests/echomq)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per test run")
    ap.add_argument("--list", action="store_true", help="print the candidates and stop")
    ap.add_argument("--rerun", metavar="OUTPUT", help="run only the mutants a previous run's output "
                    "lists as survived (after adding tests: the killed ones stay killed, tests only grow)")
    a = ap.parse_args(argv)
    tests = [t.strip() for t in a.tests.split(",") if t.strip()]
    if a.files:
        files = [f.strip() for f in a.files.split(",") if f.strip()]
    else:
        files = sorted(str(p.relative_to(REPO)) for pat in TARGETS for p in REPO.glob(pat))
        files = [f for f in files if f not in SKIP_FILES]
    muts = candidates(files)
    if a.list:
        for rel, i, name, new in muts:
            print(f"{rel}:{i + 1} {name}: {new.strip()}")
        print(f"{len(muts)} candidates")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: restore, clean up, print the score
    rng = random.Random(a.seed)
    picked = muts if not a.n or a.n >= len(muts) else sorted(rng.sample(muts, a.n))
    if a.rerun:
        # Matched by file, operator and the mutated line's text (line numbers move as code changes).
        wanted = set(re.findall(r"^  survived (\S+):\d+ (\S+): (.*)$", Path(a.rerun).read_text(), re.M))
        picked = [m for m in muts if (m[0], m[2], m[3].strip()[:100]) in wanted]
        print(f"rerunning {len(picked)} survivors of {a.rerun}")
    work = Path(tempfile.mkdtemp(prefix="emq-mutate-"))
    ignore = shutil.ignore_patterns(".git", ".venv", ".venvs", "__pycache__", "node_modules", "*.pyc")
    shutil.copytree(REPO, work / "repo", ignore=ignore)
    work = work / "repo"
    # The Node client's packages are not copied (large, and never mutated): the
    # copy links to the checkout's, so the Node conformance runner runs there too.
    node_modules = REPO / "clients" / "node" / "node_modules"
    if node_modules.is_dir():
        (work / "clients" / "node" / "node_modules").symlink_to(node_modules)
    print(f"{len(muts)} candidate mutants in {len(files)} files; running {len(picked)} (seed {a.seed}) in {work}",
          flush=True)
    killed, survivors = 0, []
    try:
        baseline = work.parent / "baseline.log"
        ok, secs = run_tests(work, a.timeout * 2, output=baseline, tests=tests)
        if not ok:
            tail = baseline.read_text(errors="replace").strip().splitlines()[-15:]
            print("the unmutated tests fail, so no mutant can be judged; their last lines:\n  "
                  + "\n  ".join(tail), file=sys.stderr)
            return 2
        print(f"baseline: tests pass in {secs:.0f}s", flush=True)
        for k, (rel, i, name, new) in enumerate(picked, 1):
            path = work / rel
            original = path.read_text()
            lines = original.splitlines(keepends=True)
            lines[i] = new + "\n"
            path.write_text("".join(lines))
            try:
                passed, secs = run_tests(work, a.timeout, tests=tests)
            finally:
                path.write_text(original)
            verdict = "SURVIVED" if passed else "killed"
            killed += not passed
            if passed:
                survivors.append((rel, i, name, new))
            print(f"[{k}/{len(picked)}] {verdict:8} {rel}:{i + 1} {name}: {new.strip()[:90]} ({secs:.0f}s)",
                  flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
    done = killed + len(survivors)
    print(f"\nmutation score: {killed}/{done} killed ({100 * killed / max(1, done):.0f}%)")
    for rel, i, name, new in survivors:
        print(f"  survived {rel}:{i + 1} {name}: {new.strip()[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
