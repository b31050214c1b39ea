"""Experiment glue of the protocol chapter (``notebooks/00_protocol.ipynb``): the normalised-softmax
baseline runs, and what the chapter draws from the trained network.

* :func:`chapter_config`: the chapter's configuration at a profile, selecting its best epochs on
  the test classes (the papers' protocol) or on validation classes (``validation=``,
  :mod:`dmlnb.experiments.settings`);
* :func:`softmax_groups`: the normalised-softmax runs, one per seed, declared for the chapter
  layer (:func:`dmlnb.chapter.train_runs` reloads or trains them), trained as
  :class:`SoftmaxBaseline` says;
* :func:`pixel_vectors` and :func:`floors`: the two rows that need no training, raw pixels and
  the untrained network, evaluated on the test classes (the SSDML chapter reads its Omniglot
  numbers against the same two rows);
* :data:`VIEW_SETTINGS`, :func:`view_indices`, :func:`embedding_views`: the t-SNE map of the trained
  network's test embedding and the nearest neighbours of a few test queries, computed once from
  the run's weights and stored next to its record (``analysis.json``,
  :mod:`dmlnb.run_analysis`), so the chapter re-renders without weights;
* :func:`book_optimism`: the optimism of test-set selection over every run of the book (every
  chapter's records under ``results/``), per chapter and method;
* :func:`chapter_claims`: the chapter's claims, declared for :func:`dmlnb.chapter.evaluate`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from dmlnb.chapter import (
    AboveThreshold,
    ClaimSpec,
    Components,
    Custom,
    Procedure,
    RunContext,
    RunGroup,
    RunSet,
    Side,
    train_runs,
)
from dmlnb.checkpoints import load_checkpoint
from dmlnb.data import gather_images
from dmlnb.evaluation import compute_embeddings, evaluate, knn
from dmlnb.experiments.settings import validation_holdout, with_validation
from dmlnb.methods import MethodCall, call
from dmlnb.models import build_model, configured_model, in_training_format
from dmlnb.profiles import TrainConfig, make_config
from dmlnb.records import RunRecord
from dmlnb.reporting import Verdict
from dmlnb.run_analysis import missing_reason, rounded, save_analysis, stored_analysis
from dmlnb.runs import EVALUATION_THREADS, Run, Table, stored_tables
from dmlnb.selection import OPTIMISM_COLUMNS, optimism_summary, selection_optimism
from dmlnb.training import check_training_allowed

__all__ = [
    "chapter_config",
    "SoftmaxBaseline",
    "GROUP",
    "LABEL",
    "softmax_groups",
    "pixel_vectors",
    "untrained_name",
    "floors",
    "holdout_sentence",
    "VIEW_SETTINGS",
    "view_indices",
    "embedding_views",
    "BOOK_OPTIMISM_COLUMNS",
    "book_optimism",
    "chapter_claims",
]

#: The raw-pixel row resizes images to at most this side (a 224-px paper dataset would otherwise
#: give 150k-d vectors).
MAX_PIXEL_SIZE = 32

#: How :func:`embedding_views` draws the trained network: its weights at the end of training
#: (``checkpoint.pt``), ``points`` random test images (drawn with ``point_seed``) mapped by
#: t-SNE (``tsne_seed``, ``perplexity``) with coordinates to ``decimals`` (a map spans about 100
#: units over at most 450 pixels), and ``queries`` random test images (``query_seed``) with their
#: ``k`` nearest other test images.
VIEW_SETTINGS: dict[str, Any] = {
    "weights": "checkpoint.pt",
    "points": 1500,
    "point_seed": 0,
    "tsne_seed": 0,
    "perplexity": 30.0,
    "decimals": 3,
    "queries": 6,
    "query_seed": 1,
    "k": 5,
}


def chapter_config(
    profile: str,
    overrides: Mapping[str, Any] | None = None,
    validation: bool | float | int | None = None,
) -> TrainConfig:
    """The chapter's configuration: the profile's (:data:`dmlnb.profiles.PROFILES`) with a reader's
    ``overrides``; ``validation`` (:func:`~dmlnb.experiments.settings.validation_holdout`) holds
    out training classes and selects each run's best epoch on them (``None``: on the test
    classes, the papers' protocol)."""
    return with_validation(make_config(profile, overrides), validation_holdout(profile, validation))


