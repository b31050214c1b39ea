"""Whether this CPU computes as the one that made the committed default-profile records.

A few tests recompute a committed number from scratch (a network at initialisation, a toy
trained at render time) and expect it to the last digit. That holds on a CPU whose kernels round
as those of the machine that made the records (a 2-core AMD EPYC, AVX2); another CPU, e.g. an
AVX-512 Intel Xeon, rounds otherwise and moves near-tied neighbours (``README.md``,
``benchmarks/results/book_retrain_cpu.txt``). :func:`rounds_as_committed` asks the protocol
chapter's stored floors: the untrained network evaluated here, with one thread, must equal its
stored row.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

FLOORS = (
    Path(__file__).resolve().parents[1]
    / "results"
    / "00_protocol"
    / "default"
    / "floors"
    / "measurement.json"
)


@functools.cache
def rounds_as_committed() -> bool | None:
    """``True`` when the protocol chapter's untrained-network floor, evaluated on this CPU (its
    configuration as stored, one thread, nothing stored), equals the committed row exactly;
    ``None`` without the default profile's data (Omniglot under ``DMLNB_DATA``) to ask."""
    root = os.environ.get("DMLNB_DATA")
    if not root or not (Path(root) / "omniglot").exists():
        return None
    from dmlnb.data import load_dataset
    from dmlnb.experiments import protocol
    from dmlnb.profiles import TrainConfig

    stored = json.loads(FLOORS.read_text())
    config = TrainConfig(**stored["settings"]["config"])
    splits = load_dataset(config.dataset, root=root, **config.dataset_options)
    name = protocol.untrained_name(config)
    here = protocol.floors(config, splits)[name]
    committed = next(
        {k: v for k, v in row.items() if k != "row"} for row in stored["rows"] if row["row"] == name
    )
    return here == committed
