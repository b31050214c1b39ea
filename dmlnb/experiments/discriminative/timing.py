"""The complexity study: one pass of each loss over a training set as N and C grow (Table 1),
its log-log slopes, and training steps of every method timed in one process (Table 7)."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.experiments.baseline_losses import lifted_structure, npair, semihard_triplet
from dmlnb.experiments.discriminative.networks import build_loss, build_network, method_config
from dmlnb.experiments.discriminative.spec import CLUSTERING_GAMMA, CLUSTERING_REFINEMENT, METHODS
from dmlnb.losses import (
    DiscriminativeLoss,
    FacilityLocationLoss,
    NormalizedSoftmaxLoss,
    ProxyNCALoss,
    TripletLoss,
)
from dmlnb.pairs import euclidean_distance, l2_normalize
from dmlnb.profiles import TrainConfig

__all__ = [
    "triplet_sum_enumerated",
    "timing_losses",
    "N_SWEEP_ONLY",
    "loss_pass_timing",
    "fit_rows",
    "loglog_slopes",
    "timing_study",
    "timing_slopes",
    "whole_set_ratios",
    "timing_table",
    "c_sweep_table",
    "step_summary",
    "step_timing",
]


# --------------------------------------------------------------------------- timing


def triplet_sum_enumerated(
    embeddings: Tensor, labels: Tensor, margin: float = 0.2, max_elements: int = 1 << 24
) -> Tensor:
    """The hinged triplet loss summed over all triplets by enumerating them (forward only).

    The naive algorithm of the paper's Table 1 ("Trip.-naive", ``O(N^3 / C)``): for every class,
    each of its anchors is paired with every (positive ``j != i``, negative) pair explicitly, as a
    ``(anchors, positives, negatives)`` tensor of hinges ``[d_ij - d_ik + margin]_+`` (at most
    ``max_elements`` entries at a time), on L2-normalised embeddings. With ``N / C`` samples per
    class that is ``N (N/C - 1) (N - N/C)`` terms. Equals
    :func:`dmlnb.losses.discriminative.triplet_loss_all` with the same margin. No autograd: it
    would keep every chunk alive.
    """
    with torch.no_grad():
        x = l2_normalize(embeddings)
        d = euclidean_distance(x)  # (N, N)
        total = x.new_zeros((), dtype=torch.float64)
        for c in torch.unique(labels):
            members = torch.nonzero(labels == c).squeeze(1)  # (n,)
            others = torch.nonzero(labels != c).squeeze(1)  # (N - n,)
            d_pos = d[members][:, members]  # (n, n)
            d_neg = d[members][:, others]  # (n, N - n)
            not_self = ~torch.eye(len(members), dtype=torch.bool, device=x.device)  # (n, n)
            step = max(1, max_elements // max(1, len(members) * len(others)))
            for a in range(0, len(members), step):
                rows = slice(a, a + step)
                hinge = F.relu(
                    d_pos[rows, :, None] - d_neg[rows, None, :] + margin
                )  # (A, n, N - n)
                total += (hinge.sum(dim=2) * not_self[rows]).sum().double()
        return total


def _random_centroids(num_classes: int, dim: int, seed: int = 0) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(num_classes, dim, generator=g), dim=1)


def timing_losses(
    num_classes: int, dim: int, device: str | torch.device = "cpu"
) -> dict[str, Callable[[Tensor, Tensor], Any]]:
    """name -> ``f(x, y)`` that runs one pass of the loss over the set ``x`` ``(N, D)``.

    Gradient-based losses run forward + backward; the enumerated triplet sum
    (:func:`triplet_sum_enumerated`) runs forward only. "triplet all (sorted)" is the same hinged
    sum over all triplets by :class:`dmlnb.losses.TripletLoss` (``mining="all"``), which reads
    each anchor's hinge sums from its sorted negative distances: ``O(N^2 log N)``.
    The discriminative loss uses random unit centroids (its cost does not depend on their values,
    and ``C`` may exceed ``D`` here).
    """
    disc = DiscriminativeLoss(_random_centroids(num_classes, dim)).to(device)
    softmax = NormalizedSoftmaxLoss(num_classes, dim).to(device)
    proxy = ProxyNCALoss(num_classes, dim, scale=9.0).to(device)
    semihard = semihard_triplet().build()
    batch_all = TripletLoss(margin=0.2, mining="all")
    lifted = lifted_structure().build()
    npair_pairs = npair().build()
    clustering = FacilityLocationLoss(
        margin_multiplier=CLUSTERING_GAMMA, refinement=CLUSTERING_REFINEMENT
    )

    def backward(loss: nn.Module) -> Callable[[Tensor, Tensor], None]:
        def run(x: Tensor, y: Tensor) -> None:
            loss(x, y).backward()

        return run

    return {
        "discriminative": backward(disc),
        "softmax": backward(softmax),
        "triplet+proxy": backward(proxy),
        "N-pair": backward(npair_pairs),
        "lifted structure": backward(lifted),
        "triplet semi-hard": backward(semihard),
        "triplet all (sorted)": backward(batch_all),
        "triplet all (enumerated)": lambda x, y: triplet_sum_enumerated(x, y),
        "clustering": backward(clustering),
    }


def _time_call(fn: Callable[[], Any], repeats: int) -> float:
    """Fastest of ``repeats`` timed calls of ``fn`` after one warm-up (on a shared machine other
    jobs only ever add time)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# Losses timed in the N sweep only: the pairwise ones cost O(N^2) whatever C, and the C sweep's N
