"""The losses of the PROFS chapter: Table 1's and Table 2's rows as registered methods, Sec. 5.3's
pair restriction per loss, per-loss configuration changes."""

from __future__ import annotations

import functools

import torch
from torch import nn

from dmlnb.experiments.baseline_losses import lifted_structure, npair, semihard_triplet
from dmlnb.methods import MethodCall, call
from dmlnb.profs.representative_pairs import PAIR_MODES

__all__ = [
    "LOSSES",
    "LOSS_METHODS",
    "PAIR_MODE",
    "TABLE2_LOSSES",
    "VARIANTS",
    "build_loss",
    "collapse_level",
    "implementation",
    "loss_method",
    "pair_mode",
]


#: Table 1's losses: the paper's row name -> our key.
LOSSES: dict[str, str] = {
    "Contrastive-Hard": "contrastive-hard",
    "Triplet-Semi": "triplet-semihard",
    "Triplet-Hard": "triplet-hard",
    "Lifted": "lifted",
    "N-pair": "npair",
    "Angular": "angular",
    "Margin-Hard": "margin-hard",
    "MS": "ms",
}
#: Table 2's losses (each in its own architecture at the paper profile).
TABLE2_LOSSES: dict[str, str] = {"Margin": "margin-dw", "SoftTriple": "softtriple"}
VARIANTS: tuple[str, ...] = ("plain", "PROFS", "PROFS-HNCM")

#: What each key trains: a registered method (:mod:`dmlnb.methods`) with the settings of its
#: paper (Sec. 5.3). A run's fingerprint holds its method's name, version and every argument,
#: so a changed setting here trains the runs again. :func:`build_loss` builds from these.
LOSS_METHODS: dict[str, MethodCall] = {
    "contrastive-hard": call(
        "contrastive", neg_margin=1.0, squared_hinge=True, mining="hard", reduction="mean"
    ),
    "triplet-semihard": semihard_triplet(),
    "triplet-hard": call(
        "triplet", margin=0.2, mining="hard", distance="squared", reduction="mean"
    ),
    "lifted": lifted_structure(),
    "npair": npair(),
    "angular": call("angular", alpha_degrees=40.0),
    # Wu et al.'s terms [d - beta + alpha]_+ and [beta + alpha - d]_+ on the pairs of the
    # contrastive loss's hard mining (Sec. 5.3), beta fixed at its initial 1.2, alpha 0.2.
    "margin-hard": call(
        "contrastive", pos_margin=1.0, neg_margin=1.4, mining="hard", reduction="nonzero"
    ),
    "ms": call("multi-similarity"),
    "margin-dw": call(
        "margin", margin=0.2, beta=1.2, learn_beta=True, sampling="distance_weighted"
    ),
    "softtriple": call("soft-triple"),
}

#: What each key's method means in the paper's terms (its settings are :data:`LOSS_METHODS`').
_MEANING: dict[str, str] = {
    "contrastive-hard": "Eq. 3.2 on each anchor's hardest positive and hardest negative",
    "triplet-semihard": "FaceNet, Eq. 3.3",
    "triplet-hard": "batch-hard, Eq. 3.3",
    "npair": "Sohn's setting, unnormalised embeddings",
    "margin-hard": "Eq. 3.4 on batch-hard pairs, beta fixed at 1.2, margin 0.2",
    "ms": "with its miner",
    "margin-dw": "Eq. 3.4, distance-weighted sampling, learnable beta",
    "softtriple": "centres at their own rate (the paper profile: 1e-2, as its code; otherwise 10x "
    "the network's)",
}


def implementation() -> dict[str, str]:
    """What each key trains, for the notebook: its method call (from :data:`LOSS_METHODS`, so
    never out of date) and what it means in the paper's terms."""
    return {
        key: f"{c}" + (f": {_MEANING[key]}" if key in _MEANING else "")
        for key, c in LOSS_METHODS.items()
    }


# ----------------------------------------------------------------------------------------------
# Losses and variants
# ----------------------------------------------------------------------------------------------


