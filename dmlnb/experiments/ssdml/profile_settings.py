"""The SSDML chapter's settings at each profile, as one table (:data:`_ROWS`: a row per setting)
with what each profile's settings share and what a row adds; :func:`settings_for` gives a
profile's settings with the validation hold-out and the seeds of a run of the notebook."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from dmlnb.experiments.settings import validation_holdout
from dmlnb.experiments.ssdml.settings import TABLE_SETTINGS, Setting

__all__ = ["PAPER_TRAINING", "PROFILE_SETTINGS", "settings_for"]

#: Unlabelled images per partition meaning "the whole training set as one partition".
WHOLE_SET = 10**9

#: The training options of each profile's settings, on top of the profile's own
#: (:data:`dmlnb.profiles.PROFILES`, which :meth:`Setting.train_config` applies first): a small
#: CNN from scratch at the smoke and default profiles; the paper's optimiser, batches and
#: evaluation cadence at the paper profile, where each setting adds its network.
#: The optimiser is TrainConfig's default, Adam, everywhere; :data:`PAPER_TRAINING` holds the
#: paper's rate, weight decay and batches (100 triplets).
_EVALUATION = dict(eval_metrics=("recall", "nmi"))
_CPU_TRAINING = dict(_EVALUATION, model="convnet", batch_size=200, m_per_class=10, lr=1e-3)
PAPER_TRAINING = dict(_EVALUATION, batch_size=100, m_per_class=10, lr=1e-4, weight_decay=0.0)
_TRAINING = {
    "smoke": dict(_CPU_TRAINING, width=16, embedding_dim=32, eval_every=1),
    "default": dict(_CPU_TRAINING, width=32, embedding_dim=64, eval_every=2),
    "paper": dict(PAPER_TRAINING, eval_every=10),
}
#: The Setting fields every setting of a profile shares.
_SHARED: dict[str, dict[str, Any]] = {
    # CI: one seed, a handful of steps per method
    "smoke": dict(
        seeds=(0,),
        max_units=1500,
        methods=("ours", "ours-noorth", "lrml", "triplet"),
        baseline_hyper={"lrml": {"k": 10}},
    ),
    "default": dict(baseline_hyper={"seraph": {"max_unlabelled_pairs": 5000}}),
    "paper": dict(seeds=(0,)),  # the paper's configurations (Implementation details); a GPU
}

#: Every setting of every profile, one row each: profile, key, name, dataset, its options,
#: labelled examples per class, unlabelled images per partition, epochs per partition, ``l``
#: (:attr:`Setting.metric_dim`) and epochs. At the smoke profile, digits with the classes shared
#: by train and test and, as the protocol chapter's split (train on 0-4, test on 5-9), apart (so
#: that the validation hold-out and the baseline search run in CI); at the default profile, the
#: analogue of each of the paper's protocols: the MNIST one (the same ten classes in train and
#: test) and the CUB / Cars one (class-disjoint, test on unseen alphabets).
_ROWS = [
    ("smoke", "digits", "digits", "digits", {"split": "samples"}, 10, 200, 1, 16, 2),
    ("smoke", "digits-classes", "digits-classes", "digits", {}, 10, 200, 1, 16, 2),
    ("default", "digits", "digits", "digits", {"split": "samples"}, 10, 400, 2, 32, 8),
    (
        "default",
        "omniglot",
        "omniglot-small",
        "omniglot-small",
        {"image_size": 28},
        5,
        700,
        2,
        32,
        4,
    ),
    ("paper", "mnist", "MNIST", "mnist", {}, 10, 9000, 10, 64, 50),
    ("paper", "fashion-mnist", "Fashion-MNIST", "fashion-mnist", {}, 10, 9000, 10, 64, 50),
    ("paper", "cifar10", "CIFAR-10", "cifar10", {}, 100, 9000, 10, 32, 50),
    ("paper", "cub200", "CUB-200", "cub200", {"image_size": 224}, 5, WHOLE_SET, 200, 128, 200),
    ("paper", "cars196", "Cars-196", "cars196", {"image_size": 224}, 5, WHOLE_SET, 200, 128, 200),
]
#: What a row adds: its own Setting fields and, under ``"config"``, its training options (the
#: paper's networks: the small ones from scratch; GoogLeNet keeps the paper profile's ImageNet
#: weights, images and workers).
_SMALL_NET = dict(pretrained=False)
_ROW_EXTRAS: dict[tuple[str, str], dict[str, Any]] = {
    ("smoke", "digits"): dict(alpha_grid=(35.0, 55.0)),
    ("default", "digits"): dict(max_units=2500, alpha_grid=(35.0, 45.0, 55.0)),
    ("default", "omniglot"): dict(max_units=3500),
    ("paper", "mnist"): dict(
        config=dict(_SMALL_NET, model="ssdml-mnist", embedding_dim=128, num_workers=0)
    ),
    ("paper", "fashion-mnist"): dict(
        config=dict(_SMALL_NET, model="ssdml-mnist", embedding_dim=128)
    ),
    ("paper", "cifar10"): dict(
        pretrain_epochs=30, config=dict(_SMALL_NET, model="ssdml-cifar", embedding_dim=64)
    ),
    ("paper", "cub200"): dict(k=50, alpha=45.0, config=dict(model="googlenet", embedding_dim=1024)),
    ("paper", "cars196"): dict(
        k=50,
        alpha=45.0,
        alpha_grid=(35.0, 40.0, 55.0),
        config=dict(model="googlenet", embedding_dim=1024),
    ),
}


def _setting(row: tuple) -> Setting:
    """The :class:`Setting` of one row of :data:`_ROWS` with its profile's shared fields and
    training options and the row's extras."""
    profile, key, name, dataset, options, labelled, partition, per_partition, dim, epochs = row
    extras = dict(_ROW_EXTRAS.get((profile, key), {}))
    config = dict(
        _TRAINING[profile],
        dataset=dataset,
        dataset_options=options,
        epochs=epochs,
        **extras.pop("config", {}),
    )
    shared = {**_SHARED[profile], **extras}
    return Setting(name, config, labelled, partition, per_partition, dim, **shared)


