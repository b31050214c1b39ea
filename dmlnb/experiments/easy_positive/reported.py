"""The paper's numbers (Recall@K in %, from the CSV files of ``experiments/reported/`` read by
:func:`dmlnb.reported.reported_table`) and how they are shown beside ours: Table 1's cells and
winners, Tables 2 and 3 beside the paper profile's runs."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from dmlnb.profiles import TrainConfig
from dmlnb.reported import reported_table
from dmlnb.reporting import reported_vs_reproduced

__all__ = [
    "REPORTED_TABLE1",
    "REPORTED_TABLE2",
    "REPORTED_TABLE3",
    "DATASET_NAMES",
    "reported_table1",
    "reported_table1_full_cells",
    "reported_table1_winners",
    "table2_name",
    "paper_side_by_side",
]


def _table1_cells() -> dict[tuple[str, str], pd.DataFrame]:
    """The (dataset, backbone) cells of dmlnb/experiments/reported/easy_positive_table1.csv."""
    table = reported_table("easy_positive_table1")
    return {key: cell.droplevel([0, 1]) for key, cell in table.groupby(level=[0, 1], sort=False)}


#: Table 1 of the paper: ``{(dataset, backbone): DataFrame (methods x R@1..R@8)}``, 64-d, in %.
REPORTED_TABLE1: dict[tuple[str, str], pd.DataFrame] = _table1_cells()
#: Table 2 of the paper (state of the art; EPSHN with ResNet-50, 512-d), in %.
REPORTED_TABLE2 = reported_table("easy_positive_table2")
#: Table 3 of the paper: Hotels-50K (ResNet-50, 256-d), in %.
REPORTED_TABLE3 = reported_table("easy_positive_table3")

DATASET_NAMES = {"cub200": "CUB", "cars196": "CAR", "sop": "SOP", "inshop": "In-Shop"}
_BACKBONES = {"googlenet": "GoogLeNet", "resnet18": "ResNet-18", "resnet50": "ResNet-50"}


def reported_table1(dataset: str, model: str) -> dict[str, pd.DataFrame]:
    """The paper's Table 1 cells to show beside our ``dataset`` / ``model`` cell, each under its
    label ``"reported (<dataset>, <backbone>, 64-d)"``
    (:func:`dmlnb.reporting.reported_vs_reproduced`).

    The cell of the same dataset and backbone when the paper has it; otherwise (a dataset or
    backbone the paper did not use) the two cells that report all four methods,
    :func:`reported_table1_full_cells` (CUB / GoogLeNet and CAR / GoogLeNet), each in its own
    columns: numbers of another dataset, for the ranking of the methods, never a stand-in for ours.
    """
    key = (DATASET_NAMES.get(dataset, ""), _BACKBONES.get(model, ""))
    cells = {key: REPORTED_TABLE1[key]} if key in REPORTED_TABLE1 else reported_table1_full_cells()
    return {f"reported ({d}, {b}, 64-d)": t for (d, b), t in cells.items()}


def reported_table1_full_cells() -> dict[tuple[str, str], pd.DataFrame]:
    """The Table 1 cells that report all four methods (CUB / GoogLeNet and CAR / GoogLeNet)."""
    return {k: t for k, t in REPORTED_TABLE1.items() if t.notna().all().all()}


def reported_table1_winners() -> pd.Series:
    """The method with the best reported Recall@1 in each (dataset, backbone) cell of Table 1."""
    return pd.Series(
        {key: table["R@1"].idxmax() for key, table in REPORTED_TABLE1.items()}, name="best R@1"
    )


def table2_name(dataset: str) -> str:
    """The paper's column name of one of our datasets in Table 2."""
    return DATASET_NAMES.get(dataset, dataset)


def paper_side_by_side(
    config: TrainConfig, metrics: Mapping[str, float], runs: int = 1
) -> pd.DataFrame:
    """Table 2 or 3 for one dataset: the paper's rows beside our EPSHN run(s) of ``config``
    (``metrics``: test metrics as fractions, mean over ``runs``), Recall@K in %, each in its own
    block labelled with its source and dataset (:func:`dmlnb.reporting.reported_vs_reproduced`).
    Table 2 (CUB, Cars, SOP, In-Shop): the EPSHN512 row (ResNet-50, 512-d); Table 3
    (``hotels50k``): both rows, batch all (the Hotels-50K authors') and EPSHN256 (ResNet-50,
    256-d)."""
    if config.dataset == "hotels50k":
        name, reported, row = "Hotels-50K", REPORTED_TABLE3["Hotels-50K"], "EPSHN256"
    else:
        name, row = table2_name(config.dataset), "EPSHN512"
        reported = REPORTED_TABLE2[name].loc[[row]]
    ks = [k for k in reported.columns if k in metrics]
    ours = pd.DataFrame({k: [f"{100 * metrics[k]:.1f}"] for k in ks}, index=[row])
    label = (
        f"reproduced ({config.dataset}, {config.model}, {config.embedding_dim}-d, n = "
        f"{config.m_per_class}, {runs} run{'s' if runs > 1 else ''})"
    )
    return reported_vs_reproduced(
        {
            f"reported ({name}, ResNet-50, {config.embedding_dim}-d)": reported.map(
                lambda v: f"{v:.1f}"
            )
        },
        {label: ours},
    )