# is too large for the enumerated (O(N^3 / C)) and clustering (O(C N^2)) ones.
N_SWEEP_ONLY = (
    "N-pair",
    "lifted structure",
    "triplet semi-hard",
    "triplet all (sorted)",
    "triplet all (enumerated)",
    "clustering",
)


def loss_pass_timing(
    n_values: Sequence[int],
    c_fixed: int,
    n_fixed: int,
    c_values: Sequence[int],
    dim: int,
    repeats: int = 3,
    largest: Mapping[str, int] | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    names: Sequence[str] | None = None,
    n_sweep_only: Sequence[str] = N_SWEEP_ONLY,
) -> pd.DataFrame:
    """Seconds of one pass of each loss of :func:`timing_losses` over a whole labelled set.

    Two sweeps: ``N`` grows with ``C = c_fixed`` classes (``N / C`` samples each), and ``C`` grows
    with ``N = n_fixed`` (not the losses of :data:`N_SWEEP_ONLY`). Random ``(N, D)`` embeddings,
    ``D = dim``; every timing the fastest of ``repeats`` passes after one warm-up.
    ``largest[loss]``: the largest ``N`` that loss is timed at (in the ``C`` sweep too, whose ``N``
    is ``n_fixed``); a loss not named there is timed at every size. The sizes and passes timed are
    thus fixed, the same on every machine, and a slower machine only takes longer (a limit in
    seconds would time the slow losses at fewer sizes there, and their slopes would
    rest on fewer points).

    Returns a frame with columns ``sweep`` ("N" or "C"), ``loss``, ``N``, ``C``, ``seconds``.
    """
    device = torch.device(device)
    largest = largest or {}
    rows = []
    for sweep, grid in (
        ("N", [(n, c_fixed) for n in n_values]),
        ("C", [(n_fixed, c) for c in c_values]),
    ):
        skipped = set(n_sweep_only) if sweep == "C" else set()
        for n, c in grid:
            if n % c:
                raise ValueError(f"N={n} must be a multiple of C={c}")
            torch.manual_seed(seed)
            y = torch.arange(c, device=device).repeat_interleave(n // c)  # (N,)
            x0 = torch.randn(n, dim, device=device)
            for name, fn in timing_losses(c, dim, device).items():
                if (
                    (names is not None and name not in names)
                    or name in skipped
                    or n > largest.get(name, n)
                ):
                    continue
                x = x0.clone().requires_grad_(True)

                def once() -> None:
                    x.grad = None
                    fn(x, y)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)

                seconds = _time_call(once, repeats)
                rows.append({"sweep": sweep, "loss": name, "N": n, "C": c, "seconds": seconds})
    return pd.DataFrame(rows)


