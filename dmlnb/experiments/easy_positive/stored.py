"""What the chapter's figures draw from a trained model, stored beside its record so a finished
run is never reloaded for its weights (:mod:`dmlnb.run_analysis`).

* :func:`embedding_statistics` / :func:`summarize_statistics`: the similarity statistics of
  Figures 2, 3 and 5 (:mod:`dmlnb.analysis`) of one trained model (the summary is stored in the
  record, ``record.data["analysis"]``);
* :func:`figure_data` / :func:`tsne_data`: what Figures 2, 3, 5 and 6 draw of it, stored in
  ``analysis.json``;
* :class:`StoredAnalyses`: reads them, or computes them from the best epoch's weights (``best.pt``)
  when missing; when the weights are gone too, the run is trained again through the chapter layer
  (with training disabled, ``DMLNB_NO_TRAINING=1``, that raises naming the run and the reason).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from dmlnb.analysis import (
    nearest_reference_similarity,
    nearest_same_and_other,
    same_class_similarities,
    similarity_summary,
)
from dmlnb.chapter import RunGroup, train_runs
from dmlnb.checkpoints import load_checkpoint
from dmlnb.evaluation import compute_embeddings
from dmlnb.experiments.easy_positive.spec import Batch
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.run_analysis import missing_reason, quantiles, rounded, save_analysis, stored_analysis
from dmlnb.runs import SHARD_ENV, Run, current_shard, made_by_sibling

__all__ = [
    "embedding_statistics",
    "summarize_statistics",
    "FIGURE_SETTINGS",
    "figure_data",
    "tsne_settings",
    "tsne_data",
    "StoredAnalyses",
]


# ----------------------------------------------------------------------------------------------
# Analyses of one model (Figures 2, 3, 5, 6)
# ----------------------------------------------------------------------------------------------


def embedding_statistics(model: nn.Module, splits: Any, batch_size: int = 512) -> dict[str, Any]:
    """The similarity statistics of one trained model on ``splits`` (train and test sets).

    Returns a dict of tensors (CPU):

    * ``train_same_class`` ``(P,)``: every same-class training pair (Figure 2);
    * ``test_to_train`` ``(N_test,)``: each test image's similarity to its nearest training
      image (Figure 3);
    * ``train_same``, ``train_other`` ``(N_train,)`` and ``test_same``, ``test_other``
      ``(N_test,)``: nearest same-class / other-class similarity within each set (Figure 5);
    * ``train_embeddings``, ``train_labels``, ``test_embeddings``, ``test_labels``.
    """
    tr_x, tr_y = compute_embeddings(model, splits.train, batch_size=batch_size)
    te_x, te_y = compute_embeddings(model, splits.test, batch_size=batch_size)
    tr_nn = nearest_same_and_other(tr_x, tr_y)
    te_nn = nearest_same_and_other(te_x, te_y)
    return {
        "train_same_class": same_class_similarities(tr_x, tr_y),
        "test_to_train": nearest_reference_similarity(te_x, tr_x)[0],
        "train_same": tr_nn.same,
        "train_other": tr_nn.other,
        "test_same": te_nn.same,
        "test_other": te_nn.other,
        "train_embeddings": tr_x,
        "train_labels": tr_y,
        "test_embeddings": te_x,
        "test_labels": te_y,
    }


def summarize_statistics(stats: Mapping[str, Any]) -> dict[str, float]:
    """Numbers of :func:`embedding_statistics` (stored in the run record so that claims can be
    re-checked without the model): median / mean same-class training similarity and the
    fraction above 0.9, mean / median test-to-nearest-training similarity, the fraction of
    points whose nearest neighbour is of their class (train and test) and the mean nearest
    same-class similarity (train and test)."""
    same = similarity_summary(stats["train_same_class"], threshold=0.9)
    t2t = similarity_summary(stats["test_to_train"], threshold=0.9)
    out = {
        "train_same_class_median": same["median"],
        "train_same_class_mean": same["mean"],
        "train_same_class_frac>0.9": same["frac>0.9"],
        "test_to_train_mean": t2t["mean"],
        "test_to_train_median": t2t["median"],
    }
    for part in ("train", "test"):
        s, o = stats[f"{part}_same"], stats[f"{part}_other"]
        out[f"{part}_nn_correct"] = float((s > o).double().mean())
        out[f"{part}_nearest_same_mean"] = float(torch.nanmean(s.double()))
        out[f"{part}_nearest_other_mean"] = float(torch.nanmean(o.double()))
    return out


#: How :func:`figure_data` stores a model's Figures 2, 3 and 5: from the best epoch's weights,
#: Figure 2's sample of same-class pairs as this many quantiles, similarities to this many
#: decimals (a pixel of the figures is about 0.003).
FIGURE_SETTINGS: dict[str, Any] = {
    "weights": "best.pt",
    "train_same_class_quantiles": 1001,
    "decimals": 4,
}


def figure_data(
    stats: Mapping[str, Any], settings: Mapping[str, Any] = FIGURE_SETTINGS
) -> dict[str, list[float]]:
    """What Figures 2, 3 and 5 draw of one model (:func:`embedding_statistics`), in the form
    stored in its run folder's ``analysis.json``; every similarity rounded to
    ``settings["decimals"]``:

    * ``train_same_class_quantiles`` ``(Q,)``: ``Q = settings["train_same_class_quantiles"]``
      quantiles of the similarity of every same-class training pair (Figure 2's histogram; the
      sample has ``P = sum_c k_c (k_c - 1) / 2`` pairs over the training classes ``c`` of ``k_c``
      images each, tens of thousands per model, too many to store);
    * ``test_to_train`` ``(N_test,)``: each test image's similarity to its nearest training
      image (Figure 3's histogram);
    * ``train_same``, ``train_other`` ``(N_train,)`` and ``test_same``, ``test_other``
      ``(N_test,)``: per point, the nearest same-class and other-class similarity (Figure 5's
      scatter; ``nan`` for a point without classmates).
    """
    q, d = int(settings["train_same_class_quantiles"]), int(settings["decimals"])
    out = {"train_same_class_quantiles": quantiles(stats["train_same_class"], q, d)}
    out.update(
        {
            k: rounded(stats[k], d)
            for k in ("test_to_train", "train_same", "train_other", "test_same", "test_other")
        }
    )
    return out


def tsne_settings(classes: int) -> dict[str, Any]:
    """How :func:`tsne_data` maps a model for Figure 6: ``classes`` training and test classes
    drawn with ``class_seed``, openTSNE with ``tsne_seed`` and ``perplexity``, coordinates to
    ``decimals`` (a map spans about 100 units over at most 400 pixels)."""
    if int(classes) < 1:
        raise ValueError(
            f"tsne_classes must be >= 1 (classes drawn in each t-SNE map), got {classes}"
        )
    return {
        "weights": "best.pt",
        "classes": int(classes),
        "class_seed": 0,
        "tsne_seed": 0,
        "perplexity": 30.0,
        "decimals": 3,
    }


def tsne_data(stats: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Figure 6 of one model (:func:`embedding_statistics`), in the form stored in its run
    folder's ``analysis.json``: ``settings["classes"]`` random training classes (the first of a
    permutation drawn with ``class_seed``) mapped by t-SNE, and as many random test classes (the
    next permutation) placed into that map (:func:`dmlnb.plots.tsne_with_reference`).

    Returns ``train`` ``(N_a, 2)`` and ``test`` ``(N_b, 2)`` coordinates rounded to
    ``settings["decimals"]``, and their classes ``train_labels`` ``(N_a,)``, ``test_labels``
    ``(N_b,)``.
    """
    from dmlnb.plots import tsne_with_reference

    gen = torch.Generator().manual_seed(int(settings["class_seed"]))
    tr_y, te_y = stats["train_labels"], stats["test_labels"]
    tr_classes = torch.randperm(int(tr_y.max()) + 1, generator=gen)[: settings["classes"]]
    te_classes = torch.randperm(int(te_y.max()) + 1, generator=gen)[: settings["classes"]]
    tr_pick = torch.isin(tr_y, tr_classes).nonzero().squeeze(1)  # (N_a,)
    te_pick = torch.isin(te_y, te_classes).nonzero().squeeze(1)  # (N_b,)
    ref_2d, new_2d = tsne_with_reference(
        stats["train_embeddings"][tr_pick],
        stats["test_embeddings"][te_pick],
        seed=int(settings["tsne_seed"]),
        perplexity=float(settings["perplexity"]),
    )
    d = int(settings["decimals"])
    return {
        "train": rounded(ref_2d, d),
        "test": rounded(new_2d, d),
        "train_labels": tr_y[tr_pick].tolist(),
        "test_labels": te_y[te_pick].tolist(),
    }


class StoredAnalyses:
    """The analyses of the chapter's runs in ``folder`` (the runs of ``batches``, trained or
    reloaded by :func:`dmlnb.chapter.train_runs` there): the statistics summary stored in each
    record (:meth:`summary`), and the figures' data in ``analysis.json`` (:meth:`figures`,
    :meth:`tsne`), each read when stored from the run's training with the same settings, else
    computed from the best epoch's weights and stored. Datasets are loaded once."""

    def __init__(
        self, folder: str | Path, batches: Sequence[Batch], data_root: str | Path | None = None
    ) -> None:
        self.folder = Path(folder)
        self.batches = list(batches)
        self.data_root = data_root
        self._splits: dict[str, Any] = {}
        self._stats: dict[str, dict[str, Any]] = {}  # run name -> embedding_statistics
        self._models: dict[str, nn.Module] = {}
        self._siblings_runs: set[str] = set()  # runs another shard trained (their records replaced)

    def sibling(self, run: Run) -> bool:
        """Whether another shard trains ``run`` (it then computes what is stored of it), also once
        its record was read here (:attr:`dmlnb.runs.Run.sibling` is then ``False``)."""
        if run.sibling:
            self._siblings_runs.add(run.name)
        return run.name in self._siblings_runs

    def splits(self, config: TrainConfig) -> Any:
        """The dataset of ``config`` (loaded once per dataset and options)."""
        from dmlnb.data import load_dataset

        key = f"{config.dataset}:{sorted(config.dataset_options.items())}"
        if key not in self._splits:
            self._splits[key] = load_dataset(
                config.dataset, root=self.data_root, **config.dataset_options
            )
        return self._splits[key]

    def _declared(self, run: Run) -> tuple[Batch, str, str, int]:
        """(batch, group, label, seed) of the first declaration of ``run``."""
        for b in self.batches:
            for name, g in b.groups.items():
                for spec in g.runs():
                    if spec.name == run.name:
                        return b, name, spec.label, spec.seed
        raise KeyError(f"run {run.name!r} is not declared in this chapter's batches")

    def config(self, run: Run) -> TrainConfig:
        """The resolved configuration of ``run``."""
        b, group, label, seed = self._declared(run)
        return b.run_config(group, label, seed)

    def _load_best(self, run: Run) -> nn.Module | None:
        from dmlnb.models import configured_model

        path = self.folder / run.name / "best.pt"
        if not path.exists():
            return None
        config = self.config(run)
        model = configured_model(config, self.splits(config).input_shape)
        model.load_state_dict(load_checkpoint(path)["model"])
        return model.eval()

    def best_model(self, run: Run, why: str) -> nn.Module:
        """The best-epoch model of ``run`` from ``best.pt``. When the weights are gone the run is
        trained again (its record replaced in ``run``, its summary recomputed if the old record
        held one); with training disabled that raises
        :class:`~dmlnb.env.TrainingDisabledError` naming the run and ``why``."""
        from dmlnb.training import check_training_allowed

        if run.name in self._models:
            return self._models[run.name]
        run.record.best  # noqa: B018 -- a sibling shard's run: its weights are final once its record is
        model = self._load_best(run)
        if model is None:
            run_dir = self.folder / run.name
            check_training_allowed(
                run_dir, f"{run.name!r} ({why}, and its weights {run_dir / 'best.pt'} are gone)"
            )
            summarised = "analysis" in run.record.data
            b, group, label, seed = self._declared(run)
            g = b.groups[group]
            one = {group: RunGroup({label: g.methods[label]}, (seed,), g.changes, g.procedure)}
            fresh = train_runs(one, b.config, self.folder, retrain=True).run(group, label, seed)
            run.record, run.trained = fresh.record, True
            self._stats.pop(run.name, None)
            model = self._load_best(run) or fresh.model
            if summarised:
                self._models[run.name] = model.cpu().eval()
                self._summarise(run, why)
        self._models[run.name] = model.cpu().eval()
        return self._models[run.name]

    def _statistics(self, run: Run, why: str) -> dict[str, Any]:
        """:func:`embedding_statistics` of the best-epoch model (computed once per session)."""
        if run.name not in self._stats:
            model, config = self.best_model(run, why), self.config(run)
            self._stats[run.name] = embedding_statistics(
                model, self.splits(config), config.eval_batch_size
            )
        return self._stats[run.name]

    def _summarise(self, run: Run, why: str) -> None:
        run.record.data["analysis"] = summarize_statistics(self._statistics(run, why))
        run.record.save(self.folder / run.name / "record.json")

    def summary(self, run: Run) -> dict[str, float]:
        """:func:`summarize_statistics` of ``run``'s best-epoch model, stored in its record
        (computed and saved into ``record.json`` when missing)."""
        if "analysis" not in run.record.data:
            if self.sibling(run):
                run.record = self._siblings(run, "its statistics", lambda r: "analysis" in r.data)
            else:
                self._summarise(run, "its statistics in record.json are missing")
        return run.record.data["analysis"]

    def _siblings(self, run: Run, what: str, made: Callable[[RunRecord], bool]) -> RunRecord:
        """The record of a run another shard trains once ``made(record)`` (that shard computes what
        is stored of the run: :func:`dmlnb.runs.made_by_sibling`)."""
        path = self.folder / run.name / "record.json"
        shard = current_shard()
        if shard is None:
            raise RuntimeError(
                f"run {run.name} is trained by another shard, but this process is no shard "
                f"({SHARD_ENV} is unset): keep the shard variables the launch set"
            )

        def check() -> tuple[str, RunRecord | None]:
            record = RunRecord.load(path)
            return ("", record) if made(record) else (f"{path} does not hold {what} yet", None)

        what_of = f"{what} of {run.name} (the shard that trains it computes them)"
        return made_by_sibling(shard, what_of, path, check, False, print)

    def _stored(
        self,
        run: Run,
        name: str,
        settings: Mapping[str, Any],
        compute: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    ) -> dict[str, Any]:
        """Analysis ``name`` of ``run`` (:mod:`dmlnb.run_analysis`), read or computed and
        stored."""
        run_dir = self.folder / run.name
        values = stored_analysis(run_dir, name, settings, run.record)
        if values is None and self.sibling(run):
            self._siblings(
                run,
                f"its analysis {name!r}",
                lambda record: stored_analysis(run_dir, name, settings, record) is not None,
            )
            values = stored_analysis(run_dir, name, settings, run.record)
        if values is None:
            why = f"its analysis {name!r} is needed: " + missing_reason(
                run_dir, name, settings, run.record
            )
            values = compute(self._statistics(run, why))
            values = save_analysis(run_dir, name, settings, run.record, values)
        return values

    def figures(self, run: Run) -> dict[str, np.ndarray]:
        """:func:`figure_data` of ``run`` (stored with :data:`FIGURE_SETTINGS`), float arrays."""
        values = self._stored(run, "figures", FIGURE_SETTINGS, figure_data)
        return {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}

    def tsne(self, run: Run, classes: int) -> dict[str, np.ndarray]:
        """:func:`tsne_data` of ``run`` with ``classes`` classes per map: ``train`` ``(N_a, 2)``,
        ``test`` ``(N_b, 2)``, ``train_labels`` ``(N_a,)``, ``test_labels`` ``(N_b,)``."""
        settings = tsne_settings(classes)
        values = self._stored(run, "tsne", settings, lambda stats: tsne_data(stats, settings))
        return {k: np.asarray(v) for k, v in values.items()}
