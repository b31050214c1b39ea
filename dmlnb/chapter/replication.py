"""Do a chapter's verdicts replicate? Its claims judged on an independent set of seeds, compared
claim by claim with the book's.

``python -m dmlnb replicate NOTEBOOK --seed-offset 100 --runs DIR`` trains the chapter again with
every seed shifted (:func:`dmlnb.chapter.train_runs`'s ``seed_offset``) into ``DIR``, renders it
from those runs (writing ``DIR/<profile>/claims.json``) and compares that file with the book's
(:func:`compare_claims`): a claim *agrees* when both verdicts fall in the same category
(:func:`dmlnb.reporting.verdict_category`). Claims this scale cannot test (their verdict "not
tested" on both sides) are listed but not counted.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dmlnb.chapter.claims import CLAIMS_FILE
from dmlnb.records import read_json
from dmlnb.reporting import NOT_TESTED

__all__ = ["compare_claims", "replication_summary", "REPLICATION_COLUMNS"]

#: The columns of :func:`compare_claims`.
REPLICATION_COLUMNS = [
    "id",
    "claim",
    "book",
    "replica",
    "agrees",
    "book effect",
    "replica effect",
    "unit",
]


def _claims(path: str | Path) -> tuple[dict, Path]:
    path = Path(path)
    path = path / CLAIMS_FILE if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(
            f"no {CLAIMS_FILE} at {path}: render the chapter (it writes its claims beside its "
            "runs, results/<chapter>/<profile>/claims.json) first"
        )
    return read_json(path), path


def _effect(row: dict) -> float | None:
    return None if row["effect"] is None else row["effect"] * row["scale"]


def compare_claims(book: str | Path, replica: str | Path) -> pd.DataFrame:
    """The claims of two ``claims.json`` files (or the folders holding them) side by side, by
    claim id: both verdicts, whether they fall in one category (``agrees``; ``None`` for a claim
    neither side could test) and both effects in the units the book shows (``unit``).

    Raises:
        FileNotFoundError: a side has no ``claims.json``.
        ValueError: the two files are of different chapters or profiles, or name other claims.
    """
    (a, pa), (b, pb) = _claims(book), _claims(replica)
    if (a["chapter"], a["profile"]) != (b["chapter"], b["profile"]):
        raise ValueError(
            f"{pa} is chapter {a['chapter']!r} at {a['profile']!r} but {pb} is {b['chapter']!r} "
            f"at {b['profile']!r}: compare a chapter with its own replica"
        )
    ours = {row["id"]: row for row in b["claims"]}
    if [row["id"] for row in a["claims"]] != list(ours):
        missing = sorted({row["id"] for row in a["claims"]} ^ set(ours))
        raise ValueError(
            f"{pa} and {pb} state other claims ({missing}): render both with the same code"
        )
    rows = []
    for row in a["claims"]:
        other = ours[row["id"]]
        untested = row["category"] == other["category"] == NOT_TESTED
        rows.append(
            {
                "id": row["id"],
                "claim": row["claim"],
                "book": row["verdict"],
                "replica": other["verdict"],
                "agrees": None if untested else row["category"] == other["category"],
                "book effect": _effect(row),
                "replica effect": _effect(other),
                "unit": row["unit"],
            }
        )
    return pd.DataFrame(rows, columns=REPLICATION_COLUMNS)


def replication_summary(frame: pd.DataFrame) -> dict[str, int | float | None]:
    """How many claims of a :func:`compare_claims` frame could be tested, agree and disagree,
    and the share that agrees (``None`` when none could be tested)."""
    tested = frame[frame["agrees"].notna()]
    agreeing = int(tested["agrees"].astype(bool).sum())
    return {
        "claims": len(frame),
        "tested": len(tested),
        "agreeing": agreeing,
        "disagreeing": len(tested) - agreeing,
        "agreement": agreeing / len(tested) if len(tested) else None,
    }
