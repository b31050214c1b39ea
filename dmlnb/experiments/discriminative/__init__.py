"""Experiment glue of the discriminative-loss chapter (Do et al., CVPR 2019).

Everything the notebook ``notebooks/03_discriminative.ipynb`` runs, so that its cells only wire
calls together:

* :data:`PRESETS` / :data:`SETTINGS` and :func:`experiment_config`: the profile presets
  (``smoke``, ``default``, ``paper``) of the training runs and of the other experiments;
* :func:`build_network`: the paper's network (:class:`~dmlnb.losses.discriminative.CentroidNet`,
  backbone -> FC(D) -> FC(C), trained at the last (C-dimensional) layer against fixed centroids
  and evaluated at the second-to-last (D-dimensional) one, Sec. 4.2, Table 2); the baselines use
  the same backbone with one FC(D) head, so every method is evaluated at the same layer;
* :func:`build_loss`: the seven compared losses with their settings;
* :func:`runs_folder`: where a profile's runs are recorded (the paper profile's CAR196 runs apart
  from its CUB-200-2011 runs);
* :func:`clustering_search`: the clustering baseline's margin multiplier, chosen on the validation
  classes by a stated search (:class:`ClusteringSearch`);
* :func:`balanced_subset`: the class-balanced subset of the training set on which
  :class:`~dmlnb.losses.discriminative.LemmaTracker` evaluates Lemma 3.1 during training;
* :func:`run_method`: one training run whose record (with Table 2 and Lemma 3.1 extras) is saved
  and reloaded without retraining;
* :func:`loss_pass_timing`, :func:`loglog_slopes` and :func:`timing_study`: the cost of one
  forward+backward pass of each loss over a whole training set as ``N`` and ``C`` grow (the
  complexity claim, Table 1), repeated per seed; :func:`timing_slopes`, :func:`timing_table`,
  :func:`c_sweep_table` and :func:`whole_set_ratios` summarise it;
* :func:`step_timing`: training steps of every method timed in one process, interleaved (the
  only timings the chapter compares across methods);
* :func:`claim_evidence`, :func:`chapter_claims` (the paper's claims) and :func:`our_measurements`
  (the chapter's own), judged by the book's rule (:mod:`dmlnb.reporting`), with the margin
  :func:`alike_margin` read from the paper's Table 3;
* :func:`claims_both_ways`: the paper's claims with every run at the epoch each protocol selects;
* :func:`deviation_runs`, :func:`variant_unfit`, :func:`deviations_table` and
  :func:`run_provenance`: every deviation from the paper, measured where a variant fits the training
  classes, and the code versions of the run records.
"""

from dmlnb.experiments.discriminative import (
    claims,
    declared,
    deviations,
    display,
    evidence,
    figures,
    groups,
    measured,
    networks,
    procedure,
    provenance,
    spec,
    timing,
)
from dmlnb.experiments.discriminative.claims import *  # noqa: F403
from dmlnb.experiments.discriminative.declared import *  # noqa: F403
from dmlnb.experiments.discriminative.deviations import *  # noqa: F403
from dmlnb.experiments.discriminative.display import *  # noqa: F403
from dmlnb.experiments.discriminative.evidence import *  # noqa: F403
from dmlnb.experiments.discriminative.figures import *  # noqa: F403
from dmlnb.experiments.discriminative.groups import *  # noqa: F403
from dmlnb.experiments.discriminative.measured import *  # noqa: F403
from dmlnb.experiments.discriminative.networks import *  # noqa: F403
from dmlnb.experiments.discriminative.procedure import *  # noqa: F403
from dmlnb.experiments.discriminative.provenance import *  # noqa: F403
from dmlnb.experiments.discriminative.spec import *  # noqa: F403
from dmlnb.experiments.discriminative.timing import *  # noqa: F403

__all__ = [
    *spec.__all__,
    *networks.__all__,
    *procedure.__all__,
    *groups.__all__,
    *timing.__all__,
    *evidence.__all__,
    *claims.__all__,
    *declared.__all__,
    *deviations.__all__,
    *display.__all__,
    *measured.__all__,
    *provenance.__all__,
    *figures.__all__,
]
