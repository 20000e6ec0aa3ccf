"""The two distributions ``./dev dist`` builds (distributions/make.py): what
each wheel and sdist carries, the one version, and an echomq wheel that
works from a zip in a Python without Django (``.ci/run`` installs both
wheels with pip in a fresh virtualenv and runs the whole stack from there)."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
import redis
from packaging.requirements import Requirement

from echomq.scripts import lua_dir

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


def tracked(folder: str) -> set[str]:
    """Files git knows under ``folder`` (tracked or new, not ignored), relative to it."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    return {name[len(folder) + 1:] for name in out if (ROOT / name).is_file() and "__pycache__" not in name}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, str(ROOT / "distributions" / "make.py"), "--outdir", str(out / "dist"),
                    "--stage", str(out / "stage")], check=True, capture_output=True)
    return out / "dist"


def wheel(dist: Path, name: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(dist / f"{name}-{VERSION}-py3-none-any.whl")


def metadata(whl: zipfile.ZipFile, name: str) -> list[tuple[str, str]]:
    text = whl.read(f"{name}-{VERSION}.dist-info/METADATA").decode()
    return [tuple(line.split(": ", 1)) for line in text.split("\n\n", 1)[0].splitlines()]


def test_dist_makes_two_sdists_and_two_wheels_of_the_one_version(dist):
    assert sorted(p.name for p in dist.iterdir()) == sorted(
        [f"codemojex-{VERSION}-py3-none-any.whl", f"codemojex-{VERSION}.tar.gz",
         f"echomq-{VERSION}-py3-none-any.whl", f"echomq-{VERSION}.tar.gz"])


def test_the_echomq_wheel_carries_the_lua_bundle_but_not_the_games_scripts(dist):
    whl = wheel(dist, "echomq")
    names = set(whl.namelist())
    lua = {f"echomq/lua/{name}" for name in tracked("lua") if not name.startswith("games/")}
    assert lua and lua <= names
    assert {f"echomq/{name}" for name in tracked("echomq")} <= names  # code and admin templates
    assert not [n for n in names if n.startswith("echomq/lua/games/") or not n.startswith(("echomq/", "echomq-"))]
    meta = metadata(whl, "echomq")
    assert ("Version", VERSION) in meta
    required = [Requirement(v) for k, v in meta if k == "Requires-Dist"]
    assert [r.name for r in required if r.marker is None] == ["redis"]  # the only required dependency
    extras = {v for k, v in meta if k == "Provides-Extra"}
    assert {"django", "hiredis"} <= extras
    assert [str(r.specifier) for r in required if r.name == "Django" and r.marker.evaluate({"extra": "django"})]


def test_the_codemojex_wheel_carries_templates_static_migrations_and_game_scripts(dist):
    whl = wheel(dist, "codemojex")
    names = set(whl.namelist())
    for folder in ("templates", "jinja2", "static", "migrations"):
        files = {f"games/{folder}/{name}" for name in tracked(f"games/{folder}")}
        assert files and files <= names, folder
    assert {f"games/lua/{name}" for name in tracked("lua/games")} <= names  # lua/games/ rides with the game
    assert {f"codemojex_site/{name}" for name in tracked("codemojex_site")} <= names
    assert not [n for n in names if n.startswith(("echomq/", "tests/", "bench/", "lua/"))]
    meta = metadata(whl, "codemojex")
    required = {Requirement(v).name: Requirement(v) for k, v in meta if k == "Requires-Dist"}
    assert str(required["echomq"].specifier) == f"=={VERSION}" and "django" in required["echomq"].extras
    scripts = whl.read(f"codemojex-{VERSION}.dist-info/entry_points.txt").decode()
    assert "codemojex = codemojex_site.manage:main" in scripts


def test_each_sdist_holds_what_its_wheel_is_built_from(dist):
    for name, data in (("echomq", "echomq/lua/enqueue.lua"), ("codemojex", "games/jinja2/games/round.html")):
        with tarfile.open(dist / f"{name}-{VERSION}.tar.gz") as sdist:
            members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
            pyproject = tomllib.loads(sdist.extractfile(f"{name}-{VERSION}/pyproject.toml").read().decode())
        assert {"VERSION", "README.md", "pyproject.toml", data} <= members
        assert pyproject["project"]["name"] == name


def test_the_development_install_has_every_dependency_of_both_distributions():
    declared = set()
    for name in ("echomq", "codemojex"):
        project = tomllib.loads((ROOT / "distributions" / name / "pyproject.toml").read_text())["project"]
        declared |= {str(Requirement(r)) for r in project["dependencies"] if not r.startswith("echomq")}
        declared |= {str(Requirement(r)) for extra in project.get("optional-dependencies", {}).values()
                     for r in extra}
    installed = {str(Requirement(r)) for r in importlib.metadata.requires("codemojex-dev") if "extra ==" not in r}
    assert declared == installed


def test_a_package_without_lua_scripts_says_where_it_looked():
    with pytest.raises(FileNotFoundError, match="no Lua scripts for codemojex_site: neither .*lua"):
        lua_dir("codemojex_site", "lua/codemojex_site")


def test_echomq_from_its_wheel_as_a_zip_works_in_a_python_without_django(dist, tmp_path, valkey_server):
    """The core imports no Django, and reads its scripts from inside the zip."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    deps = tmp_path / "deps"
    deps.mkdir()
    (deps / "redis").symlink_to(Path(redis.__file__).parent)  # redis-py, and nothing else
    script = textwrap.dedent("""
        import importlib, pkgutil, sys, zipfile
        try:
            import django
        except ModuleNotFoundError:
            pass
        else:
            raise SystemExit("this Python has Django: the test proves nothing")
        import echomq
        core = [m.name for m in pkgutil.walk_packages(echomq.__path__, "echomq.")
                if not m.name.startswith("echomq.contrib")]
        for name in core:
            importlib.import_module(name)
        assert ".whl/echomq/" in echomq.__file__, echomq.__file__
        from echomq.scripts import LUA_DIR
        assert isinstance(LUA_DIR, zipfile.Path), LUA_DIR
        leaked = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
        assert not leaked, leaked
        import redis
        queue = echomq.Queue("zipq", redis.Redis.from_url(sys.argv[1]))
        job_id, status = queue.enqueue(b"hello")
        job = queue.claim(lease_ms=10_000)
        assert (job.id, job.payload, status) == (job_id, b"hello", "enqueued")
        assert queue.complete(job.id, job.attempts) is True
        assert queue.counts()["pending"] == queue.counts()["active"] == 0
        print(len(core), "core modules")
    """)
    run = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", script, valkey_server.url],
                         cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": f"{dist / f'echomq-{VERSION}-py3-none-any.whl'}:{deps}"})
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[0]) >= 15, run.stdout
