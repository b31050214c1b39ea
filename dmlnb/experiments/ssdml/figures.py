"""The SSDML chapter's figures: the test-embedding spectra, the convergence curves, the α
sweep, the t-SNE panels (Figure 2) and the retrieval grids (Figure 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from dmlnb.data.base import LabelledDataset, gather_images
from dmlnb.experiments.ssdml.initial import initial_embedding
from dmlnb.experiments.ssdml.network import load_splits
from dmlnb.experiments.ssdml.reported import REPORTED
from dmlnb.experiments.ssdml.settings import NAMES, Setting
from dmlnb.plots import plot_embedding_2d, plot_history, plot_spectra, retrieval_grid, tsne
from dmlnb.runs import Run

__all__ = [
    "retrieval_figure",
    "spectra_figure",
    "convergence_figure",
    "alpha_figure",
    "tsne_figure",
    "first_seed_splits",
    "Runs",
]

Runs = Mapping[str, Mapping[str, Sequence[Run]]]


def retrieval_figure(extras: Mapping[str, Any], test: LabelledDataset, title: str):
    """Figure 3 for one run: its fixed test ``queries`` ``(Q,)`` and their five nearest
    ``neighbours`` ``(Q, 5)`` (the record's extras) as a :func:`~dmlnb.plots.retrieval_grid`.

    Only the images shown are decoded (:func:`~dmlnb.data.base.gather_images`), so file-backed
    test sets (CUB-200-2011, Cars196) work as well as in-memory ones.
    """
    queries = torch.as_tensor(extras["queries"], dtype=torch.long)  # (Q,)
    neighbours = torch.as_tensor(extras["neighbours"], dtype=torch.long)  # (Q, K)
    rows, inverse = torch.unique(
        torch.cat([queries, neighbours.flatten()]), return_inverse=True
    )  # (R,), (Q + Q K,)
    images, labels = gather_images(test, rows), test.labels.cpu()[rows]  # (R, C, H, W), (R,)
    q, nb = inverse[: len(queries)], inverse[len(queries) :].view_as(neighbours)  # (Q,), (Q, K)
    return retrieval_grid(images[q], labels[q], images, labels, nb, title=title)


def spectra_figure(runs: Runs, settings: Mapping[str, Setting]) -> plt.Figure:
    """The test embedding's normalised singular values of ours, ours without orthogonality, the
    triplet baseline and LRML (first seed), one panel per setting."""
    fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 3.6), squeeze=False)
    for ax, key in zip(axes[0], settings):
        spectra = {
            NAMES[m]: runs[key][m][0].extras["spectrum"]["singular_values"]
            for m in ("ours", "ours-noorth", "triplet", "lrml")
            if m in runs[key]
        }
        name, seed = settings[key].name, settings[key].seeds[0]
        plot_spectra(spectra, ax=ax, title=f"Test-embedding spectrum: {name}, seed {seed}")
    fig.tight_layout()
    return fig


def convergence_figure(runs: Runs, settings: Mapping[str, Setting]) -> plt.Figure:
    """Figure 2 (left) reproduced: ours' loss per epoch and test Recall@1 (first seed)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    conv = {f"{settings[k].name}": runs[k]["ours"][0].record for k in settings}
    plot_history(
        conv,
        metric="loss",
        ax=axes[0],
        title="Figure 2 (left) reproduced: loss of Eq. (3) per epoch",
    )
    plot_history(conv, metric="R@1", ax=axes[1], title="Test Recall@1 during training")
    fig.tight_layout()
    return fig


def alpha_figure(summary: pd.DataFrame, angles: Sequence[float], title: str) -> plt.Figure:
    """Figure 2 (middle): the reproduced sweep (mean ± std per angle, ``summary`` of
    :func:`~dmlnb.experiments.ssdml.tables.alpha_table`) beside the reported one (Cars-196),
    in separate panels (their levels are not comparable)."""
    fig, (ax, ax_rep) = plt.subplots(1, 2, figsize=(10, 3.5))
    reported = REPORTED["alpha"]
    for m in ("NMI", "R@1"):
        ax.errorbar(sorted(angles), 100 * summary[(m, "mean")],
                    yerr=100 * summary[(m, "std")].fillna(0), marker="o", capsize=3,
                    label=f"{m} (mean ± std over seeds)")  # fmt: skip
        ax_rep.plot(reported.index, reported[m], ls="--", marker="s", label=m)
    for a, t in ((ax, f"Reproduced: {title}"), (ax_rep, "Reported: Cars-196 (the paper)")):
        a.set_xlabel("α (degrees)")
        a.set_ylabel("%")
        a.set_title(t)
        a.legend(fontsize="small")
    fig.tight_layout()
    return fig


def first_seed_splits(
    st: Setting,
    profile: str,
    seeds: Sequence[int] | None,
    overrides: Mapping[str, Any] | None,
    data_root: str | Path | None,
) -> tuple[int, Any]:
    """The first seed shown (``seeds[0]`` or the setting's) and its labelled draw."""
    seed = st.seeds[0] if seeds is None else seeds[0]
    return seed, load_splits(st, st.train_config(profile, seed, overrides), seed, data_root)


def tsne_figure(
    runs: Runs,
    settings: Mapping[str, Setting],
    profile: str,
    seeds: Sequence[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
    data_root: str | Path | None = None,
    say: Any = print,
) -> plt.Figure:
    """Figure 2 (right): per setting, t-SNE of the untrained network's test embedding (rebuilt
    from its seed), and of ours without and with orthogonality (the runs' stored coordinates)."""
    fig, axes = plt.subplots(
        len(settings), 3, figsize=(10, 3.2 * len(settings)), squeeze=False, dpi=60
    )
    for row, key in zip(axes, settings):
        st = settings[key]
        seed, splits = first_seed_splits(st, profile, seeds, overrides, data_root)
        labels = splits.test.labels
        init = tsne(initial_embedding(st, profile, seed, splits, overrides), seed=0)
        panels = [
            ("at initialisation", init),
            ("ours w/o orthogonality", np.asarray(runs[key]["ours-noorth"][0].extras["tsne"])),
            ("ours (orthogonal L)", np.asarray(runs[key]["ours"][0].extras["tsne"])),
        ]
        n = len(torch.unique(labels))
        say(f"{st.name}: {n} test classes, {min(n, 10 if n <= 10 else 20)} colours")
        for col, (ax, (title, xy)) in enumerate(zip(row, panels)):
            legend = 10 if col == 0 and n <= 10 else 0
            plot_embedding_2d(xy, labels, ax=ax, title=f"{st.name}:\n{title}",
                              max_legend=legend, size=1.5, alpha=1.0)  # fmt: skip
    fig.tight_layout()
    return fig
