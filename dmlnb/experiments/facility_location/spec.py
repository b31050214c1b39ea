"""The chapter's compared methods: their keys and the paper's row names, the forms of the
paper's algorithms they train, the registered method each trains, and the paper's Tables 1-3."""

from __future__ import annotations

import pandas as pd

from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.reported import reported_table

#: The compared methods (keys) and the paper's row names in Tables 1-3.
METHODS: tuple[str, ...] = ("triplet", "lifted", "npair", "clustering")
ROW_NAMES: dict[str, str] = {
    "triplet": "Triplet semihard",
    "lifted": "Lifted struct",
    "npair": "Npairs",
    "clustering": "Clustering",
}
#: The methods as the chapter's prose and the claims' verdicts name them.
READER_NAMES: dict[str, str] = {
    "triplet": "triplet semi-hard",
    "lifted": "lifted structure",
    "npair": "N-pairs",
    "clustering": "the clustering loss",
}
#: The parts of :func:`loss_description` that name a form of the paper's algorithms: the N-pairs
#: loss's pairs and penalty (:class:`~dmlnb.losses.NPairLoss`) and the clustering loss's form of
#: Algorithm 2 (:class:`~dmlnb.losses.FacilityLocationLoss`), each the paper's or the variant.
FORMS: dict[str, dict[str, str]] = {
    "pairs": {
        "all": "every positive pair of the batch against every image of another class (Eq. 3)",
        "first": "Sohn's N-pair-mc on one pair per class (the first two images of each class in "
        "the batch), each anchor's softmax over the other pairs' positives (not Eq. 3)",
    },
    "penalty": {
        "norm": "plus lambda / m times the sum of the unsquared norms ||f(X_i)|| (Eq. 3)",
        "squared": "plus lambda times the mean squared norm of the batch's embeddings (Sohn's; "
        "not Eq. 3)",
    },
    "refinement": {
        "paper": "Algorithm 2 as listed (each cluster's medoid replaced by its member with the "
        "best F(X_cluster, {j}) + gamma Delta, clusters reassigned once per pass, 5 passes)",
        "full": "the variant of Algorithm 2 (each swap scored by the full objective A, clusters "
        "reassigned after every swap, a swap only when A strictly rises; not the paper's listing)",
    },
}

#: A refined objective counts as below its greedy start (logged steps, :func:`inside_loss_summary`)
#: or an update as lowering ``A`` (:func:`lemma1_per_update`) only beyond ``PAM_TOLERANCE *
#: max(1, |A|)``: the objectives are float64 sums of distances taken in different orders.
PAM_TOLERANCE = 1e-9


#: Tables 1-3 of Song et al. (2017): Inception-BN (ImageNet-pretrained), 64-d, batch 128; the
#: files dmlnb/experiments/reported/facility_location_table<k>.csv.
REPORTED: dict[str, pd.DataFrame] = {
    f"Table {k}": reported_table(f"facility_location_table{k}") for k in (1, 2, 3)
}
#: What each reported table is: dataset and iterations.
REPORTED_SETTING: dict[str, str] = {
    "Table 1": "CUB-200-2011, Inception-BN, 64-d, 10k iterations",
    "Table 2": "Cars196, Inception-BN, 64-d, 20k iterations",
    "Table 3": "Stanford Online Products, Inception-BN, 64-d, 20k iterations",
}


def method_config(method: str, config: TrainConfig) -> TrainConfig:
    """Per-method changes to the shared configuration (Sec. 4): the triplet and clustering losses
    see L2-normalised embeddings, lifted structure and N-pairs unnormalised ones."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    return config.replace(normalize=method in ("triplet", "clustering"))


def forms_of(call: MethodCall) -> dict[str, str]:
    """The forms of the paper's algorithms (:data:`FORMS`) that the method ``call`` trains: the
    clustering loss's ``refinement``, the N-pairs loss's ``pairs`` and ``penalty``."""
    args = call.spec["args"]
    if call.name == "facility-location":
        return {"refinement": args["refinement"]}
    if call.name == "npair":
        return {"pairs": args["pairs"], "penalty": args["penalty"]}
    return {}


#: The paper's form of each of :data:`FORMS` (:class:`Study`'s defaults): a run folder names a form
#: only when it is not the paper's.
PAPER_FORMS: dict[str, str] = {"refinement": "paper", "pairs": "all", "penalty": "norm"}

#: The chapter's name in the book (its notebook's stem; ``claims.json`` names it).
CHAPTER = "02_facility_location"
