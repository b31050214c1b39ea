"""pyproject.toml and environment.yml describe the same dependency set."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_pins_what_pyproject_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(map(_norm, project["dependencies"]))
    for extra in project["optional-dependencies"].values():
        wanted |= set(map(_norm, extra))
    pip_lines = []
    in_pip = False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.strip() == "- pip:":
            in_pip = True
            continue
        if in_pip and line.strip().startswith("- "):
            pip_lines.append(line.strip()[2:])
    listed = {_norm(x) for x in pip_lines if x != "-e ."}
    assert listed == wanted, (
        f"only in pyproject: {wanted - listed}; only in environment.yml: {listed - wanted}"
    )


def test_the_reported_tables_are_package_data():
    """Every CSV that dmlnb.reported reads is matched by a package-data pattern, so it ships in
    the wheel (a table left out would make the installed chapters fail at import)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["dmlnb.experiments"]
    package = ROOT / "dmlnb" / "experiments"
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    tables = set((package / "reported").glob("*.csv"))
    assert tables, "no reported tables found"
    assert tables <= shipped, f"not package data: {sorted(p.name for p in tables - shipped)}"
