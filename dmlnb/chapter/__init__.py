"""The chapter layer: a chapter's runs and claims declared as data, trained or reloaded, and
judged by one layer (:mod:`dmlnb.chapter.runset`, :mod:`dmlnb.chapter.claims`).

A chapter is a few declarations and three calls::

    from dmlnb.chapter import RunGroup, train_runs, ClaimSpec, Beats, Side, evaluate
    from dmlnb.methods import call

    GROUPS = {"table1": RunGroup({"triplet": call("triplet", mining="semihard"),
                                  "contrastive": call("contrastive")}, seeds=(0, 1, 2))}
    CLAIMS = [ClaimSpec("triplet-beats-contrastive", "The triplet loss beats the contrastive loss",
                        Beats(Side("table1", "triplet"), Side("table1", "contrastive"),
                              paired=True),
                        where="Table 1")]

    runs = train_runs(GROUPS, config, results_dir)    # trains what is missing, reloads the rest
    judged = evaluate(CLAIMS, runs)                   # the book's one rule, claim by claim
    write_claims_json(results_dir, judged, chapter="toy", profile="smoke")
"""

from dmlnb.chapter import claims, deviations, procedure, replication, runset
from dmlnb.chapter.claims import *  # noqa: F403  (the declarations, evaluate, claims.json)
from dmlnb.chapter.deviations import *  # noqa: F403  (deviations as rows, one table)
from dmlnb.chapter.procedure import *  # noqa: F403  (how a group's runs train)
from dmlnb.chapter.replication import *  # noqa: F403  (verdicts on other seeds)
from dmlnb.chapter.runset import *  # noqa: F403  (run groups, train_runs, RunSet)

__all__ = [
    *runset.__all__,
    *procedure.__all__,
    *claims.__all__,
    *deviations.__all__,
    *replication.__all__,
]
