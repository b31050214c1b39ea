"""The SSDML chapter: settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from dmlnb.experiments.settings import with_validation
from dmlnb.profiles import TrainConfig, make_config
from dmlnb.ssdml.algorithm import (
    PartitionSchedule,
)

__all__ = [
    "BASELINE_SEARCH",
    "METHODS",
    "NAMES",
    "REPORTED_COLUMN",
    "SEMI_SUPERVISED",
    "TABLE_SETTINGS",
    "Setting",
    "with_hyper",
]

# Row names of the tables -> method keys.
METHODS: dict[str, str] = {
    "Deep-LRML": "lrml",
    "Deep-SERAPH": "seraph",
    "Deep-ISDML": "isdml",
    "Deep-APLLR": "apllr",
    "Deep-APIT": "apit",
    "Ours": "ours",
    "Ours w/o orth": "ours-noorth",
    "Ours, negatives outside N_k (not the paper's)": "ours-outside",
    "Triplet (labelled only)": "triplet",
    "Angular (labelled only)": "angular",
}
SEMI_SUPERVISED = ("lrml", "seraph", "isdml", "apllr", "apit")
NAMES = {v: k for k, v in METHODS.items()}


@dataclass(frozen=True)
class Setting:
    """One experimental setting of the chapter.

    Attributes:
        name: label in the tables (e.g. ``"digits"``, ``"MNIST"``).
        config: :class:`~dmlnb.profiles.TrainConfig` values (dataset, network, optimiser, total
            ``epochs``, ``batch_size`` = units per mini-batch, evaluation cadence).
        labelled_per_class: labelled training examples per class (the rest is unlabelled).
        partition_size, epochs_per_partition, metric_epochs, max_units: the
            :class:`PartitionSchedule`.
        metric_dim: ``l``, the output size of ``L``.
        k, gamma, alpha: kNN size, propagation weight and angle of Eq. (3).
        seeds: seeds of the main comparison.
        methods: method keys run with every seed.
        single_seed_methods: method keys run with ``seeds[0]`` only (time budget).
        alpha_grid: angles of the sensitivity study (every seed of ``seeds``; ``()``: not run).
        baseline_hyper: keyword arguments of :func:`dmlnb.ssdml.baselines.build_baseline` per key.
        pretrain_epochs: softmax pre-training on the labelled data before Algorithm 1 (CIFAR-10).
        propagation, negatives: the proposed method's reading of the affinity propagation and
            where its negatives come from (:class:`~dmlnb.ssdml.angular.AngularSSDML`; the paper's
            ``"one-sided"`` and ``"neighbourhood"`` by default, the alternatives are the
            diagnosis's options).
        validation: training classes held out as validation classes, on which every run of the
            setting chooses its best epoch (:func:`~dmlnb.experiments.settings.with_validation`;
            set by :func:`settings_for` on the class-disjoint settings); ``None``: the best epoch
            on the test set (the paper's numbers are reported so; the only choice for a setting
            whose train and test share classes).
    """

    name: str
    config: dict
    labelled_per_class: int
    partition_size: int
    epochs_per_partition: int
    metric_dim: int
    k: int = 10
    gamma: float = 0.99
    alpha: float = 40.0
    metric_epochs: int = 1
    max_units: int | None = None
    seeds: tuple = (0, 1, 2)
    methods: tuple = tuple(METHODS.values())
    single_seed_methods: tuple = ()
    alpha_grid: tuple = ()
    baseline_hyper: dict = field(default_factory=dict)
    pretrain_epochs: int = 0
    propagation: str = "one-sided"
    negatives: str = "neighbourhood"
    validation: float | int | None = None

    @property
    def schedule(self) -> PartitionSchedule:
        return PartitionSchedule(
            self.partition_size, self.epochs_per_partition, self.metric_epochs, self.max_units
        )

    def train_config(
        self, profile: str, seed: int, overrides: Mapping[str, Any] | None = None
    ) -> TrainConfig:
        """The run's :class:`TrainConfig` (profile defaults + :attr:`config` + ``overrides``), with
        ``steps_per_epoch`` unset: an SSDML epoch is one pass over the partition's units; with
        :attr:`validation`, its hold-out and ``select_on="validation"``."""
        config = make_config(
            profile, {**self.config, **(overrides or {}), "seed": seed, "steps_per_epoch": None}
        )
        return with_validation(config, self.validation)


# Which settings stand in for the paper's Table 1 (small images, same classes in train and
# test) and Table 2 (fine-grained, unseen test classes) at each profile.
TABLE_SETTINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "smoke": {"table1": ("digits",), "table2": ("digits-classes",)},
    "default": {"table1": ("digits",), "table2": ("omniglot",)},
    "paper": {"table1": ("mnist", "fashion-mnist", "cifar10"), "table2": ("cub200", "cars196")},
}


# The reported column each setting is shown beside.
REPORTED_COLUMN = {
    "digits": "MNIST",
    "digits-classes": "CUB-200",
    "mnist": "MNIST",
    "fashion-mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "omniglot": "CUB-200",
    "cub200": "CUB-200",
    "cars196": "Cars-196",
}


def with_hyper(setting: Setting, hyper: Mapping[str, Mapping[str, Any]]) -> Setting:
    """``setting`` with ``hyper`` (``{method: {name: value}}``) merged into its
    :attr:`Setting.baseline_hyper`."""
    merged = {m: dict(v) for m, v in setting.baseline_hyper.items()}
    for method, values in hyper.items():
        merged[method] = {**merged.get(method, {}), **values}
    return replace(setting, baseline_hyper=merged)


# --------------------------------------------------------------------------- baseline search

#: The hyper-parameter search of the baselines, per profile: ``{method: (keyword, values)}``, one
#: key hyper-parameter each, every value with the setting's epochs and the first seed (one run per
#: value), chosen on the validation classes (:func:`chosen_hyper`). The angular baseline has none:
#: its only hyper-parameter is α, kept at the proposed method's so that the row is the proposed
#: loss without the unlabelled data.
BASELINE_SEARCH: dict[str, dict[str, tuple[str, tuple[float, ...]]]] = {
    "smoke": {"lrml": ("gamma_d", (0.01, 0.03)), "triplet": ("margin", (0.1, 0.2))},
    "default": {
        "lrml": ("gamma_d", (0.003, 0.01, 0.03)),
        "seraph": ("eta", (0.5, 1.0, 2.0)),
        "isdml": ("gamma_d", (0.003, 0.01, 0.03)),
        "apllr": ("lam", (0.1, 1.0, 10.0)),
        "apit": ("lam", (0.1, 1.0, 10.0)),
        "triplet": ("margin", (0.1, 0.2, 0.4)),
    },
}
BASELINE_SEARCH["paper"] = BASELINE_SEARCH["default"]
