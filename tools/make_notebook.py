"""Build a notebook from a percent-format script (``# %%`` code cells, ``# %% [markdown]`` cells).

Usage: python tools/make_notebook.py SOURCE.py notebooks/NAME.ipynb

The script is the editable source of a notebook's cells; the first code cell whose first line is
``# parameters`` is tagged ``parameters`` for papermill. Outputs are produced by papermill
(``make notebooks``), never by this tool.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def build(source: Path) -> nbformat.NotebookNode:
    cells = []
    kind, lines = None, []

    def flush() -> None:
        if kind is None:
            return
        text = "\n".join(lines).strip("\n")
        if kind == "markdown":
            text = "\n".join(
                l[2:] if l.startswith("# ") else l.lstrip("#") for l in text.splitlines()
            )
            cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            cell = nbformat.v4.new_code_cell(text)
            if text.startswith("# parameters"):
                cell.metadata["tags"] = ["parameters"]
            cells.append(cell)

    for line in source.read_text().splitlines():
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        else:
            lines.append(line)
    flush()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


if __name__ == "__main__":
    src, dst = map(Path, sys.argv[1:3])
    nbformat.write(build(src), dst)
    print(f"wrote {dst}")
