"""This paper's own diagnostics: the worked example's per-anchor terms (:func:`anchor_terms`),
collapsed runs (a single-negative variant whose training loss sits at ln 2: :func:`loss_curves`,
:func:`is_collapsed`, :func:`near_ln2`, :func:`collapsed_groups`), the authors' drop rule measured
in one rerun with a counting loss (:func:`drop_rule_diagnosis`, :func:`drop_rule_effect`) and how
far training still was from converged (:func:`last_epoch_fall`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from dmlnb.chapter import RunSet
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.spec import (
    MINING_METHODS,
    Batch,
    canonical_method,
    figure4_side,
)
from dmlnb.experiments.easy_positive.stored import StoredAnalyses
from dmlnb.records import as_json, with_added_config_keys, write_json_atomic
from dmlnb.reporting import COLLAPSE_BAND, collapsed

__all__ = [
    "TOY_ANGLES",
    "TOY_LABELS",
    "TOY_PAIRS",
    "LN2",
    "COLLAPSED",
    "SINGLE_NEGATIVE",
    "anchor_terms",
    "similarity_lines",
    "loss_curves",
    "is_collapsed",
    "near_ln2",
    "collapsed_groups",
    "drop_rule_diagnosis",
    "drop_rule_effect",
    "last_epoch_fall",
]

LN2 = math.log(2.0)  # softplus(0): the loss of a single-negative variant when S_ap = S_an
#: The worked example: six points on the unit circle at these angles (degrees), of two classes;
#: class 0 has two modes (the first two points close, the third far from both).
TOY_ANGLES = (0.0, 20.0, 150.0, 60.0, 200.0, 230.0)
TOY_LABELS = (0, 0, 0, 1, 1, 1)
#: The two-per-class batch of the worked example: two points of each class (indices).
TOY_PAIRS = (0, 1, 3, 4)

SINGLE_NEGATIVE = ("EPHN", "EPSHN", "HPHN")  # one negative per term: collapse reads as ln 2
#: The chapter's rule for collapsed runs (:func:`dmlnb.reporting.unless_degenerate`): a collapsed
#: embedding has S_ap = S_an for every anchor, so it cannot exercise the paper's mechanism (which
#: positive an anchor is pulled to); a comparison with a collapsed side is "not tested at this
#: scale", with this reason and the collapsed groups in its note.
COLLAPSED = "collapsed runs (training loss at ln 2: S_ap = S_an)"


def anchor_terms(
    embeddings: torch.Tensor, labels: torch.Tensor, positive: str = "hard", temperature: float = 0.1
) -> pd.DataFrame:
    """Per anchor of a small batch: its chosen positive (``"easy"`` or ``"hard"``) with all
    negatives, ``S_ap`` and its NCA term ``softplus(logsumexp_n S_an / T - S_ap / T)`` (the batch
    loss of EP or HP is their mean, when no term is dropped)."""
    e = torch.nn.functional.normalize(embeddings.double(), dim=1)
    s = e @ e.T
    same = labels[:, None] == labels[None, :]
    pos = same & ~torch.eye(len(labels), dtype=torch.bool)
    pick = (
        s.masked_fill(~pos, -math.inf).argmax(1)
        if positive == "easy"
        else s.masked_fill(~pos, math.inf).argmin(1)
    )
    s_ap = s.gather(1, pick[:, None]).squeeze(1)
    lse = torch.logsumexp((s / temperature).masked_fill(same, -math.inf), dim=1)
    term = torch.nn.functional.softplus(lse - s_ap / temperature)
    return pd.DataFrame({"positive": pick.numpy(), "S_ap": s_ap.numpy(), "term": term.numpy()})


def similarity_lines(embeddings: torch.Tensor, labels: torch.Tensor, names: Sequence[str]) -> str:
    """A small batch's cosine similarities and, per anchor, its easy (most similar) and hard
    (least similar) positive, in words (the worked example)."""
    sim = pd.DataFrame((embeddings @ embeddings.T).numpy(), index=names, columns=names)
    same = (labels[:, None] == labels[None, :]).numpy()
    positives = sim.where(same & ~np.eye(len(names), dtype=bool))
    choice = pd.DataFrame(
        {
            "easy positive": positives.idxmax(axis=1),
            "S_ap (easy)": positives.max(axis=1),
            "hard positive": positives.idxmin(axis=1),
            "S_ap (hard)": positives.min(axis=1),
        }
    )
    return (
        "cosine similarities:\n"
        + sim.round(3).to_string()
        + "\n\npositives chosen per anchor:\n"
        + choice.round(3).to_string()
    )


def loss_curves(runs: RunSet, study: Study) -> pd.DataFrame:
    """Training loss per epoch of every distinct Figure 4 run, from the records: one row per
    (run, n, seed), columns ``epoch 1..E``, plus ``collapsed`` — a single-negative variant (one
    negative per term, so ``S_ap = S_an`` for every anchor gives exactly ``ln 2``) collapsed by the
    book's criterion (:func:`is_collapsed`)."""
    rows, seen = [], set()
    for m in MINING_METHODS:
        for n in study.group_sizes:
            c = canonical_method(m, n)
            for s in study.seeds_for(c, n):
                if (c, n, s) in seen:  # n = 2: EP, HP and BA are one N-pair run
                    continue
                seen.add((c, n, s))
                losses = runs.run(*figure4_side(m, n), s).record.training_losses()
                row = {"method": m, "n": n, "seed": s, "run": c}
                row.update({f"epoch {i + 1}": v for i, v in enumerate(losses)})
                row["collapsed"] = is_collapsed(c, losses)
                rows.append(row)
    return pd.DataFrame(rows)


