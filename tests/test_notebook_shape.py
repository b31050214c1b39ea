"""What a chapter's notebook may hold (issue #45): code cells of at most 200 lines in all and 25
each (the experiment shown, the plumbing in the package), and no result typed into its Markdown:
a number with a decimal point or a percent sign in the prose must be glued from code
(``{glue:text}`name```), not typed, and so must a count of 10 or more (a setting or a dataset's
fact). Names of the papers' tables, figures, sections and equations, years, metric names and math
are not results and are not counted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

MAX_CODE_LINES, MAX_CELL_LINES = 200, 25


#: What in Markdown is not a typed result: code, math, roles (glue, cite, doc), link targets,
#: HTML, references to the papers' parts, years, metric names.
_NOT_RESULTS = [
    r"```.*?```",
    r"\$\$.*?\$\$",
    r"\$[^$]*\$",
    r"\{[a-z:]+\}`[^`]*`",
    r"`[^`]*`",
    r"\]\([^)]*\)",
    r"<[^>]+>",
    r"\b(?:Tables?|Figs?\.|Figures?|Secs?\.|Sections?|Eqs?\.|Lemmas?|Algorithms?|Propositions?"
    r"|Theorems?|Appendix|Corollary|Definition)\s*[\dA-Z][\d.]*",
    r"\b(?:R|Recall|MAP|P|F)@\w+",
    r"\b(?:19|20)\d\d[a-z]?\b",
]
_RESULT = re.compile(r"(?<![\w.])\d+(?:\.\d+|%)")
#: A typed count of 10 or more standing alone (``"27 of the 136 classes"``, ``"65 epochs"``,
#: ``"11,316 classes"``): a setting or a dataset's fact that a reader's change would leave stale.
#: Not a name's part (``ResNet-50``, ``512-d``, ``Hotels-50K``), a citation (``[48]``), a
#: decimal (:data:`_RESULT`) or a small number (a definition's 0 and 1, "two modes").
_COUNT = re.compile(r"(?<![\w.,\-−×/#])(?:\d{1,3}(?:,\d{3})+|\d{2,})(?![\w\-]|\.\d|,\d)")
_CITATION = r"\[\d+(?:,\s*\d+)*\]"


def code_lines(notebook: dict) -> list[int]:
    """The number of source lines of each code cell."""
    return [
        len("".join(c["source"]).splitlines())
        for c in notebook["cells"]
        if c["cell_type"] == "code"
    ]


def _prose(notebook: dict) -> list[str]:
    """The Markdown cells' text without what is not a typed number (:data:`_NOT_RESULTS`)."""
    out = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for pattern in (*_NOT_RESULTS, _CITATION):
            text = re.sub(pattern, " ", text, flags=re.S)
        out.append(text)
    return out


def typed_results(notebook: dict) -> list[str]:
    """Numbers with a decimal point or a percent sign typed in the Markdown cells."""
    return [n for text in _prose(notebook) for n in _RESULT.findall(text)]


def typed_counts(notebook: dict) -> list[str]:
    """Counts of 10 or more typed in the Markdown cells (:data:`_COUNT`)."""
    return [n for text in _prose(notebook) for n in _COUNT.findall(text)]


@pytest.mark.parametrize(
    "path",
    NOTEBOOKS,
    ids=lambda p: p.stem,
)
def test_a_chapter_shows_its_experiment_and_types_no_result(path: Path) -> None:
    notebook = json.loads(path.read_text())
    lines = code_lines(notebook)
    assert sum(lines) <= MAX_CODE_LINES, f"{sum(lines)} code lines; move plumbing to the package"
    assert max(lines) <= MAX_CELL_LINES, f"a {max(lines)}-line cell; split it or move code out"
    assert not typed_results(notebook), "glue these numbers from code: " + ", ".join(
        typed_results(notebook)
    )


@pytest.mark.parametrize(
    "path",
    NOTEBOOKS,
    ids=lambda p: p.stem,
)
def test_a_chapter_types_no_count(path: Path) -> None:
    counts = typed_counts(json.loads(path.read_text()))
    assert not counts, "glue these counts from code: " + ", ".join(counts)


def test_typed_results_are_found() -> None:
    cell = {
        "cell_type": "markdown",
        "source": [
            "Table 2 reports 59.2 R@1 (44% of runs); Sec. 5.1 and Eq. 9, in 2020, "
            "{glue:text}`r1` and $x = 0.5$ are fine, so is `lr=0.1`; 3 seeds are a count."
        ],
    }
    assert typed_results({"cells": [cell]}) == ["59.2", "44%"]


def test_typed_counts_are_found() -> None:
    cell = {
        "cell_type": "markdown",
        "source": [
            "27 of the 136 classes, 11,316 test classes, 65 epochs; ResNet-50, 512-d, "
            "Hotels-50K, [48], issue #46, 59.2, 3 seeds, Table 12, 2020 and {glue:text}`n` "
            "are not counts."
        ],
    }
    assert typed_counts({"cells": [cell]}) == ["27", "136", "11,316", "65"]