def build_loss(key: str, num_classes: int, embedding_dim: int) -> nn.Module:
    """The loss of ``key`` (a value of :data:`LOSSES` or :data:`TABLE2_LOSSES`): its method of
    :data:`LOSS_METHODS`. Seeded by the caller (SoftTriple's centres are drawn here)."""
    return loss_method(key).build(num_classes=num_classes, embedding_dim=embedding_dim)


def loss_method(key: str) -> MethodCall:
    """The method call of loss ``key`` (:data:`LOSS_METHODS`)."""
    if key not in LOSS_METHODS:
        raise ValueError(f"unknown loss {key!r}; choose one of {list(LOSS_METHODS)}")
    return LOSS_METHODS[key]


#: Sec. 5.3, how the PROFS variants restrict each loss's pairs
#: (:class:`~dmlnb.profs.representative_pairs.RepresentativePairs`):
#:
#: * ``"anchored"``, pairs anchored at a class representative: contrastive, triplet and Margin,
#:   "each class representative should have the same number of its corresponding positive pairs
#:   and hard negative pairs";
#: * ``"any"``, pairs with a representative at either end: "To adapt the lifted structured and MS
#:   loss to PROFS framework, the loss is slightly modified by ignoring the pairwise terms between
#:   the non-representative samples";
#: * ``"all"``, every pair: "No adaptation is performed for the N-pair and angular loss".
#:
#: SoftTriple is not pair-based; its adaptation is the cluster centres as representatives
#: (:func:`build_components`), so it has no entry and is never wrapped.
PAIR_MODE: dict[str, str] = {
    "contrastive-hard": "anchored",
    "triplet-semihard": "anchored",
    "triplet-hard": "anchored",
    "margin-hard": "anchored",
    "margin-dw": "anchored",
    "lifted": "any",
    "ms": "any",
    "npair": "all",
    "angular": "all",
}


@functools.lru_cache(maxsize=None)
def collapse_level(key: str, embedding_dim: int) -> float | None:
    """The loss of ``key`` on a collapsed embedding: every embedding of a batch equal (8 classes of
    2 images), so every distance is 0 — the margin for the batch-hard triplet loss, the negative
    margin's square for the contrastive loss. ``None`` for a loss with learned parameters
    (SoftTriple's centres, a learned beta), whose value there moves with them. The plain loss's
    value, which the PROFS variants share: their pair restriction only chooses among pairs whose
    distances are all 0 there, and each hard-mined term of these losses has the same value on
    any of them."""
    loss = build_loss(key, 8, embedding_dim)
    if any(p.requires_grad for p in loss.parameters()):
        return None
    x = torch.nn.functional.normalize(
        torch.ones(16, embedding_dim), dim=1
    )  # (16, D), every row equal
    with torch.no_grad():
        return float(loss(x, torch.arange(8).repeat_interleave(2)))


def pair_mode(key: str, variant: str, pairs: str | None = None) -> str:
    """The pair restriction of loss ``key`` in ``variant``: :data:`PAIR_MODE` for the PROFS
    variants, ``"all"`` for ``plain`` runs and SoftTriple. ``pairs`` (one of
    :data:`~dmlnb.profs.representative_pairs.PAIR_MODES`) overrides it for a PROFS variant of a
    pair-based loss: the component ablation's ``"all"`` trains PROFS's batches without the
    restriction."""
    if key not in PAIR_MODE and key != "softtriple":
        raise ValueError(
            f"unknown loss {key!r}; choose one of {[*LOSSES.values(), *TABLE2_LOSSES.values()]}"
        )
    if pairs is not None:
        if pairs not in PAIR_MODES:
            raise ValueError(
                f"pairs must be one of {list(PAIR_MODES)} or None (Sec. 5.3's), got {pairs!r}"
            )
        if (variant == "plain" or key == "softtriple") and pairs != "all":
            raise ValueError(
                f"pairs={pairs!r} restricts the pairs of PROFS's batches; {key} {variant} has none "
                "to restrict: leave pairs=None"
            )
        return pairs
    if variant == "plain" or key == "softtriple":
        return "all"
    return PAIR_MODE[key]
