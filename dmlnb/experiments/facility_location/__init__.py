"""The facility-location chapter (Song, Jegelka, Rathod & Murphy, CVPR 2017): everything
``notebooks/02_facility_location.ipynb`` runs.

* :mod:`.spec`: the compared methods, the forms of the paper's algorithms, the paper's tables;
* :mod:`.presets`: per profile, the design (:func:`make_study`);
* :mod:`.runs`: the runs as :class:`~dmlnb.chapter.RunGroup` values, trained by the layer;
* :mod:`.toy`: the Figure 2 toy; :mod:`.lemma1`: Lemma 1 traced per update and per pass;
* :mod:`.diagnostics`: the inside-the-loss log, the timing of Algorithm 1;
* :mod:`.tables`, :mod:`.deviations`: the comparisons and the deviations (as
  :class:`~dmlnb.chapter.Deviation` rows);
* :mod:`.claims`: the claims as :class:`~dmlnb.chapter.ClaimSpec` values (:func:`claim_specs`),
  judged by :func:`dmlnb.chapter.evaluate`; :mod:`.logged`: the claims the runs' logs test;
  :mod:`.evidence`: our evidence beside them in words; :mod:`.protocols`: the claims under the
  validation-selected, test-selected and last epoch;
* :mod:`.show`, :mod:`.text`: the notebook's figures, tables and computed sentences.
"""

from dmlnb.experiments.facility_location import show, text
from dmlnb.experiments.facility_location.claims import (
    PAPER_34,
    Converges,
    Lemma1,
    Lemma1Updates,
    LinearTime,
    Merges,
    StaysApart,
    claim_specs,
    save_claims,
)
from dmlnb.experiments.facility_location.deviations import (
    PAPER_TRAINING_LENGTH,
    deviations,
)
from dmlnb.experiments.facility_location.diagnostics import (
    inference_scaling,
    inside_loss_frame,
    inside_loss_summary,
    labels_one_move,
    nmi_of_one_move,
    pam_by_table,
    scaling_slopes,
    timed_inference,
)
from dmlnb.experiments.facility_location.evidence import claims_shown
from dmlnb.experiments.facility_location.lemma1 import (
    LEMMA1_GAMMA,
    LEMMA1_LABELS,
    LEMMA1_POINTS,
    convergence_verdict,
    lemma1_batches,
    lemma1_pass_verdict,
    lemma1_per_update,
    lemma1_table,
    lemma1_verdict,
    listing_trace,
)
from dmlnb.experiments.facility_location.logged import (
    FDominates,
    OnlyImproves,
    clustering_logs,
)
from dmlnb.experiments.facility_location.presets import (
    PRESETS,
    Study,
    TableSpec,
    build_loss,
    composition,
    loss_description,
    loss_method,
    make_study,
    pair_use,
)
from dmlnb.experiments.facility_location.protocols import PROTOCOLS, protocol_verdicts
from dmlnb.experiments.facility_location.runs import (
    ClassRatioRuns,
    KeptRun,
    TableGroup,
    TableRun,
    by_role,
    groups,
    kept_metrics,
    kept_weights,
    recorded,
    train,
    tsne_map,
)
from dmlnb.experiments.facility_location.spec import (
    CHAPTER,
    FORMS,
    METHODS,
    PAM_TOLERANCE,
    PAPER_FORMS,
    REPORTED,
    REPORTED_SETTING,
    ROW_NAMES,
    forms_of,
    method_config,
)
from dmlnb.experiments.facility_location.tables import (
    claim_metrics,
    compare_methods,
    comparison_table,
    comparison_text,
    main_comparisons,
    nmi_normalisation_gap,
    reported_margins,
    run_values,
    variant_comparison,
)
from dmlnb.experiments.facility_location.toy import (
    LOCAL_TOY_LOSSES,
    MERGE_DEGREES,
    PAPER_LOCAL_TOY_LOSSES,
    TOY_GAMMA,
    TOY_GROUPS,
    TOY_LOSSES,
    run_toy,
    toy_frame,
    toy_loss,
    toy_points,
    toy_summary,
    train_toy,
)

__all__ = [
    "show",
    "text",
    "composition",
    "pair_use",
    "CHAPTER",
    "FORMS",
    "METHODS",
    "PAM_TOLERANCE",
    "PAPER_FORMS",
    "REPORTED",
    "REPORTED_SETTING",
    "ROW_NAMES",
    "build_loss",
    "forms_of",
    "loss_description",
    "loss_method",
    "method_config",
    "PRESETS",
    "Study",
    "TableSpec",
    "make_study",
    "LOCAL_TOY_LOSSES",
    "MERGE_DEGREES",
    "PAPER_LOCAL_TOY_LOSSES",
    "TOY_GAMMA",
    "TOY_GROUPS",
    "TOY_LOSSES",
    "run_toy",
    "toy_frame",
    "toy_loss",
    "toy_points",
    "toy_summary",
    "train_toy",
    "inference_scaling",
    "inside_loss_frame",
    "inside_loss_summary",
    "labels_one_move",
    "nmi_of_one_move",
    "pam_by_table",
    "scaling_slopes",
    "timed_inference",
    "claim_metrics",
    "compare_methods",
    "comparison_table",
    "comparison_text",
    "main_comparisons",
    "nmi_normalisation_gap",
    "reported_margins",
    "run_values",
    "variant_comparison",
    "LEMMA1_GAMMA",
    "LEMMA1_LABELS",
    "LEMMA1_POINTS",
    "lemma1_batches",
    "lemma1_per_update",
    "lemma1_table",
    "lemma1_verdict",
    "lemma1_pass_verdict",
    "convergence_verdict",
    "FDominates",
    "OnlyImproves",
    "clustering_logs",
    "PROTOCOLS",
    "protocol_verdicts",
    "listing_trace",
    "PAPER_TRAINING_LENGTH",
    "deviations",
    "PAPER_34",
    "Lemma1",
    "Lemma1Updates",
    "Converges",
    "LinearTime",
    "Merges",
    "StaysApart",
    "claim_specs",
    "save_claims",
    "claims_shown",
    "ClassRatioRuns",
    "KeptRun",
    "TableGroup",
    "TableRun",
    "by_role",
    "groups",
    "kept_metrics",
    "recorded",
    "kept_weights",
    "train",
    "tsne_map",
]
