"""The three scales an experiment runs at (:data:`PROFILES`, see :mod:`dmlnb.profiles`) and the
profile a notebook actually runs at (:func:`resolve_profile`)."""

from __future__ import annotations

from typing import Any

__all__ = ["PROFILE_ENV", "PROFILES", "available_profiles", "resolve_profile"]


#: The environment variable that overrides a notebook's ``profile`` parameter
#: (:func:`resolve_profile`).
PROFILE_ENV = "DMLNB_PROFILE"

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        dataset="digits",
        model="convnet",
        width=16,
        embedding_dim=16,
        batch_size=24,
        m_per_class=8,
        steps_per_epoch=6,
        epochs=2,
        lr=3e-3,
    ),
    "default": dict(
        dataset="omniglot-small",
        dataset_options={"image_size": 28},
        model="convnet",
        embedding_dim=64,
        batch_size=128,
        m_per_class=8,
        epochs=15,
        lr=1e-3,
        # on a 2-core CPU a forward pass of 128 test images runs faster per image than one of 512
        # (the small network's activations stay in cache)
        eval_batch_size=128,
    ),
    "paper": dict(
        dataset="cub200",
        dataset_options={"image_size": 224},
        model="resnet50",
        pretrained=True,
        embedding_dim=512,
        batch_size=128,
        m_per_class=4,
        epochs=100,
        lr=1e-5,
        weight_decay=1e-4,
        num_workers=8,
        eval_every=5,
    ),
}


def available_profiles() -> list[str]:
    return list(PROFILES)


def resolve_profile(profile: str) -> str:
    """The profile a notebook actually runs at.

    The environment variable ``DMLNB_PROFILE`` overrides the notebook's ``profile`` parameter:
    ``make test`` sets it to ``smoke`` so that nbval, which re-executes notebooks as stored and
    cannot inject papermill parameters, runs them at the smoke scale.
    """
    import os

    chosen = os.environ.get(PROFILE_ENV) or profile
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}; choose one of {available_profiles()}")
    return chosen
