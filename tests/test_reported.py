"""The papers' reported tables: read from CSV with the values, shapes, dtypes and index names the
chapters were written against (the numbers below are the papers')."""

import math

import numpy as np
import pandas as pd
import pytest

import dmlnb.reported as reported
from dmlnb.reported import reported_names, reported_source, reported_table

SHAPES = {
    "discriminative_table2": (2, 8),
    "discriminative_table3": (4, 10),
    "discriminative_table4": (10, 5),
    "discriminative_table5": (10, 5),
    "discriminative_table6": (2, 6),
    "discriminative_table7": (2, 3),
    "discriminative_table8": (2, 5),
    "easy_positive_table1": (24, 4),
    "easy_positive_table2": (6, 12),
    "easy_positive_table3": (2, 3),
    "facility_location_table1": (4, 5),
    "facility_location_table2": (4, 5),
    "facility_location_table3": (4, 4),
    "profs_table1": (22, 18),
    "profs_table2": (6, 12),
    "ssdml_table1": (7, 15),
    "ssdml_table2": (7, 10),
    "ssdml_table3": (6, 10),
    "ssdml_table4": (6, 5),
    "ssdml_table5": (3, 4),
    "ssdml_figure2_alpha": (4, 5),
}


def test_every_table_is_there_with_its_shape_and_source():
    assert reported_names() == sorted(SHAPES)
    for name, shape in SHAPES.items():
        assert reported_table(name).shape == shape, name
        source = reported_source(name)
        assert any(year in source for year in ("2017", "2019", "2020", "2021")), (name, source)
        assert "Table" in source or "Figure" in source, (name, source)


def test_known_cells():
    t4 = reported_table("discriminative_table4")
    assert t4.loc["Discriminative", "R@1"] == 51.43 and t4.loc["SoftMax", "NMI"] == 57.21
    assert math.isnan(t4.loc["Histogram", "NMI"])  # not reported: an empty cell
    assert (
        list(t4.columns) == ["NMI", "R@1", "R@2", "R@4", "R@8"] and t4.index[-1] == "Discriminative"
    )
    t3 = reported_table("discriminative_table3")
    assert (
        isinstance(t3.index, pd.RangeIndex) and list(t3["centroids"]) == ["one-hot", "K-means"] * 2
    )
    assert t3.loc[0, "mean"] == 2**0.5  # written to the last digit
    t6 = reported_table("discriminative_table6")
    assert (
        t6.loc["CAR196", "[16] Lin et al. (DVML)"] == 82.0
        and t6.loc["CUB-200-2011", "Discriminative"] == 51.4
    )
    # Table 6 repeats the discriminative loss's R@1 of Tables 4 and 5, to one decimal
    assert round(t4.loc["Discriminative", "R@1"], 1) == t6.loc["CUB-200-2011", "Discriminative"]
    t7 = reported_table("discriminative_table7")
    assert (t7.dtypes == np.int64).all() and t7.loc["CAR196", "Semi-hard"] == 1200
    t2 = reported_table("discriminative_table2")
    assert t2.loc["second-to-last layer", ("CAR196", "R@8")] == 91.18 and t2.columns.names == [
        None,
        None,
    ]
    ep1 = reported_table("easy_positive_table1")
    assert ep1.index.names == ["dataset", "backbone", None]
    assert ep1.loc[("CAR", "GoogLeNet", "Proxy-NCA"), "R@1"] == 73.2
    assert ep1.loc[("CUB", "ResNet-50", "triplet")].isna().all()
    p2 = reported_table("profs_table2")
    assert p2.index.names == ["loss", "variant"] and p2.columns.names == ["dataset", "metric"]
    assert math.isnan(p2.loc[("SoftTriple", "plain"), ("SOP", "R@1000")])
    assert p2.loc[("Margin", "PROFS"), ("CUB-200-2011", "R@1")] == 64.9
    alpha = reported_table("ssdml_figure2_alpha")
    assert alpha.index.name == "alpha (degrees)" and alpha.index.dtype == np.float64
    assert list(alpha.index) == [35.0, 40.0, 45.0, 55.0] and alpha.loc[45.0, "R@1"] == 45.7
    fl3 = reported_table("facility_location_table3")
    assert fl3.loc["Clustering", "R@100"] == 93.23


def _write(folder, text):
    (folder / "t.csv").write_text(text, encoding="utf-8")


def test_the_format_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(reported, "REPORTED_DIR", tmp_path)
    _write(tmp_path, "# index: m\n# columns: -\nm,a\nx,1\n")
    with pytest.raises(ValueError, match="source"):
        reported_table("t")
    _write(tmp_path, "# source: s\n# index: m\n# columns: -\nm,a,b\nx,1\n")
    with pytest.raises(ValueError, match="rows"):
        reported_table("t")
    _write(tmp_path, "# source: s\n# index: m\n# columns: -\nm,a,b\nx,1,\ny,2.5,z\n")
    t = reported_table("t")
    assert t["a"].tolist() == [1.0, 2.5] and t["b"].tolist()[1] == "z" and t.index.name == "m"
    with pytest.raises(KeyError, match="choose one of"):
        reported_table("nothing")
