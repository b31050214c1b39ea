"""What the registered methods (:mod:`dmlnb.methods`) compute in a few training steps on a
fabricated batch, and the stored values a code change must not move without a version bump.

    python tests/method_values.py            # compare with tests/data/method_values.json
    python tests/method_values.py --update   # store the values of every call below

The calls checked are every registered method at its defaults (with :data:`EXAMPLE_ARGS`) and
every method call a committed run record trained (its ``"factory"`` spec under ``results/``),
so the settings the chapters train are covered, not only the defaults. Each call's values are
its loss on a fabricated batch and the norms of its gradients (:func:`method_values`).
``test_methods.py`` compares them with the stored ones; when they moved, the method's code
changed what it computes, so its version must be bumped (which changes the fingerprint of every
run that uses it) and the values stored again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dmlnb.losses.discriminative import onehot_centroids
from dmlnb.methods import MethodCall, call, registered
from dmlnb.ssdml import PartitionObjective  # registers the SSDML objectives too

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "tests" / "data" / "method_values.json"

#: Arguments a method needs beyond its defaults (a required argument) to be trained here.
EXAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "easy-positive": {"name": "EPHN"},
    "ssdml-labelled": {"loss": "triplet"},
    "ssdml-angular": {"k": 3},
    **{name: {"k": 3} for name in ("lrml", "isdml", "apllr", "apit")},
}

CLASSES, PER_CLASS, DIM = 4, 4, 8


def key(c: MethodCall) -> str:
    """The stored entry of ``c``: its name and a hash of its spec (version and arguments)."""
    digest = hashlib.sha1(json.dumps(c.spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{c.name}-{digest}"


def checked_calls() -> dict[str, MethodCall]:
    """Every call checked (see the module docstring), by :func:`key`: the committed records'
    at the version registered now."""
    calls = [call(name, **EXAMPLE_ARGS.get(name, {})) for name in sorted(registered())]
    for path in sorted(ROOT.glob("results/*/default/*/record.json")):  # the committed ones
        spec = json.loads(path.read_text()).get("spec", {}).get("factory")
        if spec is not None:
            calls.append(call(spec["name"], **spec["args"]))
    return {key(c): c for c in calls}


def method_values(c: MethodCall) -> list[float]:
    """The loss of ``c`` on its embeddings (a seeded linear map 16 -> at least 8 dimensions, the
    metric's size for an SSDML objective, of a fabricated batch of 4 classes x 4 images), the
    norm of its gradient with respect to the embeddings and the norm of its gradient with
    respect to the method's own parameters (proxies, centres, a learned margin; 0 without):
    the forward and backward passes, each to the last digits a CPU keeps."""
    torch.manual_seed(0)
    dim = max(DIM, c.args.get("metric_dim") or 0)
    x = torch.randn(CLASSES * PER_CLASS, 16)  # (B, 16)
    labels = torch.arange(CLASSES).repeat_interleave(PER_CLASS)  # (B,)
    z = nn.Linear(16, dim)(x).detach().requires_grad_()  # (B, dim)
    loss = c.build(num_classes=CLASSES, embedding_dim=dim, centroids=onehot_centroids(CLASSES, dim))
    value = _step(loss, z, labels)
    value.backward()
    own = [p.grad.norm() ** 2 for p in loss.parameters() if p.grad is not None]
    grad_z = float(z.grad.norm()) if z.grad is not None else 0.0
    return [float(value.detach()), grad_z, float(sum(own) ** 0.5) if own else 0.0]


def _step(loss: nn.Module, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of one step: a batch loss on ``z`` ``(B, D)``; an SSDML objective (Algorithm 1)
    on the partition ``z`` with the last class unlabelled, over every unit it prepares."""
    if not isinstance(loss, PartitionObjective):
        return loss(z, labels)
    partial = torch.where(labels == CLASSES - 1, -1, labels)  # (B,), -1: unlabelled
    units = loss.prepare(z.detach(), partial)  # (U, unit_size)
    return loss.unit_loss(z[units], torch.arange(units.shape[0]))


def agrees(new: list[float], old: dict[str, Any] | None) -> bool:
    """Whether a call's ``new`` values agree with its ``old`` stored entry, within 1e-4
    relative (another CPU's kernels round otherwise in the last digits)."""
    return (
        old is not None
        and len(old["values"]) == len(new)
        and all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(new, old["values"]))
    )


def stored() -> dict[str, dict[str, Any]]:
    """The stored entries: ``{key: {"spec": spec, "values": [...]}}``."""
    return json.loads(STORED.read_text()) if STORED.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="store every call's values")
    args = parser.parse_args(argv)
    table = {k: {"spec": c.spec, "values": method_values(c)} for k, c in checked_calls().items()}
    if args.update:
        STORED.parent.mkdir(parents=True, exist_ok=True)
        STORED.write_text(json.dumps(table, indent=1) + "\n")
        print(f"stored the values of {len(table)} method calls in {STORED}")
        return 0
    old = stored()
    moved = [k for k, row in table.items() if not agrees(row["values"], old.get(k))]
    print("moved or new:", moved or "none")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