@dataclass(frozen=True)
class SoftmaxBaseline(Procedure):
    """How the chapter's normalised-softmax runs train: the loss alone on the configured network
    (its class weights drawn after seeding with the run's seed), evaluated before the first step
    too. The specification keeps, beside the method's call, the entries the committed records
    were made with: the loss's class, its temperature (the call's) and how its weights are
    seeded."""

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        return {
            "loss": "NormalizedSoftmaxLoss",
            "temperature": float(call.args["temperature"]),
            "loss_seed": "config.seed",
        }

    def components(self, run: RunContext) -> Components:
        return Components(run.loss, options={"eval_at_start": True})


#: The group of the chapter's trained baseline (:func:`softmax_groups`) and its method's label.
GROUP, LABEL = "softmax", "softmax"


def softmax_groups(seeds: Sequence[int], temperature: float) -> dict[str, RunGroup]:
    """The chapter's runs: the normalised-softmax loss at ``temperature``, one run per seed of
    ``seeds``, each in ``<results_dir>/softmax-seed<seed>``."""
    method = call("normalized-softmax", temperature=float(temperature))
    return {GROUP: RunGroup({LABEL: method}, seeds=tuple(seeds), procedure=SoftmaxBaseline())}


def holdout_sentence(classes: Mapping[str, int]) -> str:
    """The chapter's sentence on its validation classes, from the class counts of its splits
    (``{"train": n, "validation": v, "test": t}``; no ``"validation"``: none held out)."""
    held = int(classes.get("validation", 0))
    if not held:
        return (
            "No validation classes are held out: each run's best epoch is chosen on the test "
            "classes (the papers' protocol)."
        )
    total = held + int(classes["train"])
    return (
        f"{held} of the {total} training classes (drawn with a fixed seed: "
        "`dmlnb.data.hold_out_classes`) are held out as **validation classes**: no run trains on "
        "them, and they choose each run's best epoch."
    )


def pixel_vectors(splits: Any) -> Tensor:
    """The test images as flat vectors ``(N, C s s)``, ``s = min(side, MAX_PIXEL_SIZE)``."""
    size = min(splits.input_shape[-1], MAX_PIXEL_SIZE)
    return gather_images(splits.test, size=size).flatten(1)


def untrained_name(config: TrainConfig) -> str:
    """The row name of the untrained network of ``config``."""
    return "untrained network" + (" (ImageNet weights, random head)" if config.pretrained else "")


def floors(
    config: TrainConfig, splits: Any, *, folder: str | Path | None = None, retrain: bool = False
) -> dict[str, dict[str, float]]:
    """The two rows that need no training, on the test classes of ``splits`` with every metric
    (``config.eval_ks``, k-means seeded with ``config.seed``, cosine similarity): ``"raw pixels"``
    (:func:`pixel_vectors`) and the untrained network (:func:`untrained_name`): the profile's
    model built after ``torch.manual_seed(config.seed)``, L2-normalised output, in the training
    loop's memory format. ``{row name: {metric: value}}``.

    Evaluated with :data:`~dmlnb.runs.EVALUATION_THREADS` threads, as the runs' evaluations are,
    whatever the process has, and with ``folder`` stored there and reloaded while ``config`` and
    the test split's size are those it was made with (:func:`dmlnb.runs.stored_tables`): a render
    quotes the stored numbers."""

    def make() -> pd.DataFrame:
        labels = splits.test.labels.cpu()
        raw = evaluate(pixel_vectors(splits), labels, ks=config.eval_ks, seed=config.seed)
        torch.manual_seed(config.seed)
        untrained = in_training_format(
            build_model(
                config.model,
                splits.input_shape,
                config.embedding_dim,
                normalize=True,
                pretrained=config.pretrained,
                width=config.width,
            ),
            config,
        )
        emb, _ = compute_embeddings(untrained, splits.test, batch_size=config.eval_batch_size)
        rows = {
            "raw pixels": raw,
            untrained_name(config): evaluate(emb, labels, ks=config.eval_ks, seed=config.seed),
        }
        return pd.DataFrame([{"row": name, **metrics} for name, metrics in rows.items()])

    settings = {
        "config": config.to_dict(),
        "test images": len(splits.test),
        "max pixel size": MAX_PIXEL_SIZE,
    }
    table = stored_tables(
        {"floors": Table(folder, make, settings, threads=EVALUATION_THREADS)}, retrain=retrain
    )["floors"]
    return {row.pop("row"): row for row in table.to_dict("records")}