def is_collapsed(method: str, losses: Sequence[float]) -> bool:
    """Whether a run of canonical ``method`` with per-epoch training ``losses`` is collapsed: a
    single-negative variant (one negative per term, so ``S_ap = S_an`` for every anchor gives
    exactly ``ln 2``) whose loss stays within :data:`~dmlnb.reporting.COLLAPSE_BAND` (2.5%) of ln 2
    over the last two epochs (:func:`dmlnb.reporting.collapsed`, the book's criterion)."""
    return method in SINGLE_NEGATIVE and collapsed(losses, LN2)


def near_ln2(curves: pd.DataFrame, band: float = COLLAPSE_BAND) -> list[str]:
    """In words, per (run, n) of a single-negative variant (EPHN, EPSHN, HPHN: ln 2 is their loss at
    S_ap = S_an) in :func:`loss_curves` whose mean training loss over seeds comes within ``band``
    (a share of ln 2, the book's collapse band) of ln 2 at some epoch: at which epochs, the mean
    loss of every epoch, how many seeds are collapsed, and, when a seed's own loss stays within
    ``band`` of ln 2 from some epoch to the last, that epoch per seed (``—`` for a seed whose last
    epoch is outside), e.g.
    ``"EPHN n = 4: within 2.5% of ln 2 at epoch 2 only (mean over 3 seeds: 0.712, 0.688, 0.673,
    0.586, 0.483); 0 of 3 seeds collapsed"`` or
    ``"HPHN n = 8: ...; 3 of 3 seeds collapsed; per seed (0, 1, 2), within it from epoch 3, 2,
    2 to the last"``."""
    cols = [c for c in curves.columns if c.startswith("epoch ")]
    out = []
    for (run, n), f in curves.groupby(["run", "n"], sort=True):
        if run not in SINGLE_NEGATIVE:
            continue
        mean = f[cols].mean()
        near = [int(c.split()[1]) for c in cols if abs(mean[c] - LN2) <= band * LN2]
        if not near:
            continue
        span = (
            f"epoch {near[0]} only"
            if len(near) == 1
            else f"epochs {near[0]}-{near[-1]}"
            if near == list(range(near[0], near[-1] + 1))
            else "epochs " + ", ".join(map(str, near))
        )
        line = (
            f"{run} n = {n}: within {band:.1%} of ln 2 at {span} (mean over {len(f)} seeds: "
            + ", ".join(f"{v:.3f}" for v in mean)
            + f"); {int(f['collapsed'].sum())} of {len(f)} seeds collapsed"
        )
        f = f.sort_values("seed")
        entry = _band_entry(f[cols].to_numpy(dtype=float), band)
        if any(e is not None for e in entry):
            line += (
                f"; per seed ({', '.join(map(str, f['seed']))}), within it from epoch "
                + ", ".join("—" if e is None else str(e) for e in entry)
                + " to the last"
            )
        out.append(line)
    return out


