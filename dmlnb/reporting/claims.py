"""A paper's claim beside our evidence and the verdict the rule computed (:class:`Claim`), the
claims table, and the pair of claims for a complexity claim timed on other code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from dmlnb.reporting.caveats import shape_unchecked
from dmlnb.reporting.rule import compare_to_band, order_band
from dmlnb.reporting.verdicts import Verdict, not_tested

__all__ = ["Claim", "CLAIM_COLUMNS", "claims_table", "implementation_claims"]


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the paper's evidence, ours, and the :class:`Verdict` the rule
    computed from our runs (:func:`compare`, :func:`compare_to_threshold`,
    :func:`holds_for_every`, :func:`group_verdict`, :func:`interior_optimum`, or
    :func:`not_tested` with the reason). A typed string is refused."""

    claim: str
    paper_evidence: str
    our_evidence: str
    verdict: Verdict

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):
            raise TypeError(
                f"claim {self.claim!r}: verdict {self.verdict!r} is a "
                f"{type(self.verdict).__name__}; verdicts come from the rule "
                "(dmlnb.reporting.compare and friends), never typed"
            )


CLAIM_COLUMNS = [
    "claim",
    "paper's evidence",
    "our evidence",
    "verdict",
    "effect",
    "90% interval",
    "runs per side",
    "note",
]


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a DataFrame: claim / paper's evidence / our evidence / verdict, and the
    verdict's evidence (effect, 90% interval, runs per side, note)."""
    rows = [
        {
            "claim": c.claim,
            "paper's evidence": c.paper_evidence,
            "our evidence": c.our_evidence,
            "verdict": str(c.verdict),
            **c.verdict.evidence(),
        }
        for c in claims
    ]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def implementation_claims(
    paper_claim: str,
    paper_evidence: str,
    our_claim: str,
    our_evidence: str,
    slopes: Sequence[float],
    order: float,
    why: str,
    sizes: Sequence[int] = (),
) -> tuple[Claim, Claim]:
    """The rule for a paper's complexity claim timed on code that is not what the claim describes
    (another algorithm, or the algorithm used another way; ``why`` says how it differs): the paper's
    claim is not tested (``why`` is the reason), and the same order, tested on the code that ran, is
    a separate measurement of ours: the per-repeat log-log ``slopes`` within :func:`order_band` of
    ``order`` (:func:`compare_to_band`), undecided when a repeat's slope rests on too few of
    ``sizes`` (the sizes each repeat was fitted on, :func:`shape_unchecked`). Returns
    ``(the paper's claim, our measurement)``; ``our_evidence`` states the slopes and sizes."""
    low, high = order_band(order)
    paper = Claim(
        paper_claim,
        paper_evidence,
        f"timed on dmlnb's implementation only: see '{our_claim}'",
        not_tested(f"the timed code is not what the claim describes: {why}"),
    )
    ours = Claim(
        our_claim,
        "— (the paper times no implementation)",
        our_evidence,
        shape_unchecked(compare_to_band(slopes, low, high), sizes),
    )
    return paper, ours
