"""How long a run must train to converge at a profile, and what a patience rule would keep.

    python benchmarks/learning_curves.py                       # default profile, 30 epochs
    python benchmarks/learning_curves.py --epochs 40 --methods triplet npair --seeds 0 1
    python benchmarks/learning_curves.py --out benchmarks/results/learning_curves_cpu.txt

Issue #46 asks every default run to train until its validation metric has stopped improving.
This measures, for a few registered methods on the protocol chapter's configuration (the
profile's network and data, the validation classes held out), one run per method and seed that
trains ``--epochs`` epochs and evaluates every epoch on the validation and the test classes. Per
run it reports where the test metrics peak, where the validation metrics peak, and for each
patience ``p`` of ``--patience`` and each validation metric (R@1, MAP@R) the epoch at which
:attr:`dmlnb.profiles.TrainConfig.patience` would stop the run, the epoch it would keep, and the
test R@1 kept there against the best test R@1 of the whole curve (what the rule loses). The
curves are replayed from one long run per method: a run with ``patience`` set trains exactly
these epochs until it stops (``tests/test_convergence.py``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from dmlnb.data import load_dataset
from dmlnb.experiments.protocol import chapter_config
from dmlnb.methods import call
from dmlnb.training import fit

#: The methods measured by default: (label, method name, arguments).
METHODS = {
    "triplet": ("triplet", {"mining": "semihard"}),
    "npair": ("npair", {}),
    "EPHN": ("easy-positive", {"name": "EPHN"}),
    "contrastive": ("contrastive", {}),
    "softmax": ("normalized-softmax", {}),
}


def replay(curve: pd.DataFrame, metric: str, patience: int) -> tuple[int, int]:
    """``(stop epoch, kept epoch)`` of a patience rule on validation ``metric`` over ``curve``
    (one row per evaluated epoch, in order): the first epoch at which ``patience`` evaluations
    in a row have not beaten the best so far (ties keep the earlier epoch), else the last."""
    best, best_epoch, since = -float("inf"), 0, 0
    for epoch, value in zip(curve["epoch"], curve[f"val {metric}"]):
        if value > best:
            best, best_epoch, since = value, int(epoch), 0
        else:
            since += 1
        if since >= patience:
            return int(epoch), best_epoch
    return int(curve["epoch"].iloc[-1]), best_epoch


def measure(label: str, seed: int, args: argparse.Namespace, splits) -> tuple[list[dict], float]:
    """One run's rows of the table (one per validation metric and patience) and its seconds."""
    name, kwargs = METHODS[label]
    config = chapter_config(
        args.profile,
        {"epochs": args.epochs, "seed": seed, "eval_metrics": ("recall", "map_at_r")},
        validation=True,
    )
    loss = call(name, **kwargs).build(
        num_classes=splits.num_train_classes, embedding_dim=config.embedding_dim
    )
    torch.manual_seed(seed)
    start = time.perf_counter()
    _, record = fit(config, loss, splits=splits, progress=False)
    seconds = time.perf_counter() - start
    curve = record.history_frame().reset_index()
    curve = curve[curve["epoch"] > 0].dropna(subset=["R@1"])
    test_best = curve.loc[curve["R@1"].idxmax()]
    rows = []
    for metric in ("R@1", "MAP@R"):
        for p in args.patience:
            stop, kept = replay(curve, metric, p)
            at = curve.loc[curve["epoch"] == kept].iloc[0]
            rows.append(
                {
                    "method": label,
                    "seed": seed,
                    "test R@1 peak": round(100 * test_best["R@1"], 1),
                    "at epoch": int(test_best["epoch"]),
                    "val metric": metric,
                    "patience": p,
                    "stops at": stop,
                    "keeps": kept,
                    "test R@1 kept": round(100 * at["R@1"], 1),
                    "lost (pts)": round(100 * (test_best["R@1"] - at["R@1"]), 1),
                }
            )
    return rows, seconds


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--patience", nargs="+", type=int, default=[2, 3, 5])
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = chapter_config(args.profile, {}, validation=True)
    splits = load_dataset(config.dataset, **config.dataset_options)
    rows, times = [], []
    for label in args.methods:
        for seed in args.seeds:
            these, seconds = measure(label, seed, args, splits)
            rows += these
            times.append(f"{label} seed {seed}: {seconds:.0f} s")
            print(times[-1], file=sys.stderr)
    table = pd.DataFrame(rows).to_string(index=False)
    head = (
        f"# learning curves, profile {args.profile}, {args.epochs} epochs, one thread; "
        f"{cpu_name()}, {torch.get_num_threads()} thread, {platform.platform()}\n"
        f"# {'; '.join(times)}\n"
    )
    print(head + table)
    if args.out is not None:
        args.out.write_text(head + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
