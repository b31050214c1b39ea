"""Profiles: one experiment, three scales.

* ``smoke`` — seconds on a 2-core CPU, on data bundled with scikit-learn (``digits``); what CI runs.
* ``default`` — real data small enough for a CPU in minutes (Omniglot's minimal splits); what the
  book shows.
* ``paper`` — the paper's dataset, backbone, embedding size and schedule; needs a GPU.

A profile is a set of :class:`TrainConfig` field values. Notebooks layer their own presets on top
(``presets={"paper": {"dataset": "cars196"}}``) and a reader's overrides on top of that;
:func:`make_config` validates every key and type, so a typo fails loudly instead of being ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

__all__ = ["TrainConfig", "PROFILES", "make_config", "available_profiles", "resolve_profile"]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (the run record stores it verbatim)."""

    # data
    dataset: str = "digits"
    dataset_options: dict = field(default_factory=dict)
    # model
    model: str = "convnet"
    pretrained: bool = False
    embedding_dim: int = 64
    normalize: bool = True
    width: int = 64
    # batches
    batch_size: int = 128
    m_per_class: int = 8
    steps_per_epoch: int | None = None
    # optimisation
    epochs: int = 10
    optimizer: str = "adam"
    lr: float = 1e-3
    loss_lr: float | None = None
    weight_decay: float = 0.0
    momentum: float = 0.9
    lr_milestones: tuple = ()
    lr_gamma: float = 0.1
    grad_clip: float | None = None
    # evaluation
    eval_every: int = 1
    eval_ks: tuple = (1, 2, 4, 8)
    eval_metrics: tuple = ("recall", "nmi", "f1", "map_at_r")
    select_metric: str = "R@1"
    eval_batch_size: int = 512
    # execution
    seed: int = 0
    device: str = "auto"
    amp: bool = True
    channels_last: bool = True
    num_workers: int = 0

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes`` applied and validated."""
        return make_config(None, changes, base=self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        dataset="digits", model="convnet", width=16, embedding_dim=16, batch_size=40,
        m_per_class=8, steps_per_epoch=6, epochs=2, lr=3e-3,
    ),
    "default": dict(
        dataset="omniglot-small", dataset_options={"image_size": 28}, model="convnet",
        embedding_dim=64, batch_size=128, m_per_class=8, epochs=15, lr=1e-3,
    ),
    "paper": dict(
        dataset="cub200", dataset_options={"image_size": 224}, model="resnet50", pretrained=True,
        embedding_dim=512, batch_size=128, m_per_class=4, epochs=100, lr=1e-5,
        weight_decay=1e-4, num_workers=8, eval_every=5,
    ),
}


def available_profiles() -> list[str]:
    return list(PROFILES)


def _check_type(name: str, value: Any) -> Any:
    """Validate ``value`` against a field annotation; ints are accepted for floats, lists for tuples."""
    hint = typing.get_type_hints(TrainConfig)[name]
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for opt in options:
        if opt is type(None) and value is None:
            return None
        if opt is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if opt is tuple and isinstance(value, (list, tuple)):
            return tuple(value)
        if opt is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if opt in (str, bool, dict) and isinstance(value, opt):
            return value
    names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    raise TypeError(f"config key {name!r} must be {names}, got {type(value).__name__} {value!r}")


def make_config(
    profile: str | None,
    overrides: Mapping[str, Any] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    base: TrainConfig | None = None,
) -> TrainConfig:
    """Resolve ``profile`` (+ a notebook's ``presets[profile]``) + ``overrides`` into a config.

    Raises:
        ValueError: unknown profile (the message lists the valid ones).
        KeyError: an override or preset key that is not a :class:`TrainConfig` field (lists them).
        TypeError: a value of the wrong type.
    """
    values: dict[str, Any] = {}
    if profile is not None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of {available_profiles()}")
        values.update(PROFILES[profile])
        if presets is not None:
            unknown_profiles = set(presets) - set(PROFILES)
            if unknown_profiles:
                raise ValueError(
                    f"presets name unknown profiles {sorted(unknown_profiles)}; "
                    f"valid: {available_profiles()}"
                )
            values.update(presets.get(profile, {}))
    values.update(overrides or {})
    valid = [f.name for f in fields(TrainConfig)]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise KeyError(f"unknown config key(s) {unknown}; valid keys are: {', '.join(valid)}")
    checked = {k: _check_type(k, v) for k, v in values.items()}
    start = base if base is not None else TrainConfig()
    config = dataclasses.replace(start, **checked)
    if config.batch_size % config.m_per_class:
        raise ValueError(
            f"batch_size ({config.batch_size}) must be a multiple of m_per_class "
            f"({config.m_per_class})"
        )
    return config


def resolve_profile(profile: str) -> str:
    """The profile a notebook actually runs at.

    The environment variable ``DMLNB_PROFILE`` overrides the notebook's ``profile`` parameter:
    ``make test`` sets it to ``smoke`` so that nbval, which re-executes notebooks as stored and
    cannot inject papermill parameters, runs them at the smoke scale.
    """
    import os

    chosen = os.environ.get("DMLNB_PROFILE") or profile
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}; choose one of {available_profiles()}")
    return chosen
