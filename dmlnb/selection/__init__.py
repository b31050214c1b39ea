"""Model selection: where a run's best epoch is chosen, and what choosing it on
the test classes adds.

The papers the book reproduces report each run at its best epoch on the test classes
(``TrainConfig.select_on="test"``); Musgrave et al. (2020, "A Metric Learning Reality Check")
choose it on validation classes held out of training (``select_on="validation"``, with
``dataset_options={"validation": ...}``) and measure the test classes once, at that epoch. A run
evaluated on a validation split records the epoch both protocols select (``record.selections``),
so either way it tells the *optimism* of test-set selection: the test metric at the epoch the
test classes select minus the test metric at the epoch the validation classes select. It is
``>= 0`` by construction (the test-selected epoch maximises the test metric over the same
evaluations).

* :func:`selection_label`: how a table or figure names the protocol of a record;
* :func:`selection_optimism`: the optimism of each record, one row per run;
* :func:`optimism_summary`: its mean per group with the interval and verdict of the book's rule
  (:func:`dmlnb.reporting.compare_to_threshold`: "test-set selection is optimistic"), and
  :func:`optimism_text`, the same in words, and :func:`selection_gain_text`, what keeping each run's
  selected epoch adds over its last (for a chapter's deviations table);
* both protocols side by side: :func:`selected_metrics` (the test metrics at the epoch a protocol
  selects), :func:`both_ways_table` (a comparison's metric under each, in columns named by
  :func:`protocol_column`), :func:`main_comparison` (the same with the verdicts of "the proposed
  method beats each other one", by :func:`dmlnb.reporting.compare`, under each protocol and
  flagged where they differ), and :func:`both_ways_verdicts` (any chapter's claims computed under
  each protocol, through :func:`selected_on`, which shows every record at the epoch one protocol
  selects; :func:`kept_selection` is the epoch whose weights the run kept);
* :func:`choose_on_validation`: a setting (a variant, a hyper-parameter value) chosen on the
  validation classes, never on the test classes.
"""

from dmlnb.selection import optimism, protocols
from dmlnb.selection.optimism import *  # noqa: F403  (what test-set selection adds)
from dmlnb.selection.protocols import *  # noqa: F403  (both protocols side by side)

__all__ = [*optimism.__all__, *protocols.__all__]
