"""Lemma 1 traced on every update of Algorithm 2 as the paper lists it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from dmlnb.experiments.facility_location.spec import (
    PAM_TOLERANCE,
)
from dmlnb.losses.facility_location import (
    augmented_objective,
    cluster_assignment,
    loss_augmented_inference,
    nmi_from_assignment,
)
from dmlnb.reporting import (
    Verdict,
    holds_for_every,
    qualify,
)

#: Lemma 1's counterexample: 14 points in the plane, 5 classes, margin multiplier
#: :data:`LEMMA1_GAMMA`, found by a search over small 2-D point clouds (the loss's tests,
#: ``tests/test_losses_facility_location.py``): from the greedy set, the third update of the first
#: pass of Algorithm 2 as listed lowers ``A``.
LEMMA1_POINTS: tuple[tuple[float, float], ...] = (
    (-0.16, 0.0),
    (1.55, -0.92),
    (-0.19, 2.04),
    (1.93, -1.54),
    (0.41, 2.09),
    (2.36, 0.67),
    (0.05, 2.71),
    (-1.02, -1.07),
    (0.05, 1.48),
    (1.92, 3.43),
    (0.34, 0.83),
    (0.49, -0.37),
    (0.09, -0.31),
    (0.26, -0.19),
)
LEMMA1_LABELS: tuple[int, ...] = (1, 1, 0, 3, 4, 0, 3, 2, 2, 2, 3, 0, 1, 4)
LEMMA1_GAMMA = 3.0


def listing_trace(
    dist: Tensor, labels: Tensor, gamma: float, passes: int = 5
) -> tuple[Tensor, list[float], list[int]]:
    """Algorithm 2 as the paper lists it, update by update, from the greedy set of Algorithm 1
    (:func:`~dmlnb.losses.facility_location.loss_augmented_inference` with no pass): per pass,
    ``y_PAM = g(S)`` once; per cluster ``k``, ``S[k]`` becomes the first member ``j`` of cluster
    ``k`` of ``y_PAM`` maximising ``F(X_k, {j}) + gamma (1 - NMI(g(S with S[k] = j), y))``
    (line 4). Stops after a pass that changes no medoid, as ``refinement="paper"`` does (a later
    pass would change nothing). The same algorithm as the runs' (a test checks the medoids), in a
    loop that records ``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))`` after every update.

    Returns ``(medoids (C,), trace, starts)``: ``trace[0]`` is ``A`` of the greedy set,
    ``trace[u]`` ``A`` after update ``u``, ``starts[p]`` the index in ``trace`` of the start of
    pass ``p``.
    """
    medoids, _ = loss_augmented_inference(dist, labels, gamma, pam_passes=0)
    medoids = medoids.clone()
    trace = [float(augmented_objective(dist, labels, medoids, gamma))]
    starts: list[int] = []
    for _ in range(int(passes)):
        before = medoids.clone()
        starts.append(len(trace) - 1)
        y_pam = cluster_assignment(dist, medoids)  # (B,) once per pass
        for k in range(medoids.numel()):
            members = (y_pam == k).nonzero().squeeze(1)  # (n,)
            within = dist[members][:, members].sum(dim=0, dtype=torch.float64)  # (n,) -F(X_k, {j})
            trials = medoids.repeat(members.numel(), 1)  # (n, C)
            trials[:, k] = members
            assign = torch.stack([cluster_assignment(dist, t) for t in trials])  # (n, B)
            score = gamma * (1.0 - nmi_from_assignment(assign, labels)) - within  # (n,)
            medoids[k] = members[int(score.argmax())]  # the first maximiser
            trace.append(float(augmented_objective(dist, labels, medoids, gamma)))
        if torch.equal(before, medoids):
            break
    return medoids, trace, starts


def lemma1_batches(seed: int = 0, repeats: int = 8) -> list[dict[str, Any]]:
    """The batches on which :func:`lemma1_per_update` traces Algorithm 2: the counterexample
    (:data:`LEMMA1_POINTS`) and ``3 x repeats`` seeded random batches like the runs' (64-d
    embeddings around class centres, L2-normalised, Euclidean distances, 4 images per class, ``B``
    of 16, 32 and 64, noise 0.5, 1 or 2, ``gamma`` of 1, 3 or 10). Each: ``name``, ``dist``
    ``(B, B)`` float64, ``labels`` ``(B,)``, ``gamma``, ``passes`` (5, the paper's ``T``)."""
    pts = torch.tensor(LEMMA1_POINTS, dtype=torch.float64)
    out = [
        {
            "name": "counterexample (2-D, our search)",
            "dist": torch.cdist(pts, pts),
            "labels": torch.tensor(LEMMA1_LABELS),
            "gamma": LEMMA1_GAMMA,
            "passes": 5,
        }
    ]
    gen = torch.Generator().manual_seed(seed)
    for trial in range(3 * int(repeats)):
        b = (16, 32, 64)[trial % 3]
        labels = torch.arange(b // 4).repeat_interleave(4)
        centres = torch.randn(b // 4, 64, generator=gen, dtype=torch.float64)
        noise = (0.5, 1.0, 2.0)[(trial // 3) % 3] * torch.randn(
            b, 64, generator=gen, dtype=torch.float64
        )
        x = torch.nn.functional.normalize(centres[labels] + noise, dim=1)
        out.append(
            {
                "name": f"random {trial}",
                "dist": torch.cdist(x, x),
                "labels": labels,
                "gamma": (1.0, 3.0, 10.0)[(trial // 9) % 3],
                "passes": 5,
            }
        )
    return out


def lemma1_per_update(batches: Sequence[Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """Lemma 1 ("Algorithm 2 monotonically increases A", its proof: at every update) checked on
    every update of Algorithm 2 as listed (:func:`listing_trace`) on ``batches`` (default
    :func:`lemma1_batches`). One row per batch: ``batch``, ``points``, ``classes``, ``gamma``,
    ``updates``, ``updates lowering A`` (beyond :data:`PAM_TOLERANCE`), ``largest fall of A``,
    ``passes``, ``passes ending below their start``, ``same medoids as the runs' code``
    (:func:`~dmlnb.losses.facility_location.loss_augmented_inference`, ``refinement="paper"``)
    and ``converged within T`` (a further pass changes no medoid)."""
    rows = []
    for b in lemma1_batches() if batches is None else batches:
        dist, labels, gamma, passes = b["dist"], b["labels"], float(b["gamma"]), int(b["passes"])
        medoids, trace, starts = listing_trace(dist, labels, gamma, passes)
        tol = [PAM_TOLERANCE * max(1.0, abs(a)) for a in trace]
        falls = [a - c for a, c in zip(trace, trace[1:])]
        ends = starts[1:] + [len(trace) - 1]
        code, _ = loss_augmented_inference(
            dist, labels, gamma, pam_passes=passes, refinement="paper"
        )
        more, _ = loss_augmented_inference(
            dist, labels, gamma, pam_passes=passes + 1, refinement="paper"
        )  # a pass that changes nothing is a fixed point: converged within T iff T + 1 agrees
        rows.append(
            {
                "batch": b["name"],
                "points": int(labels.numel()),
                "classes": int(labels.unique().numel()),
                "gamma": gamma,
                "updates": len(falls),
                "updates lowering A": sum(f > t for f, t in zip(falls, tol)),
                "largest fall of A": max([0.0, *falls]),
                "passes": len(starts),
                "passes ending below their start": sum(
                    trace[e] < trace[a] - tol[a] for a, e in zip(starts, ends)
                ),
                "same medoids as the runs' code": bool(torch.equal(medoids, code)),
                "converged within T": bool(torch.equal(code, more)),
            }
        )
    return pd.DataFrame(rows)


def lemma1_table(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`lemma1_per_update` by kind of batch (the counterexample; the random batches, named
    ``"random ..."``), for the chapter: ``batches``, ``points``, ``gamma`` (the values), the summed
    ``updates``, ``updates lowering A``, ``passes`` and ``passes ending below their start``, the
    ``largest fall of A`` and whether every batch ended at ``the runs' medoids`` (``"yes"`` /
    ``"no"``)."""
    kind = np.where(
        frame["batch"].str.startswith("random"), "random, L2-normalised", frame["batch"]
    )
    rows = []
    for name, f in frame.groupby(kind, sort=False):
        pts = sorted(set(f["points"]))
        rows.append(
            {
                "batches": name,
                "count": len(f),
                "points": ", ".join(map(str, pts)),
                "gamma": ", ".join(f"{g:g}" for g in sorted(set(f["gamma"]))),
                "updates": int(f["updates"].sum()),
                "updates lowering A": int(f["updates lowering A"].sum()),
                "largest fall of A": float(f["largest fall of A"].max()),
                "passes": int(f["passes"].sum()),
                "passes ending below their start": int(f["passes ending below their start"].sum()),
                "the runs' medoids": "yes" if f["same medoids as the runs' code"].all() else "no",
            }
        )
    return pd.DataFrame(rows)


def normalised(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`lemma1_per_update` on the random L2-normalised batches (the paper's
    regime: its embeddings are L2-normalised), without the unnormalised 2-D counterexample."""
    return frame[frame["batch"].str.startswith("random")] if len(frame) else frame


def lemma1_pass_verdict(frame: pd.DataFrame) -> Verdict:
    """Lemma 1 as the paper states it ("Algorithm 2 monotonically increases A", over its passes)
    by :func:`~dmlnb.reporting.holds_for_every` over every pass traced on the L2-normalised
    batches (:func:`normalised`): one pass that ends below its start refutes it."""
    f = normalised(frame)
    passes = int(f["passes"].sum()) if len(f) else 0
    below = int(f["passes ending below their start"].sum()) if len(f) else 0
    return holds_for_every([True] * (passes - below) + [False] * below, "passes")


def convergence_verdict(frame: pd.DataFrame) -> Verdict:
    """Sec. 3.4's "in practice it converges quickly (T = 5)" by
    :func:`~dmlnb.reporting.holds_for_every` over the L2-normalised batches: one batch where a
    sixth pass would still change a medoid refutes it."""
    f = normalised(frame)
    return holds_for_every(f["converged within T"].tolist() if len(f) else [], "batches")


def lemma1_verdict(frame: pd.DataFrame) -> Verdict:
    """Our measurement "every update of the listing raises A" (what the proof of Lemma 1 uses) by
    :func:`~dmlnb.reporting.holds_for_every` over every traced update of
    :func:`lemma1_per_update`: one update that lowers ``A`` refutes it; the verdict names what a
    pass does (no pass ends below its start, or how many do)."""
    ups, low = int(frame["updates"].sum()), int(frame["updates lowering A"].sum())
    verdict = holds_for_every([True] * (ups - low) + [False] * low, "updates")
    below = int(frame["passes ending below their start"].sum())
    if low:
        verdict = qualify(
            verdict,
            "an update of the listing can lower A; "
            + (
                f"{below} of {int(frame['passes'].sum())} passes end below their start"
                if below
                else "no pass ends below its start"
            ),
        )
    return verdict
