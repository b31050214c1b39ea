"""Tests of the facility-location chapter's figures: t-SNE maps drawn with thumbnails and the
per-step curves (dmlnb.plots.plot_thumbnails, plot_step_curves)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.offsetbox import AnnotationBbox

from dmlnb.plots import plot_step_curves, plot_thumbnails


def _map(n=200, seed=0):
    rng = np.random.default_rng(seed)
    xy = rng.normal(size=(n, 2)) * np.array([3.0, 1.0])
    images = torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    labels = torch.as_tensor(rng.integers(0, 5, size=n))
    return xy, images, labels


def test_thumbnails_are_drawn_at_their_points_without_overlap():
    xy, images, labels = _map()
    fig, ax = plt.subplots(figsize=(5, 5))
    plot_thumbnails(xy, images, labels, ax=ax, thumb_fraction=0.08)
    kept = ax.thumbnail_indices
    boxes = [a for a in ax.artists if isinstance(a, AnnotationBbox)]
    assert len(boxes) == len(kept) > 0
    drawn_at = np.array([b.xy for b in boxes])
    np.testing.assert_allclose(drawn_at, xy[kept])
    cell = 0.08 * np.ptp(xy, axis=0).max()
    # brute force: no two drawn thumbnails closer than one cell in both axes ...
    for a in range(len(kept)):
        for b in range(a + 1, len(kept)):
            assert np.abs(xy[kept[a]] - xy[kept[b]]).max() >= cell - 1e-12
    # ... and every skipped point is within one cell of a drawn one (the greedy rule is maximal)
    skipped = np.setdiff1d(np.arange(len(xy)), kept)
    for i in skipped:
        assert np.abs(xy[kept] - xy[i]).max(axis=1).min() < cell
    assert ax.get_title() and ax.get_xlabel() and ax.get_legend() is not None
    plt.close(fig)


def test_thumbnails_draw_everything_when_points_are_far_apart():
    xy = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    images = np.random.default_rng(0).random((4, 3, 5, 5)).astype(np.float32)
    fig, ax = plt.subplots()
    plot_thumbnails(xy, images, ax=ax, thumb_fraction=0.1)
    assert sorted(ax.thumbnail_indices.tolist()) == [0, 1, 2, 3]
    plt.close(fig)


@pytest.mark.parametrize(
    "xy, images, match",
    [
        (np.zeros((3, 3)), np.zeros((3, 1, 4, 4)), "xy must be"),
        (np.zeros((3, 2)), np.zeros((4, 1, 4, 4)), "images must be"),
        (np.zeros((3, 2)), np.zeros((3, 2, 4, 4)), "images must be"),
    ],
)
def test_thumbnails_reject_bad_shapes(xy, images, match):
    with pytest.raises(ValueError, match=match):
        plot_thumbnails(xy, images)


def test_step_curves_plot_the_mean_over_seeds():
    steps = np.arange(10)
    frame = pd.DataFrame(
        {
            "step": np.tile(steps, 2),
            "seed": np.repeat([0, 1], 10),
            "method": "clustering",
            "oracle": np.concatenate([steps * 1.0, steps * 3.0]),
        }
    )
    fig = plot_step_curves(frame, [([("oracle", "oracle score")], "score", "oracle", False)])
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    np.testing.assert_allclose(line.get_xdata(), steps)
    np.testing.assert_allclose(line.get_ydata(), steps * 2.0)  # mean of 1x and 3x
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "score" and ax.get_legend() is not None
    plt.close(fig)


def test_step_curves_skip_missing_columns_and_smooth():
    frame = pd.DataFrame(
        {"step": np.arange(5), "seed": 0, "method": "a", "v": [0.0, 0.0, 3.0, 0.0, 0.0]}
    )
    fig = plot_step_curves(frame, [([("v", "v"), ("absent", "absent")], "y", "t", False)], smooth=3)
    (line,) = fig.axes[0].get_lines()
    np.testing.assert_allclose(line.get_ydata(), [0.0, 1.0, 1.0, 1.0, 0.0])  # centred mean of 3
    plt.close(fig)


def test_step_curves_that_coincide_stay_distinguishable():
    """Two series with the same values: different line styles, the first drawn on top."""
    frame = pd.DataFrame({"step": np.arange(4), "seed": 0, "method": "c", "a": 1.0, "b": 1.0})
    fig = plot_step_curves(frame, [([("a", "a"), ("b", "b")], "y", "t", False)])
    first, second = fig.axes[0].get_lines()
    assert first.get_linestyle() != second.get_linestyle()
    assert (
        first.get_zorder() > second.get_zorder() and first.get_linewidth() > second.get_linewidth()
    )
    plt.close(fig)
