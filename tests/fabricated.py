"""Fabricated inputs shared by the tests (import as ``from fabricated import ...``): tiny dataset
trees for the `paper` paths, a tiny semi-supervised set, a hook that simulates a killed process,
a model's parameters as one vector, a notebook with a parameters cell, a run record evaluated on
test and validation classes, and fake runs of the run layer (a record written at once; also imported
by the subprocesses of ``tests/test_shards.py``)."""

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from PIL import Image
from torch import nn

from dmlnb.data.base import InMemoryDataset
from dmlnb.hooks import Hook
from dmlnb.records import RunRecord, utc_now
from dmlnb.runs import Run, train_or_reload


class CrashAt(Hook):
    """Simulates a killed process at global step ``at_step`` (once; ``-1``: never)."""

    def __init__(self, at_step: int) -> None:
        self.at_step, self.fired = at_step, False

    def on_step_start(self, state) -> None:
        if state.step == self.at_step and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


def flat_params(model: nn.Module) -> torch.Tensor:
    """Every floating-point entry of ``model.state_dict()`` as one CPU vector."""
    return torch.cat(
        [p.detach().flatten().cpu() for p in model.state_dict().values() if p.is_floating_point()]
    )


def ssdml_data(seed: int = 0) -> tuple[InMemoryDataset, InMemoryDataset, InMemoryDataset]:
    """``(labelled (9 images), unlabelled (51, labels -1), test (30))`` of 3
    classes of 1x4x4 images."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(3).repeat_interleave(20)  # 3 classes x 20
    x = torch.randn(60, 1, 4, 4, generator=g) + y[:, None, None, None].float()
    lab = torch.tensor([0, 1, 2, 20, 21, 22, 40, 41, 42])
    unl = torch.tensor(sorted(set(range(60)) - set(lab.tolist())))
    test = InMemoryDataset(
        torch.randn(30, 1, 4, 4, generator=g)
        + torch.arange(3).repeat(10)[:, None, None, None].float(),
        torch.arange(3).repeat(10),
    )
    return (
        InMemoryDataset(x[lab], y[lab]),
        InMemoryDataset(x[unl], torch.full((len(unl),), -1)),
        test,
    )


def fabricated_cub(root: Path, classes: list[int]) -> None:
    """A CUB-200-2011 tree under ``root``: one random 30 x 34 RGB JPEG per entry of ``classes``
    (class ids 1..100 train, 101..200 test), with ``images.txt`` and ``image_class_labels.txt``."""
    folder = root / "CUB_200_2011"
    lines, labels = [], []
    g = torch.Generator().manual_seed(0)
    for image_id, c in enumerate(classes, start=1):
        rel = f"{c:03d}.Bird_{c}/img_{image_id}.jpg"
        (folder / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
        pixels = (torch.rand(30, 34, 3, generator=g) * 255).to(torch.uint8).numpy()
        Image.fromarray(pixels).save(folder / "images" / rel)
        lines.append(f"{image_id} {rel}")
        labels.append(f"{image_id} {c}")
    (folder / "images.txt").write_text("\n".join(lines) + "\n")
    (folder / "image_class_labels.txt").write_text("\n".join(labels) + "\n")


def fabricated_hotels50k(
    root: Path,
    train: Sequence[tuple[int, int]],
    test: Sequence[tuple[int, int]],
    colour: Callable[[int, int], tuple[int, int, int]] = lambda hotel, k: (
        hotel * 37 % 256,
        k * 40 % 256,
        90,
    ),
    size: tuple[int, int] = (20, 16),
) -> dict[str, tuple[int, int]]:
    """A Hotels-50K tree under ``root``: one solid-colour ``colour(hotel, k)`` JPEG per (chain id,
    hotel id) of ``train`` (``images/train/<chain>/<hotel>/travel_website/<k>.jpg``) and of ``test``
    (``images/test/unoccluded/<chain>/<hotel>/traffickcam/<k>.jpg``), ``k`` numbering all images;
    also one occluded copy of the first test image and its mask, which the loader must not read.
    Returns ``{file name: (hotel, k)}``."""
    folder = root / "Hotels-50K" / "images"
    items = {}
    parts = [("train", "travel_website", train), ("test/unoccluded", "traffickcam", test)]
    for k, (part, source, chain, hotel) in enumerate(
        (p, s, c, h) for p, s, rows in parts for c, h in rows
    ):
        path = folder / part / str(chain) / str(hotel) / source / f"{k}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, colour(hotel, k)).save(path, quality=100)
        items[path.name] = (hotel, k)
    chain, hotel = test[0]
    occluded = folder / "test" / "high_occlusions" / str(chain) / str(hotel) / "traffickcam"
    (occluded / "masks").mkdir(parents=True)
    Image.new("RGB", size, (0, 0, 0)).save(occluded / "occluded.jpg")
    Image.new("L", size, 255).save(occluded / "masks" / "occluded.png")
    return items


def parameters_notebook(path: Path, parameters: str, *cells: str) -> Path:
    """Write a Python 3 notebook to ``path``: a code cell tagged ``parameters`` holding
    ``parameters``, then one code cell per ``cells``; returns ``path``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(body) for body in cells)]
    nbformat.write(nb, path)
    return path