def view_indices(n_test: int, settings: Mapping[str, Any] = VIEW_SETTINGS) -> tuple[Tensor, Tensor]:
    """Test-set indices of the t-SNE map ``(min(n_test, points),)`` and of the retrieval queries
    ``(min(n_test, queries),)``, each a seeded random draw without repetition."""
    points = torch.randperm(
        n_test, generator=torch.Generator().manual_seed(int(settings["point_seed"]))
    )
    queries = torch.randperm(
        n_test, generator=torch.Generator().manual_seed(int(settings["query_seed"]))
    )
    return points[: int(settings["points"])], queries[: int(settings["queries"])]


def _final_model(run: Run, config: TrainConfig, splits: Any, why: str) -> tuple[nn.Module, Run]:
    """The network at the end of training (``checkpoint.pt`` beside the run's record) and the
    run; when those weights are gone the run is trained again (the returned run is the new one,
    marked trained), or, with training disabled, :class:`~dmlnb.env.TrainingDisabledError` says
    ``why`` they are needed."""
    folder = _folder(run)
    path = folder / "checkpoint.pt"
    if path.exists():
        model = configured_model(config, splits.input_shape)
        model.load_state_dict(load_checkpoint(path)["model"])
        return model.eval(), run
    check_training_allowed(folder, f"{run.name!r} ({why}, and its weights {path} are gone)")
    spec = run.record.data["spec"]
    groups = softmax_groups([config.seed], spec["factory"]["args"]["temperature"])
    again = train_runs(groups, config, folder.parent, splits=splits, retrain=True)
    return _final_model(again.run(GROUP, LABEL, config.seed), config, splits, why)


def _folder(run: Run) -> Path:
    if run.record.path is None:
        raise ValueError(f"run {run.name!r} was trained in memory: it has no folder to read")
    return Path(run.record.path).parent


def embedding_views(
    run: Run, config: TrainConfig, splits: Any, settings: Mapping[str, Any] = VIEW_SETTINGS
) -> tuple[dict[str, np.ndarray], Run]:
    """What the chapter draws from the trained network of ``run`` (trained on ``config``), read
    from the run's ``analysis.json`` when stored with ``settings`` from this training, else
    computed from its weights (see :func:`_final_model`) and stored; and the run (another one
    when it had to be trained again: read the tables from it):

    * ``tsne`` ``(P, 2)``: t-SNE of the test embedding of the :func:`view_indices` points;
    * ``neighbours`` ``(Q, k)``: each query's ``k`` nearest other test images (indices into the
      test set, nearest first; cosine similarity).
    """
    from dmlnb.plots import tsne

    name, folder = "embedding_views", _folder(run)
    values = stored_analysis(folder, name, settings, run.record)
    if values is None:
        why = f"its analysis {name!r} is needed: " + missing_reason(
            folder, name, settings, run.record
        )
        model, run = _final_model(run, config, splits, why)
        emb, _ = compute_embeddings(model, splits.test, batch_size=config.eval_batch_size)  # (N, D)
        points, queries = view_indices(len(splits.test), settings)
        _, neighbours = knn(emb, None, k=int(settings["k"]))  # (N_test, k), self excluded
        xy = tsne(
            emb[points], seed=int(settings["tsne_seed"]), perplexity=float(settings["perplexity"])
        )
        values = save_analysis(
            folder,
            name,
            settings,
            run.record,
            {
                "tsne": rounded(xy, int(settings["decimals"])),
                "neighbours": neighbours[queries].tolist(),
            },
        )
    return {k: np.asarray(v) for k, v in values.items()}, run


#: The columns of :func:`book_optimism`'s per-run frame.
BOOK_OPTIMISM_COLUMNS = ["chapter", "method", "records", "validation split", *OPTIMISM_COLUMNS]


