"""Experiment glue of the SSDML chapter (Dutta, Harandi and Sekhar, AAAI 2021)."""

from dmlnb.experiments.ssdml.analyses import (  # noqa: F401
    diagnosis,
    metric_steps,
    over_initial,
    provenance,
    purity_chance,
    selection_gain,
    unit_counts,
)
from dmlnb.experiments.ssdml.claims import (  # noqa: F401
    EFFECTIVE_RANK_PROXY,
    claims,
    claims_both_ways,
    initial_selection_bias,
    per_seed,
)
from dmlnb.experiments.ssdml.deviations import DEVIATIONS  # noqa: F401
from dmlnb.experiments.ssdml.figures import retrieval_figure  # noqa: F401
from dmlnb.experiments.ssdml.initial import (  # noqa: F401
    below_floor_sentence,
    floor_rows,
    floor_verdicts,
    initial_coordinates,
    initial_embedding,
    initial_metrics,
    protocol_floors,
)
from dmlnb.experiments.ssdml.mining import (  # noqa: F401
    FEATURE_SOURCES,
    MINING_QUESTIONS,
    MINING_VARIANTS,
    SOFTMAX_EPOCHS,
    mining_measurements,
    mining_table,
    mining_verdicts,
    partition_features,
    stored_mining,
)
from dmlnb.experiments.ssdml.network import (  # noqa: F401
    POOLED_BACKBONES,
    NormalizedFeatures,
    build_network,
    build_objective,
    embedding_spectrum,
    load_splits,
    objective_method,
    pretrain_softmax,
    triplet_purity,
)
from dmlnb.experiments.ssdml.profile_settings import PAPER_TRAINING, PROFILE_SETTINGS, settings_for  # noqa: F401
from dmlnb.experiments.ssdml.reported import (  # noqa: F401
    M5,
    REPORTED,
    REPORTED_CONVERGENCE_EPOCHS,
    alpha_margin,
    reported_alpha_sentence,
    reported_best,
    reported_leader_sentence,
    reported_leaders,
    reported_orthogonality_drops,
    reported_orthogonality_sentence,
    reported_over_initial,
)
from dmlnb.experiments.ssdml.search import (  # noqa: F401
    BASELINE_NOTES,
    baseline_table,
    chosen_hyper,
    run_baseline_search,
    search_table,
)
from dmlnb.experiments.ssdml.settings import (  # noqa: F401
    BASELINE_SEARCH,
    METHODS,
    NAMES,
    REPORTED_COLUMN,
    SEMI_SUPERVISED,
    TABLE_SETTINGS,
    Setting,
    with_hyper,
)
from dmlnb.experiments.ssdml.training import (  # noqa: F401
    MethodRun,
    results_frame,
    run_alpha_grid,
    run_method,
    run_setting,
)
