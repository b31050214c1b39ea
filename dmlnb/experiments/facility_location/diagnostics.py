"""What the runs logged inside the loss, as tables; the NMI cost of one misplaced point; the
in-cell timing of Algorithm 1; what Algorithm 2 adds per table and form."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from dmlnb.evaluation import nmi_clustering
from dmlnb.experiments.facility_location.runs import (
    KeptRun,
)
from dmlnb.experiments.facility_location.spec import (
    PAM_TOLERANCE,
)
from dmlnb.losses.facility_location import (
    loss_augmented_inference,
)
from dmlnb.records import read_json
from dmlnb.runs import MEASUREMENT, stored_measurement


def inside_loss_frame(runs: Sequence[KeptRun]) -> pd.DataFrame:
    """The :class:`~dmlnb.losses.facility_location.InsideLossHook` logs of ``runs`` as one frame:
    columns ``method``, ``seed`` and the logged columns; for the clustering loss also
    ``pam_gain = refined - greedy`` and ``inference_share = inference_s / step_s``."""
    frames = []
    for run in runs:
        log = run.extras.get("inside") or {}
        if not log:
            continue
        f = pd.DataFrame(log).assign(method=run.method, seed=run.seed)
        if "refined" in f:
            f["pam_gain"] = f["refined"] - f["greedy"]
            f["inference_share"] = f["inference_s"] / f["step_s"]
        frames.append(f)
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["method", "seed", "step", "step_s"])
    )


def inside_loss_summary(frame: pd.DataFrame, skip_first: int = 1) -> pd.DataFrame:
    """Per method and seed, from :func:`inside_loss_frame` (the first ``skip_first`` logged steps
    of each run, which include one-off warm-up costs, are left out of the timings):

    * ``step_s``: median step time; ``inference_s``: median inference time; ``inference_share``:
      total inference time over total step time;
    * ``steps``, ``pam_improved`` (fraction of steps where the refined objective is strictly above
      the greedy one), ``pam_gain_mean``, ``pam_gain_min`` (refined - greedy), ``below_greedy``
      (steps with refined < greedy beyond :data:`PAM_TOLERANCE`; the log holds one value per step,
      after all passes, so an update that lowers ``A`` within the passes is not seen, and for
      metric distances no pass of either form ends below its start, so this count is 0 by a
      proof, not a test of Lemma 1: :func:`lemma1_per_update` traces every update);
    * ``nmi_first`` / ``nmi_last``: mean NMI of the inferred clustering over the first / last
      tenth of the logged steps; ``loss_first`` / ``loss_last`` likewise.
    """
    rows = []
    for (method, seed), f in frame.groupby(["method", "seed"], sort=False):
        f = f.sort_values("step")
        timed = f.iloc[skip_first:] if len(f) > skip_first else f
        tenth = max(1, len(f) // 10)
        row: dict[str, Any] = {
            "method": method,
            "seed": seed,
            "steps": len(f),
            "step_s": float(timed["step_s"].median()),
            "loss_first": float(f["loss"].head(tenth).mean()),
            "loss_last": float(f["loss"].tail(tenth).mean()),
        }
        if "refined" in f and f["refined"].notna().any():
            gain = f["refined"] - f["greedy"]
            tol = PAM_TOLERANCE * np.maximum(1.0, f["greedy"].abs())  # round-off (PAM_TOLERANCE)
            row.update(
                {
                    "inference_s": float(timed["inference_s"].median()),
                    "inference_share": float(timed["inference_s"].sum() / timed["step_s"].sum()),
                    "pam_improved": float((gain > tol).mean()),
                    "pam_gain_mean": float(gain.mean()),
                    "pam_gain_min": float(gain.min()),
                    "below_greedy": int((gain < -tol).sum()),
                    "nmi_first": float(f["nmi"].head(tenth).mean()),
                    "nmi_last": float(f["nmi"].tail(tenth).mean()),
                }
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["method", "seed", "steps", "step_s"])


def nmi_of_one_move(classes: int, per_class: int) -> float:
    """``1 - NMI`` between a batch's classes (``classes x per_class`` items) and the same
    partition with one item moved to another class's cluster: the structured margin
    ``gamma * Delta`` the oracle must win by per misplaced item is ``gamma`` times this."""
    return labels_one_move(torch.arange(classes).repeat_interleave(per_class))


def labels_one_move(labels: Tensor) -> float:
    """``1 - NMI`` (geometric) between ``labels`` ``(B,)`` and the same partition with the first
    item of the first item's class moved to the cluster of another class (:func:`nmi_of_one_move`
    for any class sizes, e.g. the Figure 2 toy's)."""
    labels = torch.as_tensor(labels)
    other = labels[labels != labels[0]]
    if not len(other):
        raise ValueError("labels need at least two classes")
    moved = labels.clone()
    moved[0] = other[0]  # the first item joins another class's cluster
    return 1.0 - nmi_clustering(moved, labels, "geometric")


