"""How the chapter's runs train, as a procedure of the chapter layer (:mod:`dmlnb.chapter`).

:class:`CentroidRuns` is what a run of this chapter needs beyond its loss: the paper's network
(:func:`~dmlnb.experiments.discriminative.networks.build_network`: backbone -> FC(D) -> FC(C) for
the discriminative loss, one FC(D) head for the baselines), its fixed centroids (one-hot, or
K-means on the sphere with the recipe's arguments), the Lemma 3.1 tracker, the backbone's
learning-rate factor, and what is stored after training (the centroids' distances, the lemma's
rows, the last layer's metrics: Tables 2 and 3). Its fields are written into each run's
specification under the keys the committed records hold, so they keep reloading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from dmlnb.chapter import Components, Procedure, RunContext
from dmlnb.checkpoints import load_checkpoint
from dmlnb.evaluation import compute_embeddings, evaluate
from dmlnb.experiments.discriminative.networks import (
    backbone_parameters,
    balanced_subset,
    build_network,
)
from dmlnb.experiments.discriminative.spec import DEVIATION_VARIANTS
from dmlnb.losses.discriminative import (
    BackboneLR,
    LemmaTracker,
    centroid_distance_stats,
    kmeans_sphere_centroids,
    onehot_centroids,
)
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord

__all__ = ["CentroidRuns", "method_key", "variant_tag", "KMEANS_ITERATIONS"]

#: Lloyd iterations of the K-means centroids' recipe
#: (:func:`~dmlnb.losses.discriminative.kmeans_sphere_centroids`).
KMEANS_ITERATIONS = 100


def method_key(label: str) -> str:
    """The chapter's method key of a run label: the label up to its first ``-``
    (``"clustering-g10"`` -> ``"clustering"``)."""
    return label.split("-", 1)[0]


def variant_tag(changes: tuple[tuple[str, Any], ...]) -> str:
    """The folder tag of a run's configuration changes: the
    :data:`~dmlnb.experiments.discriminative.spec.DEVIATION_VARIANTS` name they are, without
    spaces or ``=`` (``"-D256"``), else ``"-<key><value>"`` per change."""
    for name, (change, _) in DEVIATION_VARIANTS.items():
        if tuple(sorted(change.items())) == tuple(changes):
            return "-" + name.replace(" ", "").replace("=", "").replace("/", "")
    return "".join(f"-{k}{v}" for k, v in changes)


@dataclass(frozen=True)
class CentroidRuns(Procedure):
    """The chapter's runs: ``centroids`` (``"onehot"`` or ``"kmeans"``, the discriminative loss's
    fixed centroids; K-means with ``kmeans_points`` points, ``None``: 100 C, and
    ``kmeans_iterations`` Lloyd iterations), ``arch`` (``"vgg16"``: the paper's max-pooled conv5
    network, Sec. 4.5; ``None``: the configured one), ``track_lemma`` every ``lemma_every`` epochs
    (discriminative runs), ``backbone_lr`` (the backbone's learning-rate factor with
    ``weight_decay`` on every parameter, :class:`~dmlnb.losses.discriminative.BackboneLR`;
    ``None``: none)."""

    FIELD_CHOICES = {"centroids": ("onehot", "kmeans"), "arch": (None, "vgg16")}
    EXAMPLE_LABEL, EXAMPLE_FIELDS = "discriminative", {"track_lemma": True}

    centroids: str = "onehot"
    arch: str | None = None
    track_lemma: bool = False
    lemma_every: int = 1
    backbone_lr: float | None = None
    weight_decay: float = 0.0
    kmeans_points: int | None = None
    kmeans_iterations: int = KMEANS_ITERATIONS

    def __post_init__(self) -> None:
        if self.centroids not in ("onehot", "kmeans"):
            raise ValueError(f"centroids must be 'onehot' or 'kmeans', got {self.centroids!r}")

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        """The keys the chapter's records hold (``method``, ``centroids``, ``arch``,
        ``track_lemma``, ``lemma_every``, ``backbone_lr``, ``weight_decay``), and the K-means
        recipe under ``kmeans`` when it is not the default one (the committed records were made
        with it and name none)."""
        disc = method_key(label) == "discriminative"
        track = self.track_lemma and disc
        entries: dict[str, Any] = {
            "method": method_key(label),
            "centroids": self.centroids if disc else None,
            "arch": self.arch,
            "track_lemma": bool(track),
            "lemma_every": int(self.lemma_every) if track else None,
            "backbone_lr": self.backbone_lr,
            "weight_decay": self.weight_decay,
        }
        if (self.kmeans_points, self.kmeans_iterations) != (None, KMEANS_ITERATIONS):
            entries["kmeans"] = {"points": self.kmeans_points, "iterations": self.kmeans_iterations}
        return entries

    def run_name(self, label: str, seed: int, changes: tuple[tuple[str, Any], ...]) -> str:
        """``<label>[-kmeans][-<arch>][-<variant>]-seed<seed>``, the committed folders."""
        kmeans = self.centroids == "kmeans" and method_key(label) == "discriminative"
        tag = ("-kmeans" if kmeans else "") + (f"-{self.arch}" if self.arch else "")
        return f"{label}{tag}{variant_tag(changes)}-seed{seed}"

    def configure(self, config: TrainConfig, label: str, call: MethodCall) -> TrainConfig:
        """N-pair trains unnormalised embeddings (Sohn's L2 penalty keeps their norm in check)."""
        return config.replace(normalize=False) if method_key(label) == "npair" else config

    def make_centroids(self, num_classes: int, seed: int) -> Tensor:
        """``(C, C)`` centroids of this procedure's kind (K-means seeded by the run's seed)."""
        if self.centroids == "onehot":
            return onehot_centroids(num_classes, num_classes)
        return kmeans_sphere_centroids(
            num_classes,
            num_classes,
            seed=seed,
            n_points=self.kmeans_points,
            n_iter=self.kmeans_iterations,
        )

    def build(
        self, call: MethodCall, config: TrainConfig, splits: Any
    ) -> tuple[nn.Module, nn.Module]:
        """The seeded network first, then the loss (the records' order)."""
        disc = call.name == "discriminative"
        num_classes = splits.num_train_classes
        model = build_network(
            "discriminative" if disc else call.name,
            config,
            splits.input_shape,
            num_classes,
            arch=self.arch,
        )
        cents = self.make_centroids(num_classes, config.seed) if disc else None
        loss = call.build(
            num_classes=num_classes, embedding_dim=config.embedding_dim, centroids=cents
        )
        return model, loss

    def components(self, run: RunContext) -> Components:
        """The loss, the Lemma 3.1 tracker (tracked discriminative runs) and the backbone's
        learning rate (when ``backbone_lr``)."""
        hooks: list[Any] = []
        if self.track_lemma and run.call.name == "discriminative":
            tracker = LemmaTracker(
                balanced_subset(run.splits.train, seed=run.config.seed),
                run.loss.centroids,
                every=int(self.lemma_every),
                batch_size=run.config.eval_batch_size,
            )
            run.state["tracker"] = tracker
            hooks.append(tracker)
        if self.backbone_lr is not None:
            hooks.append(
                BackboneLR(backbone_parameters(run.model), self.backbone_lr, self.weight_decay)
            )
        return Components(run.loss, hooks=hooks)

    def finish(self, run: RunContext, record: RunRecord) -> dict[str, Any]:
        """Discriminative runs: ``centroid_stats`` (Table 3), ``lemma`` (the tracker's rows) and
        ``last_layer``: the last (C-dimensional) layer's metrics at the kept epoch (Table 2)."""
        if run.call.name != "discriminative":
            return {}
        extras: dict[str, Any] = {"centroid_stats": centroid_distance_stats(run.loss.centroids)}
        if "tracker" in run.state:
            extras["lemma"] = run.state["tracker"].rows
        model, cfg = run.model, run.config
        best_path = run.run_dir / "best.pt" if run.run_dir is not None else None
        final_state = {k: v.clone() for k, v in model.state_dict().items()}
        if best_path is not None and best_path.exists():
            model.load_state_dict(load_checkpoint(best_path)["model"])
        model.eval_layer = "last"
        emb, lab = compute_embeddings(model, run.splits.test, batch_size=cfg.eval_batch_size)
        extras["last_layer"] = evaluate(
            emb, lab, ks=cfg.eval_ks, metrics=cfg.eval_metrics, seed=cfg.seed
        )
        model.eval_layer = "penultimate"
        model.load_state_dict(final_state)
        return extras
