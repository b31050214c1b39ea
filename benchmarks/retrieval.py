"""Evaluation time of dmlnb next to pytorch-metric-learning's AccuracyCalculator (faiss inside).

    python benchmarks/retrieval.py                # 1 thread, N = 20,000 x D = 128, 5,000 classes
    python benchmarks/retrieval.py --n 5000 --classes 1000 --threads 2 --out results.csv

Both sides get the same embeddings in one process; PML ranks by L2 distance, so it gets them
L2-normalised, where its order is our cosine order. Rows: Recall@1 + MAP@R (one neighbour search
on each side; PML with ``k="max_bin_count"``, as MAP@R needs), and k-means + NMI (one cluster per
class). The value columns show what each side computed and "agree" whether the retrieval metrics
match (only then do their times compare like with like); NMI differs by the k-means initialisation
(different seeds). Median of ``--repeats`` runs after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import pandas as pd
import torch

from dmlnb.evaluation import evaluate


def _median_seconds(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall time of ``fn()`` over ``repeats`` runs after a warm-up, and its last result."""
    result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def embeddings(n: int, dim: int, classes: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` points ``(n, dim)`` in ``classes`` Gaussian classes of equal size, and
    their labels ``(n,)``."""
    g = torch.Generator().manual_seed(seed)
    if n % classes:
        raise ValueError(f"n={n} must be a multiple of classes={classes} (equal class sizes)")
    labels = torch.arange(classes).repeat_interleave(n // classes)  # (n,)
    centres = torch.randn(classes, dim, generator=g)  # (C, D)
    x = torch.randn(labels.numel(), dim, generator=g) + 0.5 * centres[labels]  # (n, D)
    return x, labels


def run(n: int, dim: int, classes: int, repeats: int) -> pd.DataFrame:
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    x, y = embeddings(n, dim, classes)
    x_unit = torch.nn.functional.normalize(x)  # (n, D): PML's L2 order is then the cosine order
    rows = []
    ours_t, ours = _median_seconds(
        lambda: evaluate(x, y, ks=(1,), metrics=("recall", "map_at_r")), repeats
    )
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r"), k="max_bin_count"
    )
    pml_t, pml = _median_seconds(lambda: calc.get_accuracy(x_unit, y), repeats)
    rows.append(
        {
            "task": "Recall@1 + MAP@R",
            "ours (s)": ours_t,
            "PML + faiss (s)": pml_t,
            "ours / PML": ours_t / pml_t,
            "ours: value": f"{ours['R@1']:.4f}, {ours['MAP@R']:.4f}",
            "PML: value": f"{pml['precision_at_1']:.4f}, {pml['mean_average_precision_at_r']:.4f}",
            "agree": abs(ours["R@1"] - pml["precision_at_1"]) < 1e-9
            and abs(ours["MAP@R"] - pml["mean_average_precision_at_r"]) < 1e-6,
        }
    )
    ours_t, ours = _median_seconds(lambda: evaluate(x, y, ks=(), metrics=("nmi",)), repeats)
    calc = AccuracyCalculator(include=("NMI",))
    pml_t, pml = _median_seconds(lambda: calc.get_accuracy(x_unit, y), repeats)
    rows.append(
        {
            "task": "k-means + NMI",
            "ours (s)": ours_t,
            "PML + faiss (s)": pml_t,
            "ours / PML": ours_t / pml_t,
            "ours: value": f"NMI {ours['NMI']:.4f}",
            "PML: value": f"NMI {pml['NMI']:.4f}",
            "agree": "n/a (k-means seeds)",
        }
    )
    return pd.DataFrame(rows).set_index("task")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--classes", type=int, default=5_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the table as CSV")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        import faiss

        faiss.omp_set_num_threads(args.threads)
    except ImportError:
        sys.exit("PML's AccuracyCalculator needs faiss: pip install faiss-cpu")
    table = run(args.n, args.dim, args.classes, args.repeats)
    print(
        f"N={args.n} D={args.dim} classes={args.classes} threads={args.threads} torch "
        f"{torch.__version__}"
    )
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    if args.out:
        table.to_csv(args.out)


if __name__ == "__main__":
    main()
