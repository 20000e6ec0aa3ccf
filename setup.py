"""The development install's dependencies: both distributions' (read from
distributions/*/pyproject.toml, where they are declared once), every extra
of echomq included, and codemojex's own pin on echomq left out (echomq is
this checkout)."""
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def declared(dist: str) -> dict:
    return tomllib.loads((HERE / "distributions" / dist / "pyproject.toml").read_text())["project"]


def development_requirements() -> list[str]:
    echomq, codemojex = declared("echomq"), declared("codemojex")
    wanted = [*echomq["dependencies"], *(r for extra in echomq["optional-dependencies"].values() for r in extra),
              *(r for r in codemojex["dependencies"] if not r.startswith("echomq"))]
    return list(dict.fromkeys(wanted))


setup(install_requires=development_requirements())
