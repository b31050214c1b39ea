"""The PROFS chapter (Can, Gürbüz & Alatan, alternating projections onto feasible sets),
declared on the chapter layer (:mod:`dmlnb.chapter`); ``notebooks/04_profs.ipynb`` shows it.

* :mod:`~dmlnb.experiments.profs.losses`: Table 1's and Table 2's rows as registered methods
  (:data:`LOSS_METHODS`), Sec. 5.3's pair restriction per loss (:func:`pair_mode`);
* :mod:`~dmlnb.experiments.profs.profiles`: the configuration and design per profile
  (:func:`experiment_config`, :func:`experiment_settings`);
* :mod:`~dmlnb.experiments.profs.procedure`: :class:`ProfsProcedure`, how a run of a variant
  trains (batches, proximal hook, pair restriction; every field in the fingerprint);
* :mod:`~dmlnb.experiments.profs.runs`: :func:`groups`, every run of the chapter declared once
  as :class:`~dmlnb.chapter.RunGroup` values, trained or reloaded by
  :func:`dmlnb.chapter.train_runs`, and the :class:`~dmlnb.chapter.RunSet` read back by section;
* :mod:`~dmlnb.experiments.profs.claims`, :mod:`~dmlnb.experiments.profs.claims_more` and
  :mod:`~dmlnb.experiments.profs.judges`: the claims as :class:`~dmlnb.chapter.ClaimSpec` values
  (:func:`chapter_claims`), judged by :func:`dmlnb.chapter.evaluate`;
* :mod:`~dmlnb.experiments.profs.deviations`: the departures from the paper as
  :class:`~dmlnb.chapter.Deviation` rows (:func:`deviation_rows`);
* :mod:`~dmlnb.experiments.profs.analyses`: what is this paper's own (step times, HNCM's pick
  cost, projections per run, the triplet loss's plateau);
* :mod:`~dmlnb.experiments.profs.tables`, :mod:`~dmlnb.experiments.profs.text`,
  :mod:`~dmlnb.experiments.profs.findings`: the tables, lines and findings the notebook shows,
  computed from the runs;
* :mod:`~dmlnb.experiments.profs.reported`: the paper's numbers, labelled as reported.

The method itself (samplers, hooks) is :mod:`dmlnb.profs`.
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
