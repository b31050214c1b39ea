"""The PROFS paper's numbers (Tables 1-2, Sec. 5.4's HNCM cost), labelled as reported, and the
paper's differences in words."""

from __future__ import annotations

import math

import pandas as pd

from dmlnb.experiments.profs.losses import (
    LOSSES,
    TABLE2_LOSSES,
)
from dmlnb.reported import reported_table

__all__ = [
    "PAPER_PROFS_LOSSES",
    "REPORTED_HNCM_COST",
    "REPORTED_ROWS",
    "REPORTED_TABLE1",
    "REPORTED_TABLE2",
    "describe_reported",
    "reported_differences",
    "reported_gains",
]


def reported_differences(better: str, worse: str, table2: bool = True) -> pd.DataFrame:
    """Every cell of the paper's Table 1 (and, with ``table2``, Table 2) where a loss has both
    variants: table, loss, dataset, metric and ``better - worse`` (points, rounded to the tables'
    0.1). Table 2's ``plain`` rows are the cited papers' published numbers (Margin [48],
    SoftTriple [30]), not runs of the same setup: they are kept apart (``table2=False``) where a
    claim's evidence must be like for like."""
    rows = []
    for row in LOSSES:
        if (row, better) in REPORTED_ROWS and (row, worse) in REPORTED_ROWS:
            d = (
                REPORTED_TABLE1.loc[REPORTED_ROWS[row, better]]
                - REPORTED_TABLE1.loc[REPORTED_ROWS[row, worse]]
            )
            rows += [("Table 1", row, ds, m, x) for (ds, m), x in d.items()]
    if table2:
        for row in TABLE2_LOSSES:
            d = REPORTED_TABLE2.loc[(row, better)] - REPORTED_TABLE2.loc[(row, worse)]
            rows += [("Table 2", row, ds, m, x) for (ds, m), x in d.items()]
    frame = pd.DataFrame(
        rows, columns=["table", "loss", "dataset", "metric", "difference"]
    ).dropna()
    frame["difference"] = frame["difference"].round(1)
    return frame.reset_index(drop=True)


def describe_reported(diff: pd.DataFrame) -> str:
    """A :func:`reported_differences` frame in words: in how many cells the first variant is
    higher, equal and lower (naming the lower ones; only the R@1 ones when there are more than
    five), and how many of the R@1 cells are higher."""
    d = diff["difference"]
    low = diff[d < 0]
    r1 = diff[diff["metric"] == "R@1"]["difference"]
    shown = low if len(low) <= 5 else low[low["metric"] == "R@1"]  # many: name the R@1 cells only
    named = "; ".join(
        f"{r.loss} {r.dataset} {r.metric} {r.difference:+.1f}" for r in shown.itertuples()
    )
    named = named if len(shown) == len(low) else f"R@1: {named}" if len(shown) else ""
    tables = sorted(set(diff["table"]))
    where = (
        tables[0] if len(tables) == 1 else "Tables " + " and ".join(t.split()[-1] for t in tables)
    )
    return (
        f"{where}: higher in {int((d > 0).sum())} of {len(d)} cells, "
        f"equal in {int((d == 0).sum())}, lower in {int((d < 0).sum())}"
        + (f" ({named})" if named else "")
        + f"; R@1 higher in {int((r1 > 0).sum())} of {len(r1)}"
    )


#: Losses of Table 1 that the paper integrates with PROFS (it has no PROFS row for Triplet-Semi).
#: (``test_reported_rows_cover_the_tables`` checks it against :data:`REPORTED_ROWS`.)
PAPER_PROFS_LOSSES: tuple[str, ...] = tuple(row for row in LOSSES if row != "Triplet-Semi")


# ----------------------------------------------------------------------------------------------

#: Table 1 of the paper (GoogLeNet V1, 512-d), in %: rows by the paper's names
#: (dmlnb/experiments/reported/profs_table1.csv).
REPORTED_TABLE1 = reported_table("profs_table1")

_PREFIX = {
    "Contrastive-Hard": "C",
    "Triplet-Hard": "T",
    "Lifted": "L",
    "N-pair": "N",
    "Angular": "A",
    "Margin-Hard": "M",
    "MS": "MS",
}
#: ``(our loss row, variant)`` -> the paper's row. The paper has one T-PROFS pair of rows; its
#: stated gains (up to 3.2 NMI, 11.7 F1, 9.5 R@1 points) are over Triplet-Hard, so they are
#: mapped there; Triplet-Semi has only its plain row.
REPORTED_ROWS: dict[tuple[str, str], str] = {
    **{(row, "plain"): row for row in LOSSES},
    **{(row, "PROFS"): f"{p}-PROFS" for row, p in _PREFIX.items()},
    **{(row, "PROFS-HNCM"): f"{p}-PROFS-HNCM" for row, p in _PREFIX.items()},
}

#: Table 2 of the paper (Margin: ResNet-50; SoftTriple: BN-Inception), Recall@K in %
#: (dmlnb/experiments/reported/profs_table2.csv).
REPORTED_TABLE2 = reported_table("profs_table2")

#: Sec. 5.4: HNCM's increase of the overall computation time, in %.
REPORTED_HNCM_COST: dict[str, float] = {"CUB-200-2011 & CARS196": 0.008, "SOP": 0.9}


def reported_gains(dataset: str = "CUB-200-2011", metric: str = "R@1") -> pd.DataFrame:
    """The paper's gains (points) of PROFS and PROFS-HNCM over each plain loss of Table 1."""
    t = REPORTED_TABLE1[(dataset, metric)]
    rows = {}
    for row in LOSSES:
        plain = t[REPORTED_ROWS[row, "plain"]]
        rows[row] = {
            f"{v} gain": (t[REPORTED_ROWS[row, v]] - plain)
            if (row, v) in REPORTED_ROWS
            else math.nan
            for v in ("PROFS", "PROFS-HNCM")
        }
    return pd.DataFrame(rows).T
