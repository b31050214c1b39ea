"""A training pass (``python -m dmlnb train``) executes a copy of the chapter without its cells
tagged ``skip-in-training`` (:func:`dmlnb.launch.training_copy`): the copy keeps every other cell
in order, a tagged cell is not executed, the launcher names cells by their index in the chapter,
and no untagged cell of a chapter reads a name that only tagged cells define (names only: an
object a tagged cell changes in place is not seen). That the copy makes every run, analysis and
table a chapter reads is checked by rendering each chapter at the smoke profile, with training
disabled, from what its copy made: ``tests/test_notebooks.py``."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import nbformat
import pytest
from fabricated import parameters_notebook

from dmlnb.launch import SKIPPED_IN_TRAINING, slowest_cells, train_notebook, training_copy

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CHAPTERS = sorted((REPO / "notebooks").glob("*.ipynb"))
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _local_names(node: ast.AST) -> set[str]:
    """Names bound inside ``node``'s own scope: a comprehension's targets, a function's arguments,
    assignments and imports, a lambda's arguments."""
    if isinstance(node, _COMPREHENSIONS):
        return {
            n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
    if isinstance(node, (ast.Lambda, *_FUNCTIONS)):
        a = node.args
        names = {
            x.arg
            for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
        }
        if isinstance(node, _FUNCTIONS):
            names |= {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            names |= {
                (a.asname or a.name).split(".")[0]
                for n in ast.walk(node)
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names
            }
        return names
    return set()


def cell_names(source: str) -> tuple[set[str], set[str]]:
    """``(defined, read)``: the names a code cell binds at the notebook's top level, and the names
    it reads that it does not bind in an inner scope (IPython magics are left out)."""
    tree = ast.parse(
        "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    )
    defined: set[str] = set()
    read: set[str] = set()

    def visit(node: ast.AST, local: set[str], inner: bool) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                defined.update([] if inner else [node.id])
            elif node.id not in local:
                read.add(node.id)
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)) and not inner:
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not inner:
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        bound = _local_names(node)
        for child in ast.iter_child_nodes(node):
            visit(
                child,
                local | bound,
                inner or isinstance(node, (*_COMPREHENSIONS, *_FUNCTIONS, ast.Lambda)),
            )

    visit(tree, set(), False)
    return defined, read


def names_read_from_skipped_cells(notebook: nbformat.NotebookNode) -> dict[int, set[str]]:
    """``{cell index: names}``: the names each untagged code cell reads whose last definition
    before it is in a cell tagged :data:`SKIPPED_IN_TRAINING`."""
    last_definition: dict[str, int] = {}
    skipped: set[int] = set()
    found: dict[int, set[str]] = {}
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        defined, read = cell_names(cell.source)
        if SKIPPED_IN_TRAINING in cell.metadata.get("tags", []):
            skipped.add(i)
        else:
            missing = {n for n in read - defined if last_definition.get(n) in skipped}
            if missing:
                found[i] = missing
        last_definition.update(dict.fromkeys(defined, i))
    return found


def test_the_reader_finds_a_name_only_a_skipped_cell_defines():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("runs = [1, 2]\nfigure = [r for r in runs]"),
        nbformat.v4.new_code_cell("total = sum(figure)\nf = lambda figure: figure"),
        nbformat.v4.new_code_cell("print(total, [figure for figure in runs])"),
    ]
    assert names_read_from_skipped_cells(nb) == {}
    nb.cells[0].metadata["tags"] = [SKIPPED_IN_TRAINING]
    assert names_read_from_skipped_cells(nb) == {1: {"figure"}, 2: {"runs"}}
    assert cell_names(
        "def g():\n    import os\n    x = os.sep\n    return x\nasync def h():\n    y = 1"
    ) == ({"g", "h"}, set())


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_cell_of_a_training_pass_reads_what_only_a_skipped_cell_defines(path):
    nb = nbformat.read(path, as_version=4)
    assert names_read_from_skipped_cells(nb) == {}
    for cell in nb.cells:
        if SKIPPED_IN_TRAINING in cell.metadata.get("tags", []):
            assert cell.cell_type == "code" and "parameters" not in cell.metadata["tags"]


def test_the_copy_keeps_every_untagged_cell_in_order(tmp_path):
    path = parameters_notebook(tmp_path / "chapter.ipynb", "x = 1", "a = 1", "b = 2", "c = 3")
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].metadata["tags"] = [SKIPPED_IN_TRAINING]
    nbformat.write(nb, tmp_path / "chapter.ipynb")
    (tmp_path / "pass").mkdir()
    copy = nbformat.read(training_copy(tmp_path / "chapter.ipynb", tmp_path / "pass"), as_version=4)
    assert [c.source for c in copy.cells] == ["x = 1", "a = 1", "c = 3"]
    assert [c.metadata["dmlnb_source_cell"] for c in copy.cells] == [0, 1, 3]
    assert copy.cells[0].metadata["tags"] == ["parameters"]
    copy.cells[2].metadata["papermill"] = {"duration": 5.0}
    copy.cells[1].metadata["papermill"] = {"duration": 1.0}
    assert slowest_cells(copy) == [(3, 5.0), (1, 1.0)]  # named by their index in the chapter


def test_a_training_pass_does_not_execute_a_tagged_cell(tmp_path, monkeypatch):
    paths = [str(REPO), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(paths)
    )  # the kernel imports this checkout and fabricated
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    root = tmp_path / "runs"
    path = parameters_notebook(
        tmp_path / "chapter.ipynb",
        f'profile = "default"\nretrain = False\nroot = {str(root)!r}',
        "from pathlib import Path\nfrom fabricated import fake_run\nfake_run(Path(root), 0)",
        "raise RuntimeError('a figure the training pass must not draw')",
        "fake_run(Path(root), 1)",
    )
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].metadata["tags"] = [SKIPPED_IN_TRAINING]
    nbformat.write(nb, path)
    trained = train_notebook(path, 1, "smoke", say=lambda _: None)
    assert trained == [["r0", "r1"]]
    assert (root / "r1" / "record.json").exists()
    assert (
        "dmlnb_source_cell" not in nbformat.read(path, as_version=4).cells[0].metadata
    )  # the chapter is unchanged
