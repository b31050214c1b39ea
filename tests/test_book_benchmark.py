"""benchmarks/book.py sums run records per chapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from scripts import benchmark_script


@pytest.fixture
def book(monkeypatch):
    """benchmarks/book.py as a module."""
    return benchmark_script("book", monkeypatch)


def _record(path: Path, epochs: list[tuple[float, float, float]], threads: int = 1) -> None:
    """A record with one history row per ``(train_seconds, images_per_second, eval_seconds)``."""
    history = [{"epoch": 0, "train_seconds": 0.0, "metrics": {"eval_seconds": 1.0}}]
    history += [
        {
            "epoch": i + 1,
            "train_seconds": t,
            "images_per_second": ips,
            "metrics": {"eval_seconds": e},
        }
        for i, (t, ips, e) in enumerate(epochs)
    ]
    path.mkdir(parents=True)
    (path / "record.json").write_text(
        json.dumps({"history": history, "environment": {"threads": threads}})
    )


def test_chapter_costs_add_up_per_chapter_and_in_total(tmp_path, book):
    _record(tmp_path / "01_a" / "default" / "r1", [(60.0, 100.0, 6.0), (60.0, 100.0, 6.0)])
    _record(tmp_path / "01_a" / "default" / "r2", [(120.0, 50.0, 0.0)], threads=2)
    _record(tmp_path / "02_b" / "default" / "deeper" / "r3", [(30.0, 10.0, 54.0)])
    _record(tmp_path / "02_b" / "smoke" / "ignored", [(999.0, 1.0, 0.0)])
    table = book.chapter_table(tmp_path, "default").set_index("chapter")
    a, b, total = table.loc["01_a"], table.loc["02_b"], table.loc["all"]
    assert (a["runs"], a["epochs"], a["threads"]) == (2, 3, "1,2")
    assert a["train min"] == 4.0 and a["eval min"] == (1.0 + 12.0 + 1.0) / 60
    assert a["images (M)"] == (12_000 + 6_000) / 1e6
    assert b["train min"] == 0.5 and b["eval min"] == (1.0 + 54.0) / 60
    assert total["runs"] == 3 and total["total min"] == a["total min"] + b["total min"]


def test_outside_share_and_phase_table_come_from_the_recorded_step_phases(tmp_path, book):
    _record(
        tmp_path / "01_a" / "default" / "old", [(60.0, 100.0, 6.0)]
    )  # written before phase timings
    _record(tmp_path / "02_b" / "default" / "r1", [(10.0, 100.0, 1.0)])
    record_path = tmp_path / "02_b" / "default" / "r1" / "record.json"
    record = json.loads(record_path.read_text())
    phases = {
        "data": 1.0,
        "hooks": 0.5,
        "forward": 3.0,
        "loss": 1.5,
        "backward": 3.0,
        "optimizer": 0.5,
        "bookkeeping": 0.5,
    }
    record["history"][1]["step_seconds"] = phases
    record_path.write_text(json.dumps(record))
    module = book
    table = module.chapter_table(tmp_path, "default").set_index("chapter")
    assert table.loc["02_b", "outside %"] == 100 * (1 - 6.0 / 10.0)
    assert table.loc["all", "outside %"] == 100 * (
        1 - 6.0 / 10.0
    )  # the untimed chapter adds no phase seconds
    assert table["outside %"].isna()["01_a"]
    shares = module.phase_shares(table.reset_index())
    assert list(shares.index) == ["02_b", "all"]
    assert shares.loc["02_b", "loss"] == 15.0 and abs(shares.loc["02_b"].sum() - 100.0) < 1e-9


def _ways(compiled: bool) -> list[str]:
    fast = (
        ["bare loop, channels_last, freed memory kept, NNPACK for the 14x14 convolution"]
        if torch.backends.nnpack.is_available()
        else []
    )
    return [
        "bare loop, NCHW",
        "bare loop, channels_last",
        "bare loop, channels_last, freed memory kept",
        *(["bare loop, channels_last, freed memory kept, torch.compile"] if compiled else []),
        "bare loop, channels_last, freed memory kept, ReLU before max-pool",
        *fast,
        "dmlnb.train (channels_last, freed memory kept)",
        "2 runs of dmlnb.train at once, 2 processes x 1 thread (sum)",
    ]


def test_measured_step_table_runs_every_way_on_the_cpu_the_compiled_loop_on_request(book):
    """Every way is measured once (one call: torch.compile's warm-up alone takes about a minute
    on two cores, so the table without it is checked on stubbed rates below)."""
    table = book.step_table(steps=1, repeats=1, compiled=True)
    assert list(table["way"]) == _ways(compiled=True)
    assert (table["img/s"] > 0).all() and table["img/s"].notna().all()
    assert (table["min"] <= table["img/s"]).all() and (table["img/s"] <= table["max"]).all()


def test_the_step_table_leaves_the_compiled_loop_out_unless_asked(book, monkeypatch):
    rates = iter(range(1, 100))
    monkeypatch.setattr(book, "way_rate", lambda key, steps, processes: float(next(rates)))
    table = book.step_table(steps=1, repeats=2)
    assert list(table["way"]) == _ways(compiled=False)
    n = len(table)  # two rounds, every way once a round: way i got rates i + 1 and n + i + 1
    assert list(table["min"]) == [float(i + 1) for i in range(n)]
    assert list(table["max"]) == [float(n + i + 1) for i in range(n)]


def test_the_flipped_kernel_turns_a_convolution_into_its_input_gradient(book):
    g = torch.Generator().manual_seed(0)
    x, weight = (
        torch.randn(3, 5, 9, 9, generator=g),
        torch.randn(4, 5, 3, 3, generator=g),
    )  # (B, C_in, H, W), (C_out, C_in, 3, 3)
    grad = torch.randn(3, 4, 9, 9, generator=g)  # the output's gradient, (B, C_out, H, W)
    expected = torch.ops.aten.convolution_backward(
        grad, x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]
    )[0]
    kernel = book.flipped_kernel(weight)
    assert kernel.shape == (5, 4, 3, 3)
    torch.testing.assert_close(torch.nn.functional.conv2d(grad, kernel, padding=1), expected)
    if torch.backends.nnpack.is_available():  # what the table times in its place
        torch.testing.assert_close(
            torch._nnpack_spatial_convolution(grad, kernel, None, [1, 1]),
            expected,
            rtol=1e-4,
            atol=1e-4,
        )


@pytest.mark.skipif(not torch.backends.nnpack.is_available(), reason="this torch has no NNPACK")
def test_the_fast_transform_layer_computes_the_direct_convolution_and_its_gradients(book):
    from dmlnb.models import build_model

    torch.manual_seed(0)
    direct = build_model("convnet", (1, 28, 28), 16, normalize=True).to(
        memory_format=torch.channels_last
    )
    torch.manual_seed(0)
    fast = build_model("convnet", (1, 28, 28), 16, normalize=True).to(
        memory_format=torch.channels_last
    )
    assert book.fast_transform_layers(fast) == ["trunk.body.4"]  # the one 14x14 convolution
    assert (
        type(fast.trunk.body[4]).__name__ == "_FastTransformConv2d"
        and type(fast.trunk.body[8]) is torch.nn.Conv2d
    )
    x = torch.randn(6, 1, 28, 28, generator=torch.Generator().manual_seed(1)).contiguous(
        memory_format=torch.channels_last
    )
    out_direct, out_fast = direct(x), fast(x)  # (6, 16)
    torch.testing.assert_close(out_fast, out_direct, rtol=1e-4, atol=1e-5)
    out_direct.square().sum().backward()
    out_fast.square().sum().backward()
    for (name, a), b in zip(
        direct.named_parameters(), fast.parameters()
    ):  # every layer's gradient, through the replaced one
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-3, atol=1e-4, msg=name)
    with pytest.raises(ValueError, match="not a 3x3 stride-1"):
        net = build_model("convnet", (1, 28, 28), 16)
        net.trunk.body[4] = torch.nn.Conv2d(64, 64, 3, padding=1, bias=True)
        book.fast_transform_layers(net)


def test_the_convolution_table_times_every_pass_the_step_makes(book):
    threads = torch.get_num_threads()
    table = book.convolution_table(batch=8, repeats=1)
    assert torch.get_num_threads() == threads
    layers = [name for name, _, _ in book.convolution_inputs(8)]
    assert (
        len(layers) == 4 and table["convolution (C_in, H, W)"].iloc[0] == f"{layers[0]} (1, 28, 28)"
    )
    passes = table.groupby("convolution (C_in, H, W)", sort=False)["pass"].apply(list).tolist()
    assert passes[0] == ["forward", "weight gradient"]  # the images need no gradient
    assert passes[1:4] == [["forward", "input gradient", "weight gradient"]] * 3
    assert passes[4] == ["-"] and table["GFLOP/s"].gt(0).all()
    convolutions = table.iloc[:-1]
    assert (
        convolutions["ms"].gt(0).all()
        and convolutions.loc[convolutions["pass"] == "weight gradient", "NNPACK ms"].isna().all()
    )
    assert (
        convolutions.loc[convolutions["pass"] != "weight gradient", "NNPACK ms"].notna().all()
        == torch.backends.nnpack.is_available()
    )