def _band_entry(losses: np.ndarray, band: float = COLLAPSE_BAND) -> list[int | None]:
    """Per run (``losses`` ``(runs, epochs)``), the first epoch (1-based) from which every loss is
    within ``band`` (a share of ln 2) of ln 2, ``None`` when the last one is not."""
    inside = np.abs(losses - LN2) <= band * LN2  # (runs, epochs)
    tail = np.flip(np.cumprod(np.flip(inside, axis=1), axis=1), axis=1).astype(
        bool
    )  # inside to the last
    first = tail.shape[1] - tail.sum(axis=1) + 1  # (runs,) 1-based
    return [int(e) if t[-1] else None for e, t in zip(first, tail)]


class _CountingLoss(nn.Module):
    """Wraps an :class:`~dmlnb.losses.easy_positive.EasyPositiveLoss` and records, per batch, the
    terms the drop rule removes and the chosen positive / hard-negative similarities."""

    def __init__(self, loss: nn.Module) -> None:
        super().__init__()
        self.loss = loss
        self.batches: list[dict[str, float]] = []

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            e = torch.nn.functional.normalize(embeddings.float(), dim=1)
            s = e @ e.T
            same = labels[:, None] == labels[None, :]
            eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
            pos = same & ~eye & (s <= 0.9999)
            s_ap = s.masked_fill(~pos, float("-inf")).max(dim=1).values
            s_an = s.masked_fill(same, float("-inf")).max(dim=1).values
            ok = torch.isfinite(s_ap)
            dropped = ok & ((s_ap <= 0) | (s_an <= 0))
            self.batches.append(
                {
                    "terms": int(ok.sum()),
                    "dropped": int(dropped.sum()),
                    "min_S_ap": float(s_ap[ok].min()),
                    "min_S_an": float(s_an.min()),
                    "mean_S_ap_minus_S_an": float((s_ap - s_an)[ok].mean()),
                    "min_similarity": float(s.min()),
                }
            )
        return self.loss(embeddings, labels)


