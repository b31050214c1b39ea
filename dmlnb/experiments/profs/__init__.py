"""Experiment glue of the PROFS chapter (Can, Gürbüz & Alatan, alternating projections onto
feasible sets).

Everything ``notebooks/04_profs.ipynb`` runs, so that its cells only wire calls together:

* :data:`PRESETS` / :data:`SETTINGS` with :func:`experiment_config` and
  :func:`experiment_settings`: the training configuration and the design (seeds, ``rho``,
  ``lambda``, the ``M`` and ``lambda`` grids, the HNCM regime) per profile;
* :data:`LOSSES`, :data:`TABLE2_LOSSES` and :func:`build_loss`: the integrated losses with the
  settings of their papers as registered methods (:data:`LOSS_METHODS`, :func:`implementation`
  says what each trains);
* :data:`PAIR_MODE`, :func:`pair_mode` and :func:`profs_loss`: the PROFS variants' losses restricted
  to the pairs of the class representatives (Sec. 5.3,
  :class:`~dmlnb.profs.representative_pairs.RepresentativePairs`);
* :func:`build_components`: the batch sampler and hooks of one variant, ``plain`` (class-balanced
  batches of ``I`` images per class), ``PROFS``
  (:class:`~dmlnb.profs.representatives.RepresentativeSampler` with ``M`` from ``rho`` and
  :class:`~dmlnb.profs.proximal.ProximalHook`) or ``PROFS-HNCM`` (the same with hard negative class
  mining); SoftTriple gets its adaptation (every iteration a subproblem,
  :class:`~dmlnb.profs.proximal.LaggedProximalHook`; cluster centres as representatives,
  :class:`~dmlnb.profs.representatives.CenterRepresentatives`);
* :class:`TimedSampler`: measures the seconds a sampler spends building batches and in its hook
  calls (representative bookkeeping and mining), for the HNCM cost;
* :func:`run_variant`: one training run, or its finished record reloaded; :func:`run_identity`:
  what it is (name, configuration, specification) before it trains; :func:`chapter_runs`: every
  run of the chapter, so a run's fingerprint can be checked without training;
* :data:`COMPONENT_STEPS`, :func:`component_runs`, :func:`component_steps`,
  :func:`component_frame`, :func:`component_claims`: the ablation of PROFS's ingredients
  (representatives, pair restriction, proximal term), each step judged against the one before;
* :func:`hncm_pick_cost`: the cost of one HNCM batch (greedy chain and one scan) as the number of
  classes grows;
* :func:`gain_frame`, :func:`comparisons_table`, :func:`sweep_verdicts`,
  :func:`comparisons_both_ways`: the per-loss gains and every verdict, by :mod:`dmlnb.reporting`'s
  one rule (``compare``, ``interior_optimum``, ``compare_to_threshold``, ``all_of`` over the
  losses, ``no_difference``);
* :func:`paper_projections`, :func:`projection_reason`: projections per run, the paper's and
  ours, and why the claims that rest on many projections are not tested at a small scale;
  :func:`epochs_for_projections`: the epochs a run needs for :data:`MIN_PROJECTIONS`;
* :func:`reported_differences`, :func:`describe_reported`: the paper's Tables 1-2 in words,
  computed; :func:`build_claims`: the claims table; :func:`deviations_table`: the departures of a
  configuration from the paper;
* :data:`REPORTED_TABLE1`, :data:`REPORTED_TABLE2`, :data:`REPORTED_HNCM_COST`, ...: the
  paper's numbers, labelled as reported.
"""

from __future__ import annotations

from dmlnb.experiments.profs import (
    analyses,
    claims,
    deviations,
    findings,
    losses,
    procedure,
    profiles,
    reported,
    runs,
    tables,
    text,
)
from dmlnb.experiments.profs.analyses import *  # noqa: F403
from dmlnb.experiments.profs.claims import *  # noqa: F403
from dmlnb.experiments.profs.deviations import *  # noqa: F403
from dmlnb.experiments.profs.findings import *  # noqa: F403
from dmlnb.experiments.profs.losses import *  # noqa: F403
from dmlnb.experiments.profs.procedure import *  # noqa: F403
from dmlnb.experiments.profs.profiles import *  # noqa: F403
from dmlnb.experiments.profs.reported import *  # noqa: F403
from dmlnb.experiments.profs.runs import *  # noqa: F403
from dmlnb.experiments.profs.tables import *  # noqa: F403
from dmlnb.experiments.profs.text import *  # noqa: F403

__all__ = [
    *losses.__all__,
    *profiles.__all__,
    *reported.__all__,
    *procedure.__all__,
    *runs.__all__,
    *analyses.__all__,
    *tables.__all__,
    *deviations.__all__,
    *claims.__all__,
    *text.__all__,
    *findings.__all__,
]
