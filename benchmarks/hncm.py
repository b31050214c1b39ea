"""Time of PROFS's hard negative class mining (HNCM): the classes of one batch chosen uniformly, by
the greedy chain and by one scan of the class representatives.

    python benchmarks/hncm.py                                    # this CPU, the chapter's sizes
    python benchmarks/hncm.py --classes 100 11318 --dim 512 --classes-per-batch 64 --repeats 20

Each row is :func:`dmlnb.experiments.profs.hncm_pick_cost` for one number of classes ``L``: a
:class:`~dmlnb.profs.representatives.RepresentativeSampler` over ``L`` classes of 2 images, its HNCM
memory ``L`` random ``D``-dimensional representatives, draws one batch of ``C`` classes; the fastest
of ``--repeats`` draws, in milliseconds, for each rule:

* ``uniform ms``: ``C`` classes uniformly (PROFS without HNCM);
* ``HNCM ms``: the greedy chain (``hncm_mode="greedy"``, the default profile's runs): ``C - 1``
  scans of the ``(L, D)`` memory, ``O(C L D)``;
* ``HNCM scan ms``: one scan (``hncm_mode="scan"``, the paper's ``O(L)``, Sec. 4.2): the ``C - 1``
  classes nearest to a uniformly drawn one, ``O(L D)``.

``greedy / scan`` is the ratio of the two HNCM columns. The times include drawing the batch's
examples (the same for every rule).
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch

from dmlnb.experiments.profs import PAPER_TRAIN_SETS, hncm_pick_cost

#: The chapter's number of classes (Omniglot-small's 136), CUB's, Cars196's and
#: SOP's training classes.
DEFAULT_CLASSES = sorted({136, *(classes for _, classes in PAPER_TRAIN_SETS.values())})


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--classes", type=int, nargs="+", default=DEFAULT_CLASSES, help="numbers of classes L"
    )
    parser.add_argument("--dim", type=int, default=512, help="embedding size D (the paper: 512)")
    parser.add_argument(
        "--classes-per-batch", type=int, default=64, help="C (the paper: 128 / 2 = 64)"
    )
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    small = [n for n in args.classes if n < args.classes_per_batch]
    if small:
        parser.error(
            f"--classes {small} hold fewer classes than --classes-per-batch "
            f"{args.classes_per_batch}"
        )
    table = hncm_pick_cost(args.classes, args.dim, args.classes_per_batch, repeats=args.repeats)
    table["greedy / scan"] = table["HNCM ms"] / table["HNCM scan ms"]
    print(
        f"one batch of {args.classes_per_batch} classes, D = {args.dim}, fastest of "
        f"{args.repeats} draws; CPU, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return table


if __name__ == "__main__":
    main()
