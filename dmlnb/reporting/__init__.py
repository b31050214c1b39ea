"""Tables and verdicts for the book: runs summarised as mean ± std, reported beside reproduced,
and every claim judged by one stated rule.

Reproduced numbers only ever come from run records; the paper's numbers enter only through the
``reported`` argument of :func:`reported_vs_reproduced`, in their own block of columns labelled
with the source and the dataset ("reported (CUB-200-2011, GoogLeNet)"), never in a column of
another dataset's numbers.

**The verdict rule** (:func:`compare`; the protocol chapter states it): a claim "holds" only with
at least 3 runs per side and a one-sided Welch t-test at 95% confidence; it "does not hold" when
the opposite direction passes the same test, or when its own threshold is missed beyond the
interval (:func:`compare_to_threshold`), or, for a universal claim checked case by case, on one
counterexample (:func:`holds_for_every`); anything else is "inconclusive", shown with the effect
and its 90% two-sided interval (whose ends are the two one-sided 95% bounds). One run per side
never holds or fails. A sweep has an interior optimum only when an interior value beats both
ends under the same test (:func:`interior_optimum`).

The same rule, applied to claims of other forms:

* paired runs (the same run measured two ways): :func:`paired_differences`;
* "A and B perform alike" within a margin: :func:`equivalent` (two one-sided tests), and for
  every pair of a sweep, :func:`every_pair_equivalent`;
* "A and B do not differ", without a margin (it can be refuted, never shown): :func:`no_difference`;
* a claim made of parts, each judged by the rule: :func:`all_of` (every part), :func:`most_of`
  (more than half), :func:`group_verdict` (every method of a group beats every method of another);
* a claim of an order of growth ("linear in N", "cubic", "falls as 1/C"), from per-repeat
  log-log slopes: :func:`compare_to_band` on :func:`order_band`, the claimed order ± 0.5 (halfway
  to the neighbouring orders), so a slope too steep fails as surely as one too flat.

Four rules say when runs cannot decide a claim, whatever the numbers:

* **degenerate runs** (:func:`unless_degenerate`; ``degenerate=`` of :func:`group_verdict` and
  :func:`interior_optimum`): a comparison any of whose compared sides is degenerate (a collapsed
  embedding, which cannot exercise the mechanism the claim is about) is "not tested at this
  scale", with what and which sides in the note; a claim made of such comparisons counts them as
  untested parts. Every chapter marks a run collapsed by one criterion, :func:`collapsed`: its
  training loss stays within :data:`COLLAPSE_BAND` (2.5%) of the loss of a collapsed embedding
  over its last two epochs;
* **another algorithm timed** (:func:`implementation_claims`): when the code timed is not what
  the claim describes (another algorithm, or the algorithm used another way), the paper's
  complexity claim is "not tested", and the same order, tested on the code that ran, is a
  separate measurement of ours;
* **selection biased toward the claim** (:func:`biased_toward_claim`): when the runs' epoch (or
  setting) was chosen by a criterion that favours the claim, "holds" becomes "inconclusive"
  (a failure despite the bias stands);
* **a shape unchecked** (:func:`shape_unchecked`; ``sizes=`` of :func:`implementation_claims`): an
  order-of-growth claim with a repeat whose slope rests on fewer than :data:`MIN_FIT_SIZES` sizes
  (a line through two points) is decided neither way: "inconclusive".
"""

from __future__ import annotations

from dmlnb.reporting.caveats import (
    COLLAPSE_BAND,
    MIN_FIT_SIZES,
    biased_toward_claim,
    collapsed,
    shape_unchecked,
    unless_degenerate,
)
from dmlnb.reporting.claims import CLAIM_COLUMNS as CLAIM_COLUMNS
from dmlnb.reporting.claims import Claim, claims_table, implementation_claims
from dmlnb.reporting.composite import (
    all_of,
    group_verdict,
    interior_optimum,
    most_of,
    no_difference,
)
from dmlnb.reporting.equivalence import equivalent, every_pair_equivalent, margin_tests
from dmlnb.reporting.provenance import (
    best_minus_last,
    paper_run_status,
    provenance_frame,
    provenance_groups,
    provenance_text,
)
from dmlnb.reporting.rule import (
    ORDER_HALF_WIDTH,
    compare,
    compare_to_band,
    compare_to_threshold,
    holds_for_every,
    order_band,
    paired_differences,
)
from dmlnb.reporting.tables import (
    format_mean_std,
    reported_vs_reproduced,
    source_dataset,
    summarize_runs,
)
from dmlnb.reporting.verdicts import (
    CONFIDENCE,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_RUNS,
    NOT_TESTED,
    QUALIFIED_HOLDS,
    Verdict,
    count_line,
    not_tested,
    qualify,
    verdict_category,
    verdict_counts,
)

__all__ = [
    "summarize_runs",
    "format_mean_std",
    "reported_vs_reproduced",
    "source_dataset",
    "Verdict",
    "compare",
    "compare_to_threshold",
    "holds_for_every",
    "paired_differences",
    "margin_tests",
    "equivalent",
    "all_of",
    "most_of",
    "no_difference",
    "group_verdict",
    "every_pair_equivalent",
    "interior_optimum",
    "not_tested",
    "Claim",
    "claims_table",
    "provenance_frame",
    "provenance_text",
    "provenance_groups",
    "best_minus_last",
    "paper_run_status",
    "HOLDS",
    "FAILS",
    "INCONCLUSIVE",
    "NOT_TESTED",
    "MIN_RUNS",
    "CONFIDENCE",
    "compare_to_band",
    "order_band",
    "ORDER_HALF_WIDTH",
    "unless_degenerate",
    "implementation_claims",
    "biased_toward_claim",
    "qualify",
    "collapsed",
    "COLLAPSE_BAND",
    "verdict_category",
    "verdict_counts",
    "count_line",
    "QUALIFIED_HOLDS",
    "shape_unchecked",
    "MIN_FIT_SIZES",
]
