"""Build the two distributions, ``echomq`` and ``codemojex``: an sdist and a
wheel each, into ``dist/`` (``./dev dist``).

The repository keeps one tree for both (``echomq/``, ``games/``,
``codemojex_site/``, and every Lua script under the top-level ``lua/``), so
each distribution is first assembled in ``build/dists/<name>/``: its
``pyproject.toml`` and ``README.md`` from ``distributions/<name>/``, the
``VERSION`` file, and its packages copied with the Lua scripts mapped into
them (:data:`LAYOUT`). ``python -m build`` then makes the sdist from that
tree and the wheel from the sdist, so a wheel rebuilt from the published
sdist is the same wheel. Only files git knows (tracked, or new and not
ignored) are copied: nothing stray from a working tree ships.

The version comes from ``VERSION`` alone; codemojex's requirement on echomq
is pinned to it here, so the two always install as a pair.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# distribution -> (source in the repository, destination in the distribution,
# source subfolders left out). echomq carries the whole Lua bundle but the
# game's scripts, which ride with the game as games/lua/.
LAYOUT: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "echomq": [("echomq", "echomq", ()), ("lua", "echomq/lua", ("games",))],
    "codemojex": [("games", "games", ()), ("codemojex_site", "codemojex_site", ()), ("lua/games", "games/lua", ())],
}
PINNED = re.compile(r'"(echomq(?:\[[a-z0-9_,]*\])?)"')


def version() -> str:
    text = (ROOT / "VERSION").read_text().strip()
    if not re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", text):
        raise SystemExit(f"VERSION holds {text!r}, not a release version (e.g. 1.2.0 or 1.3.0rc1)")
    return text


def known_files(source: Path) -> list[Path]:
    """The files under ``source`` that git knows about (tracked, or new and
    not ignored); every file when this is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                              str(source.relative_to(ROOT))], cwd=ROOT, check=True, capture_output=True).stdout
        names = [ROOT / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = [p for p in source.rglob("*") if p.is_file()]
    return sorted(p for p in names if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def assemble(name: str, stage: Path, release: str) -> int:
    """Lay out distribution ``name`` in ``stage``; answers the files copied."""
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    spec = ROOT / "distributions" / name
    pyproject = (spec / "pyproject.toml").read_text()
    if name == "codemojex":
        pyproject, pins = PINNED.subn(rf'"\1=={release}"', pyproject)
        if pins != 1:
            raise SystemExit(f"distributions/codemojex/pyproject.toml: expected one echomq requirement, found {pins}")
    (stage / "pyproject.toml").write_text(pyproject)
    shutil.copy2(spec / "README.md", stage / "README.md")
    (stage / "VERSION").write_text(release + "\n")
    (stage / "MANIFEST.in").write_text("include VERSION\n")
    copied = 0
    for source, destination, left_out in LAYOUT[name]:
        src = ROOT / source
        if not src.is_dir():
            continue  # e.g. no game scripts yet
        for path in known_files(src):
            rel = path.relative_to(src)
            if rel.parts[0] in left_out:
                continue
            target = stage / destination / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied += 1
    return copied


def build(stage: Path, outdir: Path) -> None:
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), str(stage)],
                   check=True, stdout=subprocess.DEVNULL)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist")
    parser.add_argument("--stage", type=Path, default=ROOT / "build" / "dists")
    args = parser.parse_args(argv)
    release = version()
    args.outdir.mkdir(parents=True, exist_ok=True)
    for name in LAYOUT:
        for old in args.outdir.glob(f"{name}-*"):
            old.unlink()
        stage = args.stage / name
        print(f"==> {name} {release}: assembling in {stage}", flush=True)
        copied = assemble(name, stage, release)
        print(f"    {copied} files; building the sdist, then the wheel from it", flush=True)
        build(stage, args.outdir)
        for artifact in sorted(args.outdir.glob(f"{name}-*")):
            print(f"    {artifact.relative_to(ROOT) if artifact.is_relative_to(ROOT) else artifact} "
                  f"({artifact.stat().st_size // 1024} KiB)", flush=True)


if __name__ == "__main__":
    main()