def drop_rule_diagnosis(
    batch: Batch, stored: StoredAnalyses, seed: int = 0, path: str | Path | None = None
) -> pd.DataFrame:
    """Why EPHN and HPHN at n = 2 give bit-identical runs although only EPHN applies the drop
    rule: EPHN at n = 2 retrained once (seed ``seed``, the configuration of ``batch``'s group
    ``"n2"``, in a scratch folder) with a loss wrapper that counts, per batch, the anchors the
    rule drops and records the chosen similarities. The per-epoch summary is saved as JSON at
    ``path`` (default ``<stored.folder>/diagnostics/EPHN-n2-seed<seed>-drop-rule.json``) with the
    run's configuration and EPHN's method call, and reloaded when it holds both (else the rerun is
    made again). The frame's ``attrs["seed"]`` is ``seed``."""
    import json
    import tempfile

    from dmlnb.training import fit

    name = f"EPHN-n2-seed{seed}-drop-rule.json"
    path = Path(path) if path else stored.folder / "diagnostics" / name
    config = batch.run_config("n2", "EPHN", seed)
    method = batch.groups["n2"].methods["EPHN"]
    stored_json = json.loads(path.read_text()) if path.exists() else None
    if (
        isinstance(stored_json, dict)
        and as_json(with_added_config_keys(stored_json.get("config"))) == as_json(config.to_dict())
        and stored_json.get("factory") == method.spec
    ):
        out = pd.DataFrame(stored_json["epochs"]).set_index("epoch")
        out.attrs["seed"] = seed
        return out
    splits = stored.splits(config)
    counting = _CountingLoss(
        method.build(num_classes=splits.num_train_classes, embedding_dim=config.embedding_dim)
    )
    with tempfile.TemporaryDirectory() as tmp:
        _, record = fit(
            config,
            counting,
            splits=splits,
            run_dir=tmp,
            resume=False,
            progress=False,
            name="drop-rule",
        )
    history = [h for h in record.data["history"] if h["epoch"] > 0]
    per_epoch = len(counting.batches) // len(history)
    rows = []
    for i, h in enumerate(history):
        b = counting.batches[i * per_epoch : (i + 1) * per_epoch]
        rows.append(
            {
                "epoch": i + 1,
                "loss": h["loss"],
                "batches": len(b),
                "terms dropped by the rule": sum(x["dropped"] for x in b),
                "terms": sum(x["terms"] for x in b),
                "min chosen S_ap": min(x["min_S_ap"] for x in b),
                "min chosen S_an": min(x["min_S_an"] for x in b),
                "min similarity in a batch": min(x["min_similarity"] for x in b),
                "mean S_ap - S_an (last batch)": b[-1]["mean_S_ap_minus_S_an"],
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomic: a sibling shard (dmlnb.runs) may read it meanwhile
    write_json_atomic(
        path, {"config": as_json(config.to_dict()), "factory": method.spec, "epochs": rows}
    )
    out = pd.DataFrame(rows).set_index("epoch")
    out.attrs["seed"] = seed  # the one seed measured, which the deviations table names
    return out


def drop_rule_effect(curves: pd.DataFrame, drop: pd.DataFrame, not_measured: str) -> str:
    """In words, what was measured of the drop rule: the terms it removed in the one rerun of
    :func:`drop_rule_diagnosis` (EPHN at n = 2, the seed in ``drop.attrs["seed"]``), in how many
    seeds the records of EPHN and HPHN at n = 2 (``curves``: :func:`loss_curves`) have the same
    training loss at every epoch, and what was not measured (``not_measured``: EPHN's other seeds,
    EPSHN at n = 2, which follows the same rule, and every n > 2)."""
    seed = drop.attrs.get("seed")
    dropped, terms = int(drop["terms dropped by the rule"].sum()), int(drop["terms"].sum())
    out = (
        "measured in one rerun, EPHN at n = 2"
        + (f" with seed {seed}" if seed is not None else "")
        + f": the rule dropped {dropped} of {terms} terms (lowest similarity in any batch "
        f"{drop['min similarity in a batch'].min():.2f})"
    )
    cols = [c for c in curves.columns if c.startswith("epoch ")]
    a = curves[(curves["run"] == "EPHN") & (curves["n"] == 2)].set_index("seed")[cols]
    b = curves[(curves["run"] == "HPHN") & (curves["n"] == 2)].set_index("seed")[cols]
    both = a.index.intersection(b.index)
    if len(both):
        same = int((a.loc[both] == b.loc[both]).all(axis=1).sum())
        out += (
            "; the records of EPHN and HPHN at n = 2 have the same training loss at every epoch "
            f"in {same} of {len(both)} seeds"
        )
    others = "EPHN's other seeds, " if seed is not None and len(set(a.index) - {seed}) else ""
    return (
        out + f"; terms dropped for {others}EPSHN at n = 2 (the same rule) and at every n > 2: "
        f"{not_measured}"
    )


def last_epoch_fall(curves: pd.DataFrame) -> str:
    """In words, how much the training loss of the non-collapsed runs of :func:`loss_curves` still
    fell over the last epoch, in % of the loss before it: the median over those runs, their range,
    and the median per method over the same runs; a method none of whose runs is non-collapsed is
    named as such, with no figure (a collapsed run sits at ln 2 and no longer falls)."""
    cols = [c for c in curves.columns if c.startswith("epoch ")]
    if len(cols) < 2:
        return f"{len(cols)} epoch(s): no fall over the last epoch to measure"
    last, prev = cols[-1], cols[-2]
    live = curves[~curves["collapsed"].astype(bool)]
    if live.empty:
        return "every run collapsed: no fall over the last epoch to measure"
    fall = 100 * (live[prev] - live[last]) / live[prev]
    by = fall.groupby(live["run"]).median()
    none = sorted(set(curves["run"]) - set(by.index))
    return (
        f"not converged: from epoch {len(cols) - 1} to {len(cols)} the loss of the {len(live)} "
        f"non-collapsed runs (of {len(curves)}) still fell by {fall.median():.0f}% (median; "
        f"{fall.min():.0f}% to {fall.max():.0f}%; per method, the median over its non-collapsed "
        "runs: "
        + ", ".join(f"{k} {v:.0f}%" for k, v in by.items())
        + (f"; {', '.join(none)}: none, every run collapsed" if none else "")
        + ")"
    )


def collapsed_groups(curves: pd.DataFrame) -> frozenset:
    """(canonical method, n) of :func:`loss_curves` with a collapsed seed: the groups no verdict
    may rest on (:data:`COLLAPSED`)."""
    g = curves.groupby(["run", "n"])["collapsed"].any()
    return frozenset(k for k, v in g.items() if v)


# ----------------------------------------------------------------------------------------------
# The paper's numbers (Recall@K in %)
# ----------------------------------------------------------------------------------------------