def fit_rows(grp: pd.DataFrame, last: int = 4, overhead_factor: float = 5.0) -> pd.DataFrame:
    """The timings of one loss and sweep (sorted by size) that :func:`loglog_slopes` fits.

    A cost that grows with the size: the ``last`` largest sizes among those that take at least
    ``overhead_factor`` times the fastest pass (or the two largest if fewer than two qualify). A
    cost that falls with the size (the enumerated sum as ``C`` grows): every size timed, the whole
    pre-registered range, including any sizes past the fastest pass where fixed per-call costs (a
    Python loop over the classes) set a floor: choosing the sizes by where the curve stops falling
    would choose them by the answer.
    """
    if len(grp) >= 2 and grp["seconds"].iloc[-1] < grp["seconds"].iloc[0]:
        return grp
    fit = grp[grp["seconds"] >= overhead_factor * grp["seconds"].min()].tail(last)
    return fit if len(fit) >= 2 else grp.tail(2)


def loglog_slopes(
    timing: pd.DataFrame, sweep: str, last: int = 4, overhead_factor: float = 5.0
) -> pd.Series:
    """Log-log slope of ``seconds`` against ``N`` (``sweep="N"``) or ``C`` (``"C"``) per loss.

    The fit uses the sizes :func:`fit_rows` picks: for a growing cost, a loss's ``last`` largest
    sizes among those whose pass took at least ``overhead_factor`` times its fastest pass of the
    sweep (below that, fixed per-call costs -- Python loops, dispatch -- dominate the loss's own
    work), or its two largest sizes if fewer than two qualify. It is the Theil-Sen estimate, the
    median of the slopes between every two of those points, so one disturbed timing moves it less
    than a least-squares fit. A slope of 1 is linear cost, 2 quadratic, 3 cubic. A loss timed at a
    single size gives NaN.
    """
    x_col = "N" if sweep == "N" else "C"
    out = {}
    part = timing[timing["sweep"] == sweep]
    for name, grp in part.groupby("loss", sort=False):
        fit = fit_rows(grp.sort_values(x_col), last, overhead_factor)
        if len(fit) < 2:
            out[name] = float("nan")
            continue
        lx, ly = np.log(fit[x_col].to_numpy(float)), np.log(fit["seconds"].to_numpy(float))
        pairs = [
            (ly[j] - ly[i]) / (lx[j] - lx[i]) for i in range(len(lx)) for j in range(i + 1, len(lx))
        ]
        out[name] = float(np.median(pairs))
    return pd.Series(out, name=f"slope in {x_col}")


def timing_study(
    seeds: Sequence[int], device: str | torch.device = "cpu", **timing: Any
) -> pd.DataFrame:
    """:func:`loss_pass_timing` repeated once per seed in ``seeds`` (fresh random embeddings each),
    with ``timing`` the profile's ``settings["timing"]``: every timed pass, with a ``seed``
    column. ``naive_c`` (in ``timing``), a dict ``n_fixed`` / ``c_values``, adds a C sweep of the
    enumerated all-triplet sum at that smaller ``N`` (the /C of its O(N^3 / C)), at every size of
    ``c_values`` (its cost falls as ``C`` grows: its first size is its slowest). The slopes are
    :func:`timing_slopes` of the result."""
    frames = []
    timing = dict(timing)
    naive_c = timing.pop("naive_c", None)
    for seed in seeds:
        t = loss_pass_timing(**timing, seed=seed, device=device)
        if naive_c:
            naive = "triplet all (enumerated)"
            extra = loss_pass_timing(
                n_values=(),
                c_fixed=1,
                n_fixed=naive_c["n_fixed"],
                c_values=naive_c["c_values"],
                dim=timing["dim"],
                repeats=timing.get("repeats", 3),
                seed=seed,
                device=device,
                names=[naive],
                n_sweep_only=(),
            )
            t = pd.concat([t, extra], ignore_index=True)
        frames.append(t.assign(seed=seed))
    return pd.concat(frames, ignore_index=True)


