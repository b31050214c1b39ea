"""Tiny fabricated dataset trees for the `paper` paths (import as ``from fabricated import ...``)."""

from pathlib import Path

import torch
from PIL import Image


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
