"""The modules of :mod:`dmlnb` import each other without a cycle.

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import``
anywhere in a file counts (inside a function or under ``if TYPE_CHECKING:`` too), relative
imports resolved. ``from dmlnb.x import name`` is an edge to ``dmlnb.x``, or to ``dmlnb.x.name``
when that is a submodule; a package's ``__init__`` is the module named after the package.
Imports of modules outside the package are left out, and so is a module importing itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_names(package_dir: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` of every ``.py`` file under ``package_dir`` (a package's
    ``__init__.py`` under the package's own name)."""
    names: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool
) -> Iterator[tuple[str, ...]]:
    """For each name ``node`` (a statement of ``module``) imports, the dotted names it may be, in
    order: ``(M,)`` for ``import M``, ``(M.a, M)`` for ``from M import a``."""
    if isinstance(node, ast.Import):
        yield from ((alias.name,) for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = ".".join(package[: len(package) - node.level + 1])
        base = f"{anchor}.{base}" if base else anchor
    yield from ((f"{base}.{alias.name}", base) for alias in node.names)


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """``{module: the modules of the same package it imports}`` for the package at
    ``package_dir`` (see the module docstring for what counts as an edge)."""
    files = module_names(package_dir)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for candidates in _imported(node, module, is_package):
                    target = next((name for name in candidates if name in files), None)
                    if target is not None and target != module:
                        edges.add(target)
    return graph


def find_cycle(graph: Mapping[str, Set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as ``[a, b, ..., a]`` (each imports the next), or ``None``; the
    search visits modules and edges in sorted order, so the cycle named is always the same."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in done:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


def test_dmlnb_has_no_import_cycle():
    graph = import_graph(ROOT / "dmlnb")
    assert "dmlnb.data.decoded" in graph["dmlnb.data.cached_images"]  # the graph was read
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_find_cycle_names_the_cycle_of_a_fabricated_graph():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({**graph, "c": set()}) is None
    assert find_cycle({"x": {"x"}}) == ["x", "x"]


def test_import_graph_counts_every_kind_of_import(tmp_path):
    """Function-level, ``TYPE_CHECKING`` and relative imports are edges; ``from pkg import sub``
    is an edge to the submodule ``pkg.sub``, ``from pkg.mod import name`` one to ``pkg.mod``."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg import sub\n",
        "a.py": "import os\n\ndef f():\n    from pkg.b import g\n    return g\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.c import C\n",
        "sub/__init__.py": "from . import c\n",
        "sub/c.py": "from .. import a\nfrom ..sub import c\nimport pkg.b as b\n",
    }
    for name, source in files.items():
        (pkg / name).write_text(source)
    assert import_graph(pkg) == {
        "pkg": {"pkg.sub"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg.a", "pkg.b"},
    }
    assert find_cycle(import_graph(pkg)) == ["pkg.sub.c", "pkg.a", "pkg.b", "pkg.sub.c"]


ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def floors(text: str) -> dict[str, int]:
    """``{module or package under dmlnb: floor}`` from the floors table of ARCHITECTURE.md (rows
    ``| N | `a`, `b` | ... |``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for name in cells[1].replace("`", "").split(","):
                out[name.strip()] = int(cells[0])
    return out


def _unit(module: str) -> str:
    """The floor unit of ``dmlnb.x.y``: ``x`` (``dmlnb`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: Mapping[str, Set[str]], floor: Mapping[str, int]) -> list[str]:
    """Every import of ``graph`` from one unit to another that is not to a lower floor, and every
    unit ``floor`` does not place."""
    units = {_unit(m) for m in graph}
    bad = [f"{u} is on no floor of ARCHITECTURE.md" for u in sorted(units - set(floor))]
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = _unit(module), _unit(target)
            if a != b and a in floor and b in floor and floor[b] >= floor[a]:
                bad.append(f"{module} (floor {floor[a]}) imports {target} (floor {floor[b]})")
    return bad


def test_every_import_goes_down_the_floors_of_the_architecture() -> None:
    floor = floors(ARCHITECTURE.read_text())
    assert floor["dmlnb"] == 0 and floor["__main__"] == max(floor.values())
    bad = upward_imports(import_graph(ROOT / "dmlnb"), floor)
    assert not bad, "imports against ARCHITECTURE.md's floors:\n" + "\n".join(bad)


def test_the_floor_check_finds_an_upward_import_and_an_unplaced_module() -> None:
    graph = {"dmlnb.a": {"dmlnb.b.x"}, "dmlnb.b.x": set(), "dmlnb.c": set()}
    assert upward_imports(graph, {"a": 1, "b": 0, "c": 0}) == []
    assert upward_imports(graph, {"a": 0, "b": 0, "c": 0}) == [
        "dmlnb.a (floor 0) imports dmlnb.b.x (floor 0)"
    ]
    assert upward_imports(graph, {"a": 1, "b": 0}) == ["c is on no floor of ARCHITECTURE.md"]