def epoch_row(epoch: int, test: float | None, val: float | None, seconds: float = 1.0) -> dict:
    """A history row with test ``R@1 = test`` (no evaluation if ``None``) and, unless ``val`` is
    ``None``, validation ``R@1 = val``."""
    row = {
        "epoch": epoch,
        "loss": 1.0,
        "train_seconds": seconds,
        "metrics": None if test is None else {"R@1": test, "NMI": 0.1 * epoch, "eval_seconds": 0.5},
    }
    if val is not None:
        row["val_metrics"] = {"R@1": val, "NMI": 0.2, "eval_seconds": 0.25}
    return row


def selected_record(
    test: list[float], val: list[float] | None, select_on: str = "test", name: str = "x"
) -> tuple[RunRecord, list[bool]]:
    """A finished record of epochs ``1..len(test)`` with those test (and validation) R@1, plus an
    evaluation before training, selected on ``select_on``; also which epochs improved ``best``."""
    record = RunRecord.new(
        name, config={"select_on": select_on}, components={}, environment={"device": "cpu"}
    )
    record.add_epoch(
        epoch_row(0, 0.95, None if val is None else 0.99, seconds=0.0), "R@1", select_on
    )
    vals = val if val is not None else [None] * len(test)
    improved = [
        record.add_epoch(epoch_row(e, t, v), "R@1", select_on)
        for e, (t, v) in enumerate(zip(test, vals), 1)
    ]
    record.finish("2024-01-01T00:00:00+00:00")
    return record, improved


def fake_run_parts(k: int):
    """Fake run ``k``: ``(config {"seed": k}, spec, train)``, ``train(resume)`` making its finished
    one-epoch record at once (no model)."""
    config, spec = {"seed": k}, {"method": "fake"}

    def train(resume: bool):
        record = RunRecord.new(f"r{k}", config, {}, {"device": "cpu"}, spec=spec)
        record.add_epoch(
            {"epoch": 1, "loss": 1.0 / (k + 1), "train_seconds": 0.01, "metrics": {"R@1": 0.5}},
            "R@1",
        )
        record.finish(utc_now())
        return record, None

    return config, spec, train


def fake_run(root: Path, k: int, retrain: bool = False, extras: dict | None = None) -> Run:
    """Fake run ``k`` in ``root / f"r{k}"`` through :func:`dmlnb.runs.train_or_reload`; its
    extras: the ``DMLNB_SHARD`` of the process that trained it, and ``extras``."""
    config, spec, train = fake_run_parts(k)
    stored = {"shard": os.environ.get("DMLNB_SHARD"), **(extras or {})}
    return train_or_reload(
        f"r{k}",
        Path(root) / f"r{k}",
        config,
        spec,
        train,
        finish=lambda r, m: stored,
        retrain=retrain,
    )