def inference_scaling(
    sizes: Sequence[int] = (128, 256, 512),
    clusters: int = 32,
    repeats: int = 3,
    dim: int = 64,
    gamma: float = 10.0,
    seed: int = 0,
) -> pd.DataFrame:
    """Wall time of Algorithm 1 (greedy loss-augmented inference, ``pam_passes = 0``) on random
    L2-normalised ``dim``-d embeddings with ``clusters`` classes of equal size, for every batch
    size in ``sizes``; the sizes are interleaved within each repeat so that every repeat sees the
    same machine load. Returns one row per repeat and size: ``repeat``, ``batch``, ``clusters``,
    ``seconds``."""
    from dmlnb.pairs import euclidean_distance

    gen = torch.Generator().manual_seed(seed)
    inputs = {}
    for v in sizes:
        if v % clusters:
            raise ValueError(f"batch size {v} is not a multiple of {clusters} clusters")
        x = torch.nn.functional.normalize(torch.randn(v, dim, generator=gen), dim=1)  # (V, D)
        inputs[v] = (euclidean_distance(x), torch.arange(clusters).repeat_interleave(v // clusters))
    loss_augmented_inference(*inputs[sizes[0]], gamma, pam_passes=0)  # warm-up
    rows = []
    for r in range(repeats):
        for v in sizes:
            t0 = time.perf_counter()
            loss_augmented_inference(*inputs[v], gamma, pam_passes=0)
            rows.append(
                {"repeat": r, "batch": v, "clusters": clusters, "seconds": time.perf_counter() - t0}
            )
    return pd.DataFrame(rows)


def timed_inference(
    folder: str | Path, settings: Mapping[str, Any], retrain: bool = False
) -> pd.DataFrame:
    """:func:`inference_scaling` with ``settings``, stored in ``folder`` and reloaded while its
    settings match (:func:`dmlnb.runs.stored_measurement`); ``attrs["made"]`` is the UTC date it
    was measured (from the stored measurement), which the chapter states."""
    frame = stored_measurement(
        folder, lambda: inference_scaling(**settings), settings=settings, retrain=retrain
    )
    made = str(read_json(Path(folder) / MEASUREMENT).get("made", ""))
    frame.attrs["made"] = made[:10] if made else "an unrecorded date"
    return frame


def scaling_slopes(bench: pd.DataFrame) -> np.ndarray:
    """Per repeat of :func:`inference_scaling`: the least-squares slope of log time against log
    batch size (1: linear, 2: quadratic)."""
    return np.array(
        [
            np.polyfit(np.log(f["batch"]), np.log(f["seconds"]), 1)[0]
            for _, f in bench.groupby("repeat")
        ]
    )


def _pam_rows(runs: Sequence[KeptRun]) -> pd.DataFrame:
    """One row per clustering run with logged objectives: ``table``, ``gamma``, ``refinement``,
    ``seed`` and its :func:`inside_loss_summary` ``steps``, ``pam_improved`` and
    ``below_greedy``."""
    rows = []
    for r in runs:
        if r.method != "clustering":
            continue
        s = inside_loss_summary(inside_loss_frame([r]))
        if len(s) and "pam_improved" in s:
            rows.append(
                {
                    "table": r.table,
                    "gamma": r.spec["gamma"],
                    "refinement": r.spec["refinement"],
                    "seed": r.seed,
                    **{k: s[k].iloc[0] for k in ("steps", "pam_improved", "below_greedy")},
                }
            )
    return pd.DataFrame(
        rows,
        columns=["table", "gamma", "refinement", "seed", "steps", "pam_improved", "below_greedy"],
    )


def pam_by_table(runs: Sequence[KeptRun]) -> pd.DataFrame:
    """Per table, initial margin multiplier and form of Algorithm 2 of the clustering runs: runs,
    logged steps, the share of steps where the refined objective is strictly above the greedy one
    (overall and the lowest and highest run) and the steps where it ends below (``"ended below
    greedy"``, beyond :data:`PAM_TOLERANCE`; 0 by a proof for metric distances, not a test of
    Lemma 1, see :func:`inside_loss_summary`)."""
    f = _pam_rows(runs)
    columns = [
        "table",
        "gamma",
        "refinement",
        "runs",
        "steps",
        "PAM above greedy",
        "lowest run",
        "highest run",
        "ended below greedy",
    ]
    return pd.DataFrame(
        [
            {
                "table": t,
                "gamma": g,
                "refinement": a,
                "runs": len(p),
                "steps": int(p["steps"].sum()),
                "PAM above greedy": float(np.average(p["pam_improved"], weights=p["steps"])),
                "lowest run": float(p["pam_improved"].min()),
                "highest run": float(p["pam_improved"].max()),
                "ended below greedy": int(p["below_greedy"].sum()),
            }
            for (t, g, a), p in f.groupby(["table", "gamma", "refinement"], sort=False)
        ],
        columns=columns,
    )
