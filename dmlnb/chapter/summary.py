"""The book's verdicts at a glance: every chapter's ``claims.json`` counted by category, for the
front page (``book/verdicts.md``, written by ``python tools/front_page.py`` and checked against
the claims by ``tests/test_front_page.py``).

A claim is counted in its verdict's category (:func:`dmlnb.reporting.verdict_category`); the
claims this scale cannot test are counted by their typed reason (``needs-paper-data``,
``needs-gpu``, ``structurally-untestable``, ``not-run``) or, untested for their runs (collapsed,
a metric at its ceiling: :class:`~dmlnb.chapter.claim_tests.SetAside`), as ``set-aside``; and
``decided`` is the share of the tested claims whose verdict is "holds" (plain or qualified) or
"does not hold".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dmlnb.chapter.claims import CLAIMS_FILE, REASONS
from dmlnb.records import read_json
from dmlnb.reporting import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED, QUALIFIED_HOLDS

__all__ = ["book_verdicts", "verdicts_markdown", "SUMMARY_COLUMNS"]

#: The column of the claims not tested for their runs, without a typed reason (set aside).
SET_ASIDE = "set-aside"

#: The columns of :func:`book_verdicts`, after ``chapter``.
SUMMARY_COLUMNS = [
    "claims",
    HOLDS,
    QUALIFIED_HOLDS,
    FAILS,
    INCONCLUSIVE,
    NOT_TESTED,
    *REASONS,
    SET_ASIDE,
    "decided",
]


def book_verdicts(results_dir: str | Path, profile: str = "default") -> pd.DataFrame:
    """One row per chapter with a ``results_dir/<chapter>/<profile>/claims.json`` (sorted by
    chapter), :data:`SUMMARY_COLUMNS`: the claims, their count per category and per typed
    reason, and the share of tested claims decided (``NaN`` when none was tested)."""
    rows = []
    for path in sorted(Path(results_dir).glob(f"*/{profile}/{CLAIMS_FILE}")):
        claims = read_json(path)["claims"]
        row: dict = {"chapter": path.parent.parent.name, "claims": len(claims)}
        for column in SUMMARY_COLUMNS[1:-2]:
            key = "reason" if column in REASONS else "category"
            row[column] = sum(c[key] == column for c in claims)
        row[SET_ASIDE] = sum(c["category"] == NOT_TESTED and c["reason"] is None for c in claims)
        tested = len(claims) - row[NOT_TESTED]
        decided = row[HOLDS] + row[QUALIFIED_HOLDS] + row[FAILS]
        row["decided"] = decided / tested if tested else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=["chapter", *SUMMARY_COLUMNS])


#: The table's headers where the column's name is long.
_SHORT = {
    QUALIFIED_HOLDS: "holds (qual.)",
    NOT_TESTED: "not tested",
    "needs-paper-data": "data",
    "needs-gpu": "GPU",
    "structurally-untestable": "never",
    "not-run": "not run yet",
    SET_ASIDE: "set aside",
}


def verdicts_markdown(frame: pd.DataFrame, link: str = "../notebooks/{chapter}") -> str:
    """A :func:`book_verdicts` frame as a Markdown table, each chapter linked (``link``, a MyST
    ``{doc}`` target with ``{chapter}`` filled in), with a total row."""
    total = frame[SUMMARY_COLUMNS[:-1]].sum()
    tested = total["claims"] - total[NOT_TESTED]
    decided = total[HOLDS] + total[QUALIFIED_HOLDS] + total[FAILS]
    head = ["chapter", *(_SHORT.get(c, c) for c in SUMMARY_COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def share(x: float) -> str:
        return "—" if x != x else f"{x:.0%}"

    for _, row in frame.iterrows():
        cells = [f"{{doc}}`{link.format(chapter=row['chapter'])}`"]
        cells += [str(int(row[c])) for c in SUMMARY_COLUMNS[:-1]] + [share(row["decided"])]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**book**"] + [f"**{int(total[c])}**" for c in SUMMARY_COLUMNS[:-1]]
    cells.append(f"**{share(decided / tested if tested else float('nan'))}**")
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
