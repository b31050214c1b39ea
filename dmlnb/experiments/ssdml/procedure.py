"""How the SSDML chapter's runs train: Algorithm 1 on one setting, as a
:class:`dmlnb.chapter.Procedure` that :func:`dmlnb.chapter.train_runs` trains or reloads.

Each seed trains on its own labelled draw (:meth:`SSDMLProcedure.load_data`, one load per
setting and seed); the network is the setting's (:func:`~dmlnb.experiments.ssdml.network.
build_network`), pre-trained by softmax where the setting says so, then trained with its method's
objective by :func:`dmlnb.ssdml.algorithm.train_ssdml`; after training, the best checkpoint's
test embedding gives the record's extras (the spectrum, Figure 3's neighbours, Figure 2's t-SNE).
The specification keeps the keys and folder names of the records made before the chapter layer
(``schedule``, ``method``, ``tsne``, ``retrieval_queries``), so they reload.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dmlnb.chapter import Components, Procedure, RunContext
from dmlnb.checkpoints import load_checkpoint
from dmlnb.data import DatasetSplits
from dmlnb.evaluation import knn
from dmlnb.experiments.ssdml.network import (
    build_network,
    embedding_spectrum,
    load_splits,
    pretrain_softmax,
    triplet_purity,
)
from dmlnb.experiments.ssdml.profile_settings import PROFILE_SETTINGS
from dmlnb.experiments.ssdml.settings import SEMI_SUPERVISED, Setting
from dmlnb.methods import MethodCall
from dmlnb.plots import tsne
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.ssdml.algorithm import embed, run_spec, train_ssdml

__all__ = ["SSDMLProcedure", "TSNE_METHODS", "PAPER_MINING", "method_entries", "query_rows"]

#: The methods whose first seed stores its t-SNE coordinates (Figure 2).
TSNE_METHODS = ("ours", "ours-noorth")
#: The proposed method's mining as the paper states it (Setting.propagation, Setting.negatives).
PAPER_MINING = {"propagation": "one-sided", "negatives": "neighbourhood"}
_ANGULAR = ("ours", "ours-noorth", "ours-outside")
_SUPERVISED = ("triplet", "angular")


def query_rows(n: int, count: int, seed: int = 0) -> list[int]:
    """``count`` fixed test rows of ``n`` (Figure 3's queries), drawn with ``seed``."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:count].tolist()


def method_entries(method: str, setting: Setting, call: MethodCall) -> dict[str, Any]:
    """The ``"method"`` entry of a run's specification: the method key, the setting's name,
    labelled examples, ``l`` and pre-training; α where the method reads it, ``k`` and ``γ`` for
    the proposed method (and its mining options where not the paper's), the baseline's explicit
    hyper-parameters (``setting.baseline_hyper``)."""
    spec: dict[str, Any] = {
        "method": method,
        "setting": setting.name,
        "labelled_per_class": setting.labelled_per_class,
        "metric_dim": setting.metric_dim,
        "pretrain_epochs": setting.pretrain_epochs,
    }
    if method in (*_ANGULAR, "angular"):
        spec["alpha"] = call.args["alpha_degrees"]
    if method in _ANGULAR:
        spec.update(k=call.args["k"], gamma=call.args["gamma"])
        # named only when not the paper's, so the records made before the options still reload
        spec.update(
            {
                key: getattr(setting, key)
                for key, v in PAPER_MINING.items()
                if getattr(setting, key) != v
            }
        )
    if method in SEMI_SUPERVISED or setting.baseline_hyper.get(method):
        spec["hyper"] = setting.baseline_hyper.get(method, {})
    return spec


def _example_setting() -> Setting:
    return PROFILE_SETTINGS["smoke"]["digits"]


@dataclass(frozen=True)
class SSDMLProcedure(Procedure):
    """Algorithm 1 on ``setting``; a run's label is its method key (``"ours"``, ``"lrml"``...).

    Attributes:
        setting: the :class:`~dmlnb.experiments.ssdml.settings.Setting`. What a run reads of it
            enters its specification (name, labelled examples, schedule, ``l``, pre-training,
            the proposed method's mining options, the baseline's hyper-parameters:
            :func:`method_entries`) or its method call (α, ``k``, γ); its training
            configuration is the one the chapter gives ``train_runs``
            (:meth:`Setting.train_config`).
        tag: added to the folder name after the method (``"-alpha35"``, ``"-margin0.1"``); it
            names the folder only (:attr:`NAME_FIELDS`): a run whose fingerprint another
            declaration already has is that run.
        tsne: the first seed (``setting.seeds[0]``) of :data:`TSNE_METHODS` stores its test
            embedding's t-SNE coordinates (Figure 2).
        retrieval_queries: test queries whose top-5 neighbours every run stores (Figure 3).
    """

    setting: Setting = field(default_factory=_example_setting)
    tag: str = ""
    tsne: bool = True
    retrieval_queries: int = 6

    FIELD_CHOICES: ClassVar = {"setting": tuple(PROFILE_SETTINGS["smoke"].values())}
    EXAMPLE_LABEL: ClassVar[str] = "ours"
    NAME_FIELDS: ClassVar[tuple[str, ...]] = ("tag",)

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        """The schedule, :func:`method_entries` and the number of stored queries."""
        return {
            **run_spec(self.setting.schedule, method_entries(label, self.setting, call)),
            "retrieval_queries": self.retrieval_queries,
        }

    def seed_entries(self, label: str, call: MethodCall, seed: int) -> dict[str, Any]:
        """``"tsne"``: whether this run stores its t-SNE coordinates."""
        first = int(self.setting.seeds[0])
        return {"tsne": self.tsne and label in TSNE_METHODS and int(seed) == first}

    def run_name(self, label: str, seed: int, changes: tuple[tuple[str, Any], ...]) -> str:
        """``"<setting>-<method><tag>-seed<seed>"`` (the chapter's groups make no changes)."""
        if changes:
            raise ValueError(f"an SSDML group makes no configuration changes, got {changes}")
        return f"{self.setting.name}-{label}{self.tag}-seed{seed}"

    def data_key(self, config: TrainConfig) -> Hashable:
        """One labelled draw per setting and seed."""
        return (self.setting.name, self.setting.labelled_per_class, config.seed)

    def load_data(self, config: TrainConfig, data_root: str | Path | None) -> DatasetSplits:
        """The dataset with the seed's labelled draw (:func:`load_splits`)."""
        return load_splits(self.setting, config, config.seed, data_root)

    def build(
        self, call: MethodCall, config: TrainConfig, splits: Any
    ) -> tuple[nn.Module, nn.Module]:
        """``(f_θ, objective)``: the network (:func:`build_network`) and the method's objective
        on its output size ``d``, both after ``torch.manual_seed(config.seed)``."""
        torch.manual_seed(config.seed)
        network, dim = build_network(config, splits.input_shape)
        return network, call.build(embedding_dim=dim)

    def train(
        self, run: RunContext, parts: Components, *, resume: bool, name: str, spec: dict[str, Any]
    ) -> RunRecord:
        """Softmax pre-training where the setting has it, then Algorithm 1
        (:func:`train_ssdml`); the supervised baselines see the labelled part only."""
        splits, st = run.splits, self.setting
        if st.pretrain_epochs:
            dim = run.loss.metric.dim  # type: ignore[union-attr]
            pretrain_softmax(
                run.model,
                dim,
                splits.train,
                splits.num_train_classes,
                run.config,
                st.pretrain_epochs,
            )
        targets = torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])
        return train_ssdml(
            run.model,
            parts.loss,  # type: ignore[arg-type]
            splits.train,
            None if run.label in _SUPERVISED else splits.unlabelled,
            splits.test,
            run.config,
            st.schedule,
            spec=spec,
            run_dir=run.run_dir,
            resume=resume,
            progress=False,
            name=f"{st.name}-{run.label}-seed{run.seed}",
            diagnose=triplet_purity(targets),
            val_set=splits.validation,
        )

    def finish(self, run: RunContext, record: RunRecord) -> dict[str, Any]:
        """From the best checkpoint's test embedding ``Lᵀ z``: ``spectrum``
        (:func:`embedding_spectrum`), ``queries`` and their top-5 Euclidean ``neighbours``
        (Figure 3) and, where :meth:`seed_entries` says, the 2-D t-SNE coordinates (Figure 2)."""
        network, objective = run.model, run.loss
        if run.run_dir is not None and (run.run_dir / "best.pt").exists():
            state = load_checkpoint(run.run_dir / "best.pt")
            network.load_state_dict(state["model"])
            objective.load_state_dict(
                {k.removeprefix("objective."): v for k, v in state["loss"].items()}
            )
        emb, lab = embed(network, objective.metric, run.splits.test, run.config.eval_batch_size)  # type: ignore[arg-type]
        queries = query_rows(len(lab), self.retrieval_queries)
        neighbours = knn(emb, None, k=5, metric="euclidean")[1][queries]  # (Q, 5), self excluded
        extras: dict[str, Any] = {
            "spectrum": embedding_spectrum(emb),
            "queries": queries,
            "neighbours": neighbours.tolist(),
        }
        if self.seed_entries(run.label, run.call, run.seed)["tsne"]:
            extras["tsne"] = np.round(tsne(emb, seed=0), 3).tolist()
        return extras