def book_optimism(
    results_dir: str | Path, profile: str = "default"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The optimism of test-set selection over every run of the book: every ``record.json`` under
    ``results_dir/<chapter>/<profile>/`` of a finished run
    (:func:`dmlnb.selection.selection_optimism`: the test metric at the test-selected epoch minus at
    the validation-selected one, >= 0, on each run's own selection metric).

    Args:
        results_dir: the book's results folder (one folder per chapter, e.g. ``results/``).
        profile: the profile whose runs are read.

    Returns:
        ``(runs, summary)``. ``runs``: one row per run, :data:`BOOK_OPTIMISM_COLUMNS`:
        ``chapter`` (its folder), ``method`` (the run's folder without its ``-seed<k>``),
        ``records`` (how many of the chapter's records are this run: the same configuration and
        method, :func:`~dmlnb.records.run_fingerprint`, stored under two names, e.g. a search's
        chosen value at seed 0 and the method's own seed-0 run; such a run is one row, under the
        name whose method has the most folders, and counts once), ``validation split``
        (``False``: a run of the papers' protocol alone, e.g. a setting whose train and test share
        classes; its optimism columns are empty) and the optimism.
        ``summary``: :func:`dmlnb.selection.optimism_summary` of the runs with a validation split
        per (chapter, method), in points: runs, mean, the 90% interval and the rule's verdict on
        "test-set selection is optimistic".
    """
    root = Path(results_dir)
    same: dict[
        tuple[str, str], list[tuple[str, RunRecord]]
    ] = {}  # (chapter, fingerprint) -> (method, record)
    for path in sorted(root.glob(f"*/{profile}/**/record.json")):
        record = RunRecord.load(path)
        if record.data["status"] == "finished":
            chapter = path.relative_to(root).parts[0]
            key = (
                chapter,
                record.data.get("fingerprint") or str(path),
            )  # a record without one: its own run
            same.setdefault(key, []).append((re.sub(r"-seed\d+", "", path.parent.name), record))
    folders = Counter(
        (chapter, method) for (chapter, _), named in same.items() for method, _ in named
    )
    rows = []
    for (chapter, _), named in same.items():
        method, record = max(
            named, key=lambda m: folders[chapter, m[0]]
        )  # under the method with most folders
        frame = selection_optimism([record], metric=record.config.get("select_metric", "R@1"))
        row = frame.iloc[0].to_dict() if len(frame) else {"run": record.data["name"]}
        rows.append(
            {
                "chapter": chapter,
                "method": method,
                "records": len(named),
                "validation split": bool(len(frame)),
                **row,
            }
        )
    runs = pd.DataFrame(rows, columns=BOOK_OPTIMISM_COLUMNS)
    validated = runs[runs["validation split"]].astype({"optimism": float})
    return runs, optimism_summary(validated, by=["chapter", "method"], scale=100.0, unit=" pts")


def chapter_claims(
    floor_rows: Mapping[str, Mapping[str, float]], optimism: pd.DataFrame
) -> list[ClaimSpec]:
    """The chapter's claims, its own (the protocol reproduces no paper's table): the trained
    baseline clears each floor (:func:`floors`) on the test classes' Recall@1, and choosing each
    run's best epoch on the test classes overstates its test Recall@1, over the book's runs
    with a validation split (``optimism``: :func:`book_optimism`'s per-run frame)."""
    side = Side(GROUP, LABEL)
    claims = [
        ClaimSpec(
            f"softmax-beats-{re.sub(r'[^a-z]+', '-', row.lower()).strip('-')}",
            f"Above the {row} floor: the trained normalised-softmax network's Recall@1 on the "
            "test classes",
            AboveThreshold(side, float(metrics["R@1"])),
            origin="ours",
        )
        for row, metrics in floor_rows.items()
    ]
    validated = optimism[optimism["validation split"]].astype({"optimism": float})

    def test_selection_is_optimistic(runs: RunSet) -> Verdict:
        """Mean optimism of the book's runs with a validation split, against 0."""
        return optimism_summary(validated, scale=100.0, unit=" pts")["verdict"].iloc[0]

    claims.append(
        ClaimSpec(
            "test-selection-optimistic",
            "Test-set selection is optimistic: choosing each run's best epoch on the test classes "
            "overstates its test Recall@1 (the book's runs with a validation split)",
            Custom(test_selection_is_optimistic),
            origin="ours",
        )
    )
    return claims