PROFILE_SETTINGS: dict[str, dict[str, Setting]] = {
    profile: {row[1]: _setting(row) for row in _ROWS if row[0] == profile}
    for profile in dict.fromkeys(row[0] for row in _ROWS)
}


def settings_for(
    profile: str,
    validation: bool | float | int | None = None,
    *,
    seeds: Sequence[int] | None = None,
    seed_offset: int = 0,
) -> dict[str, Setting]:
    """The settings of ``profile``. ``validation``
    (:func:`~dmlnb.experiments.settings.validation_holdout`) holds out training classes in the
    class-disjoint settings (:data:`TABLE_SETTINGS` ``"table2"``, e.g. Omniglot-small), whose runs
    then choose their best epoch on them; the settings whose train and test share classes
    (``"table1"``: digits, MNIST, ...) have no class-disjoint validation split and keep choosing
    it on the test set (:attr:`Setting.validation` ``None``).

    ``seeds`` (default: each setting's own) replace every setting's seeds and ``seed_offset`` is
    added to each (``python -m dmlnb replicate``: the chapter on other seeds), so every run the
    chapter declares (the main comparison, the α grid, the search on the first seed) and every
    measurement of its seeds (the mining diagnosis, the networks at initialisation, the figures)
    follows them."""
    if profile not in PROFILE_SETTINGS:
        raise ValueError(f"unknown profile {profile!r}; choose one of {list(PROFILE_SETTINGS)}")
    holdout = validation_holdout(profile, validation)
    disjoint = TABLE_SETTINGS[profile]["table2"]
    out = {}
    for key, st in PROFILE_SETTINGS[profile].items():
        if holdout is not None and key in disjoint:
            st = replace(st, validation=holdout)
        if seeds is not None or seed_offset:
            use = st.seeds if seeds is None else seeds
            st = replace(st, seeds=tuple(int(s) + int(seed_offset) for s in use))
        out[key] = st
    return out
