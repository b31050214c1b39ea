"""What every registered method (:mod:`dmlnb.methods`) computes in a few training steps on a
fabricated batch, and the stored values a code change must not move without a version bump.

    python tests/method_values.py            # compare with tests/data/method_values.json
    python tests/method_values.py --update   # store the values of every registered method

``test_methods.py`` compares each method's values with the stored ones; when they moved, the
method's code changed what it computes, so its version must be bumped (which changes the
fingerprint of every run that uses it) and the values stored again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dmlnb.losses.discriminative import onehot_centroids
from dmlnb.methods import Method, call, registered
from dmlnb.ssdml import PartitionObjective  # registers the SSDML objectives too

STORED = Path(__file__).resolve().parent / "data" / "method_values.json"

#: Arguments a method needs beyond its defaults (a required argument) to be trained here.
EXAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "easy-positive": {"name": "EPHN"},
    "ssdml-labelled": {"loss": "triplet"},
    "ssdml-angular": {"k": 3},
    **{name: {"k": 3} for name in ("lrml", "isdml", "apllr", "apit")},
}

CLASSES, PER_CLASS, DIM, STEPS = 4, 4, 8, 3
LR = 1e-3  # small enough that no method diverges in three steps (the values stay comparable)


def method_values(method: Method) -> list[float]:
    """The loss of ``method`` at each of :data:`STEPS` SGD steps (lr :data:`LR`) of a seeded linear
    embedding (16 -> 8) on a fabricated batch of 4 classes x 4 images: the values move when
    the method's forward or backward pass computes something else."""
    torch.manual_seed(0)
    x = torch.randn(CLASSES * PER_CLASS, 16)  # (B, 16)
    labels = torch.arange(CLASSES).repeat_interleave(PER_CLASS)  # (B,)
    model = nn.Linear(16, DIM)
    loss = call(method.name, **EXAMPLE_ARGS.get(method.name, {})).build(
        num_classes=CLASSES, embedding_dim=DIM, centroids=onehot_centroids(CLASSES, DIM)
    )
    params = [*model.parameters(), *loss.parameters()]
    optimiser = torch.optim.SGD(params, lr=LR)
    values = []
    for _ in range(STEPS):
        optimiser.zero_grad()
        value = _step(loss, model(x), labels)
        value.backward()
        optimiser.step()
        values.append(float(value.detach()))
    return values


def _step(loss: nn.Module, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of one step: a batch loss on ``z`` ``(B, D)``; an SSDML objective (Algorithm 1)
    on the partition ``z`` with the last class unlabelled, over every unit it prepares."""
    if not isinstance(loss, PartitionObjective):
        return loss(z, labels)
    partial = torch.where(labels == CLASSES - 1, -1, labels)  # (B,), -1: unlabelled
    units = loss.prepare(z.detach(), partial)  # (U, unit_size)
    return loss.unit_loss(z[units], torch.arange(units.shape[0]))


def agrees(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether a method's ``new`` values agree with its ``old`` stored row: the same version and
    values within 1e-4 relative (another CPU's kernels round otherwise in the last digits)."""
    return (
        old is not None
        and old["version"] == new["version"]
        and len(old["values"]) == len(new["values"])
        and all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(new["values"], old["values"]))
    )


def stored() -> dict[str, dict[str, Any]]:
    """The stored values: ``{name: {"version": v, "values": [...]}}``."""
    return json.loads(STORED.read_text()) if STORED.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="store every method's values")
    args = parser.parse_args(argv)
    table = {
        name: {"version": m.version, "values": method_values(m)}
        for name, m in sorted(registered().items())
    }
    if args.update:
        STORED.parent.mkdir(parents=True, exist_ok=True)
        STORED.write_text(json.dumps(table, indent=1) + "\n")
        print(f"stored {len(table)} methods' values in {STORED}")
        return 0
    old = stored()
    moved = [n for n, row in table.items() if not agrees(row, old.get(n))]
    print("moved or new:", moved or "none")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
