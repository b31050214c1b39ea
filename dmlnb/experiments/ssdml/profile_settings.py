"""The SSDML chapter: profile_settings."""

from __future__ import annotations

from dataclasses import replace

from dmlnb.experiments.settings import validation_holdout
from dmlnb.experiments.ssdml.settings import METHODS, TABLE_SETTINGS, Setting

_ALL = tuple(METHODS.values())
_SMALL_BASELINES = {"k": 10}
_SERAPH = {"max_unlabelled_pairs": 5000}
# The training options shared by the CPU settings (smoke and default profiles: a small CNN from
# scratch) and by the paper's settings; each setting adds its dataset, network and epochs.
_CPU_TRAINING = dict(
    model="convnet", batch_size=200, m_per_class=10, lr=1e-3, eval_metrics=("recall", "nmi")
)
_DEFAULT_TRAINING = dict(
    _CPU_TRAINING, width=32, embedding_dim=64, eval_every=2
)  # the default profile's CNN
PAPER_TRAINING = dict(
    batch_size=100,
    m_per_class=10,
    optimizer="adam",
    lr=1e-4,
    weight_decay=0.0,
    eval_every=10,
    eval_metrics=("recall", "nmi"),
)

PROFILE_SETTINGS: dict[str, dict[str, Setting]] = {
    # CI: sklearn digits, one seed, a handful of steps per method.
    "smoke": {
        "digits": Setting(
            name="digits",
            labelled_per_class=10,
            partition_size=200,
            epochs_per_partition=1,
            metric_dim=16,
            max_units=1500,
            seeds=(0,),
            methods=("ours", "ours-noorth", "lrml", "triplet"),
            alpha_grid=(35.0, 55.0),
            config=dict(
                _CPU_TRAINING,
                dataset="digits",
                dataset_options={"split": "samples"},
                width=16,
                embedding_dim=32,
                epochs=2,
                eval_every=1,
            ),
            baseline_hyper={"lrml": _SMALL_BASELINES},
        ),
        # the class-disjoint protocol at smoke scale (the protocol chapter's digits split: train on
        # 0-4, test on 5-9), so that the validation hold-out and the baseline search run in CI
        "digits-classes": Setting(
            name="digits-classes",
            labelled_per_class=10,
            partition_size=200,
            epochs_per_partition=1,
            metric_dim=16,
            max_units=1500,
            seeds=(0,),
            methods=("ours", "ours-noorth", "lrml", "triplet"),
            config=dict(
                _CPU_TRAINING,
                dataset="digits",
                dataset_options={},
                width=16,
                embedding_dim=32,
                epochs=2,
                eval_every=1,
            ),
            baseline_hyper={"lrml": _SMALL_BASELINES},
        ),
    },
    # Two settings, each the analogue of one of the paper's protocols.
    "default": {
        # The MNIST protocol: same ten classes in train and test, 10 labelled per class, the rest
        # of the training digits unlabelled, partitions of 400 unlabelled digits.
        "digits": Setting(
            name="digits",
            labelled_per_class=10,
            partition_size=400,
            epochs_per_partition=2,
            metric_dim=32,
            max_units=2500,
            alpha_grid=(35.0, 45.0, 55.0),
            methods=_ALL,
            config=dict(
                _DEFAULT_TRAINING, dataset="digits", dataset_options={"split": "samples"}, epochs=8
            ),
            baseline_hyper={"seraph": _SERAPH},
        ),
        # The CUB / Cars protocol: class-disjoint, 5 labelled per training character, test on
        # unseen alphabets.
        "omniglot": Setting(
            name="omniglot-small",
            labelled_per_class=5,
            partition_size=700,
            epochs_per_partition=2,
            metric_dim=32,
            k=10,
            max_units=3500,
            seeds=(0, 1, 2),
            methods=_ALL,
            config=dict(
                _DEFAULT_TRAINING,
                dataset="omniglot-small",
                dataset_options={"image_size": 28},
                epochs=4,
            ),
            baseline_hyper={"seraph": _SERAPH},
        ),
    },
    # The paper's configurations (Implementation details); need a GPU.
    "paper": {
        "mnist": Setting(
            name="MNIST",
            labelled_per_class=10,
            partition_size=9000,
            epochs_per_partition=10,
            metric_dim=64,
            k=10,
            gamma=0.99,
            alpha=40.0,
            seeds=(0,),
            config=dict(
                PAPER_TRAINING,
                dataset="mnist",
                dataset_options={},
                model="ssdml-mnist",
                pretrained=False,
                embedding_dim=128,
                epochs=50,
                num_workers=0,
            ),
        ),
        "fashion-mnist": Setting(
            name="Fashion-MNIST",
            labelled_per_class=10,
            partition_size=9000,
            epochs_per_partition=10,
            metric_dim=64,
            seeds=(0,),
            config=dict(
                PAPER_TRAINING,
                dataset="fashion-mnist",
                dataset_options={},
                model="ssdml-mnist",
                pretrained=False,
                embedding_dim=128,
                epochs=50,
            ),
        ),
        "cifar10": Setting(
            name="CIFAR-10",
            labelled_per_class=100,
            partition_size=9000,
            epochs_per_partition=10,
            metric_dim=32,
            seeds=(0,),
            pretrain_epochs=30,
            config=dict(
                PAPER_TRAINING,
                dataset="cifar10",
                dataset_options={},
                model="ssdml-cifar",
                pretrained=False,
                embedding_dim=64,
                epochs=50,
            ),
        ),
        "cub200": Setting(
            name="CUB-200",
            labelled_per_class=5,
            partition_size=10**9,
            epochs_per_partition=200,
            metric_dim=128,
            k=50,
            gamma=0.99,
            alpha=45.0,
            seeds=(0,),
            config=dict(
                PAPER_TRAINING,
                dataset="cub200",
                dataset_options={"image_size": 224},
                model="googlenet",
                pretrained=True,
                embedding_dim=1024,
                epochs=200,
                num_workers=8,
            ),
        ),
        "cars196": Setting(
            name="Cars-196",
            labelled_per_class=5,
            partition_size=10**9,
            epochs_per_partition=200,
            metric_dim=128,
            k=50,
            gamma=0.99,
            alpha=45.0,
            seeds=(0,),
            alpha_grid=(35.0, 40.0, 55.0),
            config=dict(
                PAPER_TRAINING,
                dataset="cars196",
                dataset_options={"image_size": 224},
                model="googlenet",
                pretrained=True,
                embedding_dim=1024,
                epochs=200,
                num_workers=8,
            ),
        ),
    },
}


def settings_for(profile: str, validation: bool | float | int | None = None) -> dict[str, Setting]:
    """The settings of ``profile``. ``validation``
    (:func:`~dmlnb.experiments.settings.validation_holdout`) holds out training classes in the
    class-disjoint settings (:data:`TABLE_SETTINGS` ``"table2"``, e.g. Omniglot-small), whose runs
    then choose their best epoch on them; the settings whose train and test share classes
    (``"table1"``: digits, MNIST, ...) have no class-disjoint validation split and keep choosing
    it on the test set (:attr:`Setting.validation` ``None``)."""
    if profile not in PROFILE_SETTINGS:
        raise ValueError(f"unknown profile {profile!r}; choose one of {list(PROFILE_SETTINGS)}")
    holdout = validation_holdout(profile, validation)
    disjoint = TABLE_SETTINGS[profile]["table2"]
    return {
        key: replace(st, validation=holdout) if holdout is not None and key in disjoint else st
        for key, st in PROFILE_SETTINGS[profile].items()
    }
