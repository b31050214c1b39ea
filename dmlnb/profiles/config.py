"""A run's configuration (:class:`TrainConfig`), resolved from a profile, a notebook's presets
and a reader's overrides and validated key by key and across keys (:func:`make_config`; see
:mod:`dmlnb.profiles`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dmlnb.profiles.rules import CONFIG_RULES, as_mapping, check_values, evaluation_names
from dmlnb.profiles.scales import PROFILES, available_profiles

__all__ = ["TrainConfig", "make_config"]


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
    #: The learning rate of the embedding head (``model.head``, the layer put on the trunk) as a
    #: multiple of ``lr`` (PROFS Sec. 5.2 trains its new FC layer at 10x the pretrained trunk's);
    #: 1 trains every model parameter at ``lr``.
    head_lr_scale: float = 1.0
    weight_decay: float = 0.0
    momentum: float = 0.9
    #: Adam's and AdamW's ``(beta1, beta2)`` (torch's default; SGD and RMSprop ignore them).
    betas: tuple = (0.9, 0.999)
    lr_milestones: tuple = ()
    lr_gamma: float = 0.1
    grad_clip: float | None = None
    # evaluation
    eval_every: int = 1
    eval_ks: tuple = (1, 2, 4, 8)
    eval_metrics: tuple = ("recall", "nmi", "f1", "map_at_r")
    select_metric: str = "R@1"
    #: Where the best epoch is chosen: ``"test"``, the papers' protocol (the best epoch on the
    #: test classes, an optimistic estimate), or ``"validation"``, on the validation classes held
    #: out of training (``dataset_options={"validation": 0.2}``; Musgrave et al. 2020), the test
    #: classes then measured at that epoch. Either way a run with a validation split records both
    #: selections (:mod:`dmlnb.selection`).
    select_on: str = "test"
    #: Stop once ``select_metric`` on the ``select_on`` split has not improved for ``patience``
    #: evaluations in a row (the run has converged by the book's rule); ``epochs`` is then the
    #: most a run trains. ``None``: every run trains ``epochs`` epochs.
    patience: int | None = None
    eval_batch_size: int = 512
    # execution
    seed: int = 0
    device: str = "auto"
    amp: bool = True
    channels_last: bool = True
    num_workers: int = 0
    #: ``torch.compile`` the model for training on CUDA (ignored on the CPU); the first steps
    #: then include the compilation (tens of seconds for a ResNet-50).
    compile: bool = False

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes`` applied and validated."""
        return make_config(None, changes, base=self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Checks across fields: ``(predicate on the config, message)``.
_CROSS_CHECKS: tuple[tuple[Callable[[TrainConfig], bool], Callable[[TrainConfig], str]], ...] = (
    (
        lambda c: c.batch_size % c.m_per_class == 0,
        lambda c: (
            f"batch_size ({c.batch_size}) must be a multiple of m_per_class ({c.m_per_class}); "
            f"change one of them"
        ),
    ),
    (
        lambda c: "recall" not in c.eval_metrics or len(c.eval_ks) > 0,
        lambda c: (
            "eval_ks must not be empty while eval_metrics asks for 'recall'; give Ks, "
            "e.g. eval_ks=(1, 2, 4, 8)"
        ),
    ),
    (
        lambda c: c.select_metric in evaluation_names(c.eval_ks, c.eval_metrics),
        lambda c: (
            f"select_metric {c.select_metric!r} is not computed with eval_ks={c.eval_ks} and "
            f"eval_metrics={c.eval_metrics}; choose one of "
            f"{evaluation_names(c.eval_ks, c.eval_metrics)} or add its K / metric"
        ),
    ),
)


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
        TypeError: a value of the wrong type, or ``overrides`` not a mapping.
        ValueError: a value out of its range (:data:`CONFIG_RULES`), or fields that contradict
            each other (``batch_size`` / ``m_per_class``, ``select_metric`` / ``eval_ks`` /
            ``eval_metrics``).
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
    values.update(as_mapping(overrides, "overrides"))
    checked = check_values(values, CONFIG_RULES, "config key")
    start = base if base is not None else TrainConfig()
    config = dataclasses.replace(start, **checked)
    for holds, message in _CROSS_CHECKS:
        if not holds(config):
            raise ValueError(message(config))
    return config
