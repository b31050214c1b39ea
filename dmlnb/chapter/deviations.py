"""A chapter's departures from its paper, as data rows rendered by one function.

A :class:`Deviation` is one setting where the chapter's runs differ from the paper's: what the
paper does, what the runs do, and either the effect this profile measured or why it was not
measured (a typed reason of :data:`dmlnb.chapter.claims.REASONS`, or ``"not-measured"`` with the
scale that would). ``paper`` and ``ours`` are text, and what ``ours`` says of the runs must be
computed from the configuration that trained them (``f"{config.epochs} epochs"``), never typed:
a chapter builds its rows in a function of its configuration. :func:`deviations_frame` renders
every chapter's rows alike.

Example::

    Deviation("epochs", "150 (Sec. 4)", f"{config.epochs}, kept epoch on validation",
              effect="-3.1 R@1 at 5 vs 25 epochs (seed 0)")
    Deviation("backbone", "GoogLeNet (ImageNet)", config.model, why="needs-gpu",
              scale="the paper profile on a GPU")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dmlnb.chapter.claim_tests import REASON_WORDS, reason_in_words

__all__ = ["Deviation", "deviations_frame", "WHY_NOT", "WHY_NOT_WORDS"]

#: Why a deviation's effect was not measured: the claims' typed reasons, or that the profile
#: could measure it and does not yet (``"not-measured"``, with the scale that would).
WHY_NOT = ("needs-paper-data", "needs-gpu", "structurally-untestable", "not-measured")
#: Each of :data:`WHY_NOT` in a reader's words.
WHY_NOT_WORDS: dict[str, str] = {
    **{k: v for k, v in REASON_WORDS.items() if k in WHY_NOT},
    "not-measured": "this scale could measure it, not done yet",
}


@dataclass(frozen=True)
class Deviation:
    """One departure from the paper: the ``setting``, the ``paper``'s choice (with where it
    stands), ``ours`` (computed from the configuration), and either the measured ``effect`` or
    ``why`` it was not measured (one of :data:`WHY_NOT`) and the ``scale`` that would."""

    setting: str
    paper: str
    ours: str
    effect: str = ""
    why: str = ""
    scale: str = ""

    def __post_init__(self) -> None:
        if bool(self.effect) == bool(self.why):
            raise ValueError(
                f"deviation {self.setting!r}: give either the measured effect or why it was not "
                f"measured (why=one of {WHY_NOT}), not {'both' if self.effect else 'neither'}"
            )
        if self.why and self.why not in WHY_NOT:
            raise ValueError(f"deviation {self.setting!r}: why must be one of {WHY_NOT}")
        if self.why and not self.scale:
            raise ValueError(
                f"deviation {self.setting!r}: say at which scale it would be measured "
                "(scale='the paper profile on CUB-200-2011')"
            )

    @property
    def measured(self) -> str:
        """The effect, or why not and at which scale, in words."""
        if self.effect:
            return self.effect
        return "not measured: " + reason_in_words(self.why, self.scale, WHY_NOT_WORDS, "measured")


def deviations_frame(rows: Sequence[Deviation]) -> pd.DataFrame:
    """The deviations table every chapter shows: ``setting`` (the index), ``paper``, ``ours``,
    ``effect`` (measured, or why not).

    Raises:
        ValueError: two rows name one setting.
    """
    names = [r.setting for r in rows]
    if len(set(names)) != len(names):
        raise ValueError(
            f"each setting once: {sorted({n for n in names if names.count(n) > 1})} repeat"
        )
    frame = pd.DataFrame(
        [
            {"setting": r.setting, "paper": r.paper, "ours": r.ours, "effect": r.measured}
            for r in rows
        ],
        columns=["setting", "paper", "ours", "effect"],
    )
    return frame.set_index("setting")
