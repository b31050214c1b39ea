import matplotlib

matplotlib.use("Agg")

import numpy as np
import torch
from matplotlib.colors import to_rgba

from dmlnb.plots import plot_embedding_2d, plot_history, retrieval_grid, tsne, tsne_with_reference


def test_retrieval_grid_frames_match_labels():
    q_img, g_img = torch.rand(2, 1, 6, 6), torch.rand(5, 1, 6, 6)
    q_lab, g_lab = torch.tensor([0, 1]), torch.tensor([0, 1, 0, 1, 2])
    nb = torch.tensor([[0, 1, 2], [4, 3, 0]])
    fig = retrieval_grid(q_img, q_lab, g_img, g_lab, nb, title="t")
    axes = np.array(fig.axes).reshape(2, 4)
    green, red = to_rgba("tab:green"), to_rgba("tab:red")
    for r in range(2):
        for j in range(3):
            want = green if g_lab[nb[r, j]] == q_lab[r] else red
            assert axes[r, j + 1].spines["top"].get_edgecolor() == want
    assert fig._suptitle.get_text() == "t"


def test_tsne_places_new_points_near_their_reference_cluster():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 10)) * 10
    ref = np.concatenate([c + rng.normal(size=(40, 10)) for c in centres])
    new = np.concatenate([c + rng.normal(size=(5, 10)) for c in centres])
    ref_2d, new_2d = tsne_with_reference(ref, new, perplexity=15)
    assert ref_2d.shape == (120, 2) and new_2d.shape == (15, 2)
    ref_lab, new_lab = np.repeat(np.arange(3), 40), np.repeat(np.arange(3), 5)
    nearest = ((new_2d[:, None] - ref_2d[None]) ** 2).sum(-1).argmin(1)
    assert (ref_lab[nearest] == new_lab).mean() >= 0.9
    assert tsne(ref, perplexity=15).shape == (120, 2)


def test_scatter_and_history_have_titles_labels_and_legends():
    ax = plot_embedding_2d(np.random.rand(30, 2), np.arange(30) % 3, title="map")
    assert ax.get_title() == "map" and ax.get_xlabel() and ax.get_legend() is not None
    assert ax.get_legend().get_title().get_text() == "3 classes"
    ax = plot_embedding_2d(np.random.rand(30, 2), np.arange(30) % 12, title="many", max_legend=5)
    assert ax.get_legend().get_title().get_text() == "5 of 12 classes shown"
    assert len(ax.get_legend().get_texts()) == 5
    import pandas as pd

    frame = pd.DataFrame({"R@1": [0.1, 0.2]}, index=pd.Index([1, 2], name="epoch"))
    ax = plot_history({"run": frame}, metric="R@1")
    assert ax.get_ylabel() == "R@1" and ax.get_legend() is not None


def test_figure_png_is_at_most_the_column_wide_and_keeps_small_figures_at_their_dpi():
    import struct

    import matplotlib.pyplot as plt

    from dmlnb.plots import MAX_FIGURE_PX, figure_png

    def width(png: bytes) -> int:
        return struct.unpack(">I", png[16:20])[0]

    wide, ax = plt.subplots(figsize=(22, 4))
    ax.plot([0, 1], [0, 1], label="line")
    ax.set_title("a wide figure")
    ax.legend()
    assert 0.9 * MAX_FIGURE_PX < width(figure_png(wide, dpi=90)) <= MAX_FIGURE_PX
    small, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    assert width(figure_png(small, dpi=90)) < 4 * 90  # tight box, dpi kept
    plt.close("all")


def test_a_kernel_stores_wide_figures_at_most_the_column_wide(tmp_path):
    """In a notebook kernel, set_style's PNG formatter must survive the inline backend, which
    registers its own when it is loaded at the first figure (a figure drawn after set_style)."""
    import base64
    import struct

    import nbformat
    from nbclient import NotebookClient

    from dmlnb.plots import MAX_FIGURE_PX

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from dmlnb.plots import set_style\nset_style()"),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(14, 3))\n"
            "ax.plot([0, 1], [0, 1])\nax.set_title('wide')\nplt.show()"
        ),
    ]
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    pngs = [o["data"]["image/png"] for o in nb.cells[1].outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    width = struct.unpack(">I", base64.b64decode(pngs[0])[16:20])[0]
    assert 0.9 * MAX_FIGURE_PX < width <= MAX_FIGURE_PX