def timing_slopes(timing: pd.DataFrame) -> pd.DataFrame:
    """One row per (seed, loss) of a :func:`timing_study`: the fitted ``slope in N`` and
    ``slope in C`` (:func:`loglog_slopes`) and the sizes fitted, so the complexity claims are
    judged on one slope per repeat of the study."""
    slopes = []
    for seed, t in timing.groupby("seed", sort=True):
        t = t.drop(columns="seed").reset_index(drop=True)
        fit = pd.concat([loglog_slopes(t, "N"), loglog_slopes(t, "C")], axis=1)
        for sweep, x_col in (("N", "N"), ("C", "C")):
            part = t[t["sweep"] == sweep]
            fit[f"sizes fitted in {x_col}"] = pd.Series(
                {
                    name: len(fit_rows(g.sort_values(x_col)))
                    for name, g in part.groupby("loss", sort=False)
                }
            )
        slopes.append(fit.rename_axis("loss").reset_index().assign(seed=seed))
    return pd.concat(slopes, ignore_index=True)


def _n_sweep(timing: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Of a :func:`timing_study`'s N sweep: the median ms per (loss, N) over the repeats, and how
    many repeats timed each (loss, N) (all of them where the study ran to its end)."""
    part = timing[timing["sweep"] == "N"]
    ms = (
        part.pivot_table(index="loss", columns="N", values="seconds", aggfunc="median", sort=False)
        * 1e3
    )
    ms = ms[sorted(ms.columns)]
    timed = part.groupby(["loss", "N"])["seed"].nunique().unstack().reindex_like(ms)
    return ms, timed


def whole_set_ratios(
    timing: pd.DataFrame, against: str = "triplet semi-hard"
) -> tuple[int, pd.Series]:
    """Every loss's median pass at one N of a :func:`timing_study`'s N sweep over the
    discriminative loss's: at the largest N both the discriminative loss and ``against`` were
    timed at in every repeat (a size only some repeats reached would compare a median of fewer).
    Returns (that N, the ratios per loss; NaN for a loss not timed there)."""
    ms, timed = _n_sweep(timing)
    repeats = timing["seed"].nunique()
    in_all = timed.loc[["discriminative", against]].eq(repeats).all()
    if not in_all.any():
        raise ValueError(
            f"no N at which the discriminative loss and {against!r} were timed in all {repeats} "
            "repeats"
        )
    n = int(in_all[in_all].index.max())
    return n, ms[n] / ms.loc["discriminative", n]


def timing_table(timing: pd.DataFrame, slopes: pd.DataFrame) -> pd.DataFrame:
    """Per loss of a :func:`timing_study` (rows): every repeat's slope in N and in C and the sizes
    each fitted (:func:`timing_slopes` ``slopes``), then the median ms of one pass at each N of the
    N sweep, marked ``"(k of n)"`` where only k of the n repeats timed that size; ``"—"`` where
    nothing was measured."""
    repeats = timing["seed"].nunique()
    per_repeat = slopes.pivot_table(
        index="loss",
        columns="seed",
        sort=False,
        values=["slope in N", "slope in C", "sizes fitted in N", "sizes fitted in C"],
    )
    per_repeat.columns = [f"{name}, repeat {seed}" for name, seed in per_repeat.columns]
    ms, timed = _n_sweep(timing)
    shown = (
        ms.round(1)
        .astype(object)
        .where(
            timed.eq(repeats),
            ms.round(1).astype(str)
            + " ("
            + timed.fillna(0).astype(int).astype(str)
            + f" of {repeats})",
        )
    )
    shown = shown.where(ms.notna()).rename(columns=lambda n: f"ms at N={n}, median of the repeats")
    table = pd.concat([per_repeat.round(2), shown], axis=1).astype(object)
    return table.where(table.notna(), "—").rename_axis("loss (one pass over the set)")


def c_sweep_table(timing: pd.DataFrame) -> pd.DataFrame:
    """The median ms of one pass per (loss, N) and C of a :func:`timing_study`'s C sweeps (the
    enumerated sum's own at its smaller N included); ``"—"`` where a loss was not timed."""
    repeats = timing["seed"].nunique()
    ms = (
        timing[timing["sweep"] == "C"].pivot_table(
            index=["loss", "N"], columns="C", values="seconds", aggfunc="median", sort=False
        )
        * 1e3
    )
    ms = ms[sorted(ms.columns)]  # the enumerated sum's sweep starts below the others'
    table = ms.round(2).rename(columns=lambda c: f"ms at C={c}, median of {repeats}").astype(object)
    return table.where(table.notna(), "—")


def step_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """A :func:`step_timing` frame per method (rows named as the paper's tables name them,
    :data:`METHODS`, in the order timed), each a median over the interleaved repeats: ``ms per
    step``, ``per step / discriminative`` (the ratio within each repeat, as the claims compare
    them), ``ms of the loss alone`` and ``loss share of a step`` (per repeat)."""
    row_of = {m: row for row, m in METHODS.items()}
    per = steps.assign(share=steps["loss seconds"] / steps["step seconds"])
    base = per[per["method"] == "discriminative"].set_index("repeat")["step seconds"]
    per = per.assign(ratio=per["step seconds"] / per["repeat"].map(base))
    summary = per.groupby("method", sort=False)[
        ["step seconds", "ratio", "loss seconds", "share"]
    ].median()
    return (
        pd.DataFrame(
            {
                "ms per step": 1e3 * summary["step seconds"],
                "per step / discriminative": summary["ratio"],
                "ms of the loss alone": 1e3 * summary["loss seconds"],
                "loss share of a step": summary["share"],
            },
        )
        .rename(index=row_of)
        .rename_axis("method")
    )


# --------------------------------------------------------------------------- same-cell step timing


def step_timing(
    config: TrainConfig,
    splits: Any,
    methods: Sequence[str],
    steps: int = 4,
    repeats: int = 3,
) -> pd.DataFrame:
    """Seconds of one training step of each method, measured now, in this process, interleaved.

    Run records are trained at different times under different loads, so their timings are not
    compared with each other. Here every method gets the same ``steps`` class-balanced batches of
    the training set (``config.batch_size``, ``config.m_per_class`` per class), its own seeded
    network, loss and optimiser, and one warm-up step; the methods then take turns, ``repeats``
    rounds of ``steps`` steps each, so a change of load hits every method alike. Per step it also
    times the loss alone: forward + backward of the loss on that step's (detached) embeddings.

    Returns one row per (method, repeat): ``step seconds`` (mean over the round's steps: forward,
    loss, backward, optimiser step) and ``loss seconds``.
    """
    from dmlnb.data import gather_images
    from dmlnb.samplers import MPerClassSampler
    from dmlnb.training import build_optimizer, resolve_device

    device = resolve_device(config.device)
    num_classes = splits.num_train_classes
    sampler = MPerClassSampler(
        torch.as_tensor(splits.train.labels),
        m=config.m_per_class,
        batch_size=config.batch_size,
        seed=config.seed,
    )
    batches = []
    labels = torch.as_tensor(splits.train.labels)
    for idx in sampler:
        index = torch.as_tensor(idx)
        batches.append((gather_images(splits.train, index).to(device), labels[index].to(device)))
        if len(batches) == steps:
            break
    setups = {}
    for method in methods:
        cfg = method_config(method, config)
        model = build_network(method, cfg, splits.input_shape, num_classes).to(device)
        loss = build_loss(method, num_classes, cfg.embedding_dim).to(device)
        setups[method] = (model.train(), loss, build_optimizer(cfg, model, loss))

    def clock() -> float:  # on a GPU, wait for the queued kernels so that the work is timed
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def one_step(method: str, x: Tensor, y: Tensor) -> float:
        model, loss, opt = setups[method]
        out = model(x).float()
        value = loss(out, y)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        emb = out.detach().clone().requires_grad_(True)
        t0 = clock()
        loss(emb, y).backward()
        return clock() - t0

    for method in methods:  # warm-up
        one_step(method, *batches[0])
    rows = []
    for r in range(repeats):
        for method in methods:
            loss_s, t0 = 0.0, clock()
            for x, y in batches:
                loss_s += one_step(method, x, y)
            total = clock() - t0 - loss_s  # the step without the extra loss-only pass
            rows.append(
                {
                    "method": method,
                    "repeat": r,
                    "step seconds": total / len(batches),
                    "loss seconds": loss_s / len(batches),
                }
            )
    return pd.DataFrame(rows)
