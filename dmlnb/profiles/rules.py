"""The rule of every :class:`~dmlnb.profiles.TrainConfig` field (:data:`CONFIG_RULES`) and of
every notebook parameter (:data:`PARAMETER_RULES`, applied by :func:`check_parameters`), the
names they allow and the check of a mapping of values by rules."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dmlnb.profiles.rule import Rule
from dmlnb.profiles.scales import PROFILES

__all__ = [
    "MODELS",
    "OPTIMIZERS",
    "SELECT_ON",
    "CONFIG_RULES",
    "PARAMETER_RULES",
    "evaluation_names",
    "check_values",
    "as_mapping",
    "check_parameters",
]

#: Networks :func:`dmlnb.models.build_model` builds (:func:`dmlnb.models.available_models`).
MODELS = ("convnet", "ssdml-mnist", "ssdml-cifar", "googlenet", "resnet18", "resnet50", "vgg16")

#: Optimisers :func:`dmlnb.training.build_optimizer` builds.
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")

#: Where :class:`TrainConfig.select_on` chooses the best epoch: on the validation classes, or on
#: the test classes (the papers' protocol, optimistic).
SELECT_ON = ("validation", "test")


def _count(low: int = 1, **kw: Any) -> Rule:
    return Rule("int", low=low, **kw)


def _number(low: float = 0.0, above: bool = False, **kw: Any) -> Rule:
    return Rule("float", low=low, above=above, **kw)


def _datasets() -> list[str]:
    from dmlnb.data import available_datasets

    return available_datasets()


def _metric_names() -> tuple[str, ...]:
    from dmlnb.evaluation import METRIC_NAMES

    return METRIC_NAMES


def _milestone(value: float) -> bool:
    return value < 1 or float(value).is_integer()


def _device(name: str) -> bool:
    return re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", name) is not None


#: The rule of every :class:`TrainConfig` field (:func:`make_config` applies them).
CONFIG_RULES: dict[str, Rule] = {
    "dataset": Rule("str", choices=_datasets),
    "dataset_options": Rule("dict", example='{"image_size": 224}'),
    "model": Rule("str", choices=MODELS),
    "pretrained": Rule("bool"),
    "embedding_dim": _count(),
    "normalize": Rule("bool"),
    "width": _count(),
    "batch_size": _count(2),
    "m_per_class": _count(),
    "steps_per_epoch": _count(optional=True),
    "epochs": _count(),
    "optimizer": Rule("str", choices=OPTIMIZERS),
    "lr": _number(),
    "loss_lr": _number(optional=True),
    "head_lr_scale": _number(above=True),
    "weight_decay": _number(),
    "momentum": _number(high=1.0, below=True),
    "betas": Rule(
        "seq",
        item=_number(high=1.0, below=True),
        test=(lambda b: len(b) == 2, "two of them: (beta1, beta2)"),
        example="(0.9, 0.99)",
    ),
    "lr_milestones": Rule(
        "seq",
        item=_number(above=True, test=(_milestone, "fractions of the run < 1 or whole epochs")),
        example="(0.5, 0.75) or (20, 30)",
    ),
    "lr_gamma": _number(above=True),
    "grad_clip": _number(above=True, optional=True),
    "eval_every": _count(),
    "eval_ks": Rule("seq", item=_count(), distinct=True, example="(1, 2, 4, 8)"),
    "eval_metrics": Rule(
        "seq", item=Rule("str", choices=_metric_names), distinct=True, example='("recall", "nmi")'
    ),
    "select_metric": Rule("str", example='"R@1", "NMI", "F1" or "MAP@R"'),
    "select_on": Rule("str", choices=SELECT_ON),
    "patience": _count(optional=True),
    "eval_batch_size": _count(),
    "seed": _count(0),
    "device": Rule("str", test=(_device, '"auto", "cpu", "cuda", "cuda:N" or "mps"')),
    "amp": Rule("bool"),
    "channels_last": Rule("bool"),
    "compile": Rule("bool"),
    "num_workers": _count(0),
}


def _grid(item: Rule, example: str) -> Rule:
    """None (the profile's grid) or a non-empty list of distinct values."""
    return Rule("seq", item=item, optional=True, nonempty=True, distinct=True, example=example)


_SEEDS = _grid(_count(0), "[0, 1, 2]")

#: The rule of every notebook parameter (:func:`check_parameters` applies them; ``overrides``
#: is also checked key by key against :data:`CONFIG_RULES`).
PARAMETER_RULES: dict[str, Rule] = {
    "profile": Rule("str", choices=tuple(PROFILES)),
    "overrides": Rule("dict", example='{"epochs": 3}'),
    "methods": Rule("dict", example='{"clustering": {"pam_passes": 3}}'),
    "changes": Rule("dict", example='{"EPSHN": {"temperature": 0.05}}'),
    "seeds": _SEEDS,
    "kmeans_seeds": _SEEDS,
    "seed_offset": _count(0),
    "group_sizes": _grid(_count(2), "[2, 4, 8]"),
    "m_grid": _grid(_count(), "[1, 4, 40]"),
    "lambda_grid": _grid(_number(), "[0.0, 0.001, 0.1]"),
    "temperature": _number(above=True),
    "gamma": _number(optional=True),
    "tsne_classes": _count(),
    "threads": _count(),
    "retrain": Rule("bool"),
    "validation": Rule("holdout", optional=True, example="True or 0.2"),
    "data_root": Rule("path", optional=True),
    "results_dir": Rule("path"),
}


def evaluation_names(eval_ks: Sequence[int], eval_metrics: Sequence[str]) -> list[str]:
    """The keys :func:`dmlnb.evaluation.evaluate` returns for ``ks`` and ``metrics``, e.g.
    ``["R@1", "R@2", "NMI"]``: the names ``select_metric`` may take."""
    names = [f"R@{k}" for k in eval_ks] if "recall" in eval_metrics else []
    labels = {"nmi": "NMI", "f1": "F1", "map_at_r": "MAP@R"}
    return names + [label for metric, label in labels.items() if metric in eval_metrics]


def check_values(values: Mapping[str, Any], rules: Mapping[str, Rule], what: str) -> dict[str, Any]:
    """``values`` checked by ``rules`` (unknown names raise :class:`KeyError`
    listing the valid ones)."""
    unknown = sorted(set(values) - set(rules), key=str)
    if unknown:
        raise KeyError(f"unknown {what}(s) {unknown}; valid keys are: {', '.join(rules)}")
    return {k: rules[k].check(what, k, v) for k, v in values.items()}


def as_mapping(overrides: Any, what: str) -> Mapping[str, Any]:
    """``overrides`` as a mapping (``None``: empty), or a :class:`TypeError` naming ``what``."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise TypeError(
            f'{what} must be a dict of TrainConfig fields, e.g. {{"epochs": 3}}; '
            f"got {type(overrides).__name__} {overrides!r}"
        )
    return overrides


def check_parameters(parameters: Mapping[str, Any], required: Sequence[str] = ()) -> None:
    """Validate a notebook's parameters by :data:`PARAMETER_RULES` (``overrides`` key by key by
    :data:`CONFIG_RULES`); the set-up cell calls it before using any of them.

    Args:
        parameters: name -> value, e.g. ``dict(profile=profile, seeds=seeds)``.
        required: names that may not be ``None`` here although the rule allows it elsewhere.

    Raises:
        KeyError: a name without a rule; TypeError / ValueError: a bad value (the message names
        the parameter, the value and what is allowed).
    """
    missing = sorted(set(required) - set(parameters))
    if missing:
        raise KeyError(f"required notebook parameter(s) {missing} not passed to check_parameters")
    rules = {
        **PARAMETER_RULES,
        **{n: dataclasses.replace(PARAMETER_RULES[n], optional=False) for n in required},
    }
    check_values(parameters, rules, "notebook parameter")
    if "overrides" in parameters:
        check_values(
            as_mapping(parameters["overrides"], "notebook parameter 'overrides'"),
            CONFIG_RULES,
            "config key",
        )
