"""A toy chapter declared in the chapter layer (:mod:`dmlnb.chapter`): two methods, two claims,
the smoke profile. What a sixth paper's chapter declares; ``tests/data/toy_chapter.ipynb`` is
its notebook and ``tests/test_chapter_layer.py`` trains, judges, exports and renders it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dmlnb.chapter import Beats, ClaimSpec, RunGroup, Side, Untestable
from dmlnb.methods import MethodCall, call
from dmlnb.profiles import TrainConfig, make_config

CHAPTER = "toy"

#: Each profile's configuration changes (the base is :mod:`dmlnb.profiles`').
PROFILES: dict[str, dict[str, Any]] = {"smoke": {"epochs": 2}, "default": {"epochs": 10}}

METHODS: dict[str, MethodCall] = {
    "triplet": call("triplet", margin=0.2, mining="semihard"),
    "contrastive": call("contrastive", neg_margin=1.0),
}

CLAIMS = [
    ClaimSpec(
        "triplet-beats-contrastive",
        "The triplet loss beats the contrastive loss",
        Beats(Side("losses", "triplet"), Side("losses", "contrastive"), paired=True),
        where="Table 1",
        paper_evidence="+2.0 R@1 (reported, a toy dataset)",
    ),
    ClaimSpec(
        "holds-at-scale",
        "The gain holds on Stanford Online Products",
        Untestable(
            "needs-paper-data",
            "the toy profile trains on scikit-learn's digits",
            "the paper profile on SOP",
        ),
        where="Sec. 5",
    ),
]


def config(profile: str) -> TrainConfig:
    """The chapter's training configuration at ``profile``."""
    return make_config(profile, PROFILES.get(profile, {}))


def groups(changes: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, RunGroup]:
    """The chapter's runs, with a reader's ``changes`` to the methods' arguments
    (``{"triplet": {"margin": 0.1}}``): they enter those runs' fingerprints."""
    methods = {k: c.replace(**dict((changes or {}).get(k, {}))) for k, c in METHODS.items()}
    return {"losses": RunGroup(methods, seeds=(0, 1, 2))}
