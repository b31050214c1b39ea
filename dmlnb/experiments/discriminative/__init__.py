"""The discriminative-loss chapter (Do et al., CVPR 2019) on the chapter layer
(:mod:`dmlnb.chapter`); ``notebooks/03_discriminative.ipynb`` shows it. Its modules:

* :mod:`.spec`: the declarations: profiles' presets and settings (:func:`experiment_config`),
  the methods of Tables 4-5 (:func:`loss_method`), the paper's tables, the deviation variants;
* :mod:`.networks`: the paper's network (backbone -> FC(D) -> FC(C)) and the baselines' head,
  the centroids, the balanced subset Lemma 3.1 is tracked on;
* :mod:`.procedure`: :class:`CentroidRuns`, the chapter's :class:`~dmlnb.chapter.Procedure`
  (network, centroids, Lemma 3.1 tracker, backbone learning rate, Tables 2-3 extras), writing
  the specifications and folders the committed records hold;
* :mod:`.groups`: the runs as :class:`~dmlnb.chapter.RunGroup` values (:func:`run_groups`),
  trained or reloaded by :func:`dmlnb.chapter.train_runs`; the clustering baseline's gamma chosen
  on the validation classes (:func:`clustering_search`); the Lemma 3.1 rows;
* :mod:`.timing`: the complexity study (one pass of each loss over a set, Table 1) and the
  same-process step timing (Table 7);
* :mod:`.evidence` and :mod:`.claims` (with :mod:`.bound`: Lemma 3.1's claims and why the bound
  cannot become tight at D < C; :mod:`.added_claims`): the per-run numbers and the chapter's
  claims judged by the book's rule; :mod:`.declared`: the claims as
  :class:`~dmlnb.chapter.ClaimSpec` values for :func:`dmlnb.chapter.evaluate` and ``claims.json``;
* :mod:`.deviations` (with :mod:`.measured`): the deviations as :class:`~dmlnb.chapter.Deviation`
  rows; :mod:`.provenance`: the code versions of the records;
* :mod:`.display` and :mod:`.figures`: the notebook's printed lines, tables and figures;
  :mod:`.findings`: the section "What this chapter finds", generated from the verdicts.
"""

from dmlnb.experiments.discriminative import (
    added_claims,
    bound,
    claims,
    declared,
    deviations,
    display,
    evidence,
    figures,
    findings,
    groups,
    measured,
    networks,
    procedure,
    provenance,
    spec,
    timing,
)
from dmlnb.experiments.discriminative.added_claims import *  # noqa: F403
from dmlnb.experiments.discriminative.bound import *  # noqa: F403
from dmlnb.experiments.discriminative.claims import *  # noqa: F403
from dmlnb.experiments.discriminative.declared import *  # noqa: F403
from dmlnb.experiments.discriminative.deviations import *  # noqa: F403
from dmlnb.experiments.discriminative.display import *  # noqa: F403
from dmlnb.experiments.discriminative.evidence import *  # noqa: F403
from dmlnb.experiments.discriminative.figures import *  # noqa: F403
from dmlnb.experiments.discriminative.findings import *  # noqa: F403
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
    *bound.__all__,
    *added_claims.__all__,
    *claims.__all__,
    *declared.__all__,
    *deviations.__all__,
    *display.__all__,
    *measured.__all__,
    *provenance.__all__,
    *figures.__all__,
    *findings.__all__,
]
