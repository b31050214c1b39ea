"""What the book's runs cost, per chapter, read from the run records a profile left in ``results/``.

    python benchmarks/book.py                     # the committed default-profile records
    python benchmarks/book.py --profile smoke --results /path/to/results
    python benchmarks/book.py --measure --out benchmarks/results/book_cpu.txt
                                                  # also time a step here
    python benchmarks/book.py --convolutions --out benchmarks/results/book_convolutions_cpu.txt

One row per chapter: runs, epochs trained, images processed, training and evaluation seconds as
the records measured them (on the machines and thread counts that trained them, named in the
``threads`` column), and the total, and ``outside %``: the share of the training steps' time spent
outside the model's forward and backward pass (sampler and batch gather, hooks, loss, optimiser
step, bookkeeping), from the per-phase seconds (:class:`dmlnb.training.PhaseClock`) that runs
trained on the CPU record. A second table splits the steps' time into those phases per chapter, so
the next hotspot is visible. Records written before the loop timed its phases leave both empty
("-"). Images count only the epochs whose record holds img/s (the SSDML algorithm's own runs
record none). This is the cost of regenerating the chapter with ``retrain=True`` on a machine
like the one that made the records; re-rendering from the records costs none of it.

``--measure`` also times the default profile's training step on this machine's CPU (the book's
convnet, 28x28 Omniglot-sized images, batch 128, semi-hard triplet loss), each way in a fresh
process: a bare PyTorch loop with the model in the default (NCHW) and in the channels_last
memory format with glibc's default allocation, the channels_last loop with freed memory kept for
reuse (:mod:`dmlnb.allocator`; with ``--compile`` also compiled by ``torch.compile``: inductor,
which needs a C++ compiler), the same with each block's ReLU before its max-pool (the
literature's order, which :class:`dmlnb.models.ConvNet` computes bit for bit with the pool first),
the same with the 14x14 convolution computed by NNPACK's fast transform where torch has NNPACK
(fewer multiplications, other rounding: what that would save a step, :func:`fast_transform_layers`),
``dmlnb.train`` as the book runs it, and two independent runs side by side in two processes of one
thread each (what the launcher does with a chapter's runs), next to one run on all threads.

``--convolutions`` times each pass the step makes through each convolution of the network, on
one thread, against this CPU's float32 matrix multiply (:func:`convolution_table`), and the whole
step beside them: how much of a step is convolution arithmetic, and how near that arithmetic
runs to what the CPU can do.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from timing import median_ms  # benchmarks/timing.py, beside this script

from dmlnb.training import PhaseClock

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def run_costs(record: dict) -> dict[str, float]:
    """Epochs, images, training and evaluation seconds of one run record's history."""
    rows = [r for r in record.get("history", []) if isinstance(r, dict) and r.get("epoch", 0) > 0]
    train = sum(r.get("train_seconds") or 0.0 for r in rows)
    timed = [
        r for r in rows if r.get("images_per_second") is not None
    ]  # SSDML records hold no img/s
    images = (
        sum(r["images_per_second"] * (r.get("train_seconds") or 0.0) for r in timed)
        if timed
        else float("nan")
    )
    evaluation = sum(
        (r.get("metrics") or {}).get("eval_seconds", 0.0) for r in record.get("history", [])
    )
    phases = {
        p: sum((r.get("step_seconds") or {}).get(p, 0.0) for r in rows) for p in PhaseClock.PHASES
    }
    return {"epochs": len(rows), "images": images, "train s": train, "eval s": evaluation, **phases}


def chapter_table(results: Path, profile: str) -> pd.DataFrame:
    """One row per chapter folder of ``results`` holding records of ``profile``."""
    rows = []
    for chapter in sorted(p for p in results.iterdir() if (p / profile).is_dir()):
        costs, threads = [], set()
        for path in sorted((chapter / profile).rglob("record.json")):
            record = json.loads(path.read_text())
            costs.append(run_costs(record))
            threads.add(str((record.get("environment") or {}).get("threads", "?")))
        if not costs:
            continue
        frame = pd.DataFrame(costs)
        rows.append(
            {
                "chapter": chapter.name,
                "runs": len(costs),
                "epochs": int(frame["epochs"].sum()),
                "images (M)": frame["images"].sum() / 1e6,
                "train min": frame["train s"].sum() / 60,
                "eval min": frame["eval s"].sum() / 60,
                "threads": ",".join(sorted(threads)),
                **{p: frame[p].sum() for p in PhaseClock.PHASES},
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        table["total min"] = table["train min"] + table["eval min"]
        total = table.sum(numeric_only=True).to_dict()
        table = pd.concat(
            [table, pd.DataFrame([{**total, "chapter": "all", "threads": ""}])], ignore_index=True
        )
        table[["runs", "epochs"]] = table[["runs", "epochs"]].astype(int)
        timed = table[list(PhaseClock.PHASES)].sum(axis=1)
        inside = table["forward"] + table["backward"]
        table["outside %"] = (100 * (1 - inside / timed)).where(timed > 0)
    return table


def phase_shares(table: pd.DataFrame) -> pd.DataFrame:
    """Per chapter, each step phase's share (%) of the timed steps' seconds (chapters whose
    records hold no phase timings are left out)."""
    phases = table.set_index("chapter")[list(PhaseClock.PHASES)]
    timed = phases.sum(axis=1)
    return (100 * phases.div(timed, axis=0))[timed > 0]


# -------------------------------------------------------------------------- the step, measured here


def _step_setup(channels_last: bool, steps: int):  # noqa: ANN202
    """(config, train set, model) of a default-profile run on fabricated Omniglot-sized input."""
    from dmlnb.data import InMemoryDataset
    from dmlnb.models import configured_model
    from dmlnb.profiles import make_config

    config = make_config(
        "default",
        {"steps_per_epoch": steps, "epochs": 2, "channels_last": channels_last, "device": "cpu"},
    )
    g = torch.Generator().manual_seed(0)
    train_set = InMemoryDataset(
        torch.randn(2720, 1, 28, 28, generator=g), torch.arange(2720) % 136
    )  # omniglot-small's size
    torch.manual_seed(0)
    return config, train_set, configured_model(config, train_set.input_shape)


def relu_before_pool(net: torch.nn.Module) -> None:
    """Reorder the blocks of ``net`` (a :class:`dmlnb.models.ConvNet`) in place to the
    literature's conv -> BN -> ReLU -> maxpool: the network :class:`~dmlnb.models.ConvNet`
    computes, with its ReLU on four times the elements."""
    layers: list[torch.nn.Module] = []
    for layer in net.body:
        if (
            isinstance(layer, torch.nn.ReLU)
            and layers
            and isinstance(layers[-1], torch.nn.MaxPool2d)
        ):
            layers.insert(len(layers) - 1, layer)
        else:
            layers.append(layer)
    net.body = torch.nn.Sequential(*layers)


class _FastTransformConvolution(torch.autograd.Function):
    """A stride-1 "same" 3x3 convolution without bias whose forward pass and input gradient are
    NNPACK's fast transform (on NCHW copies, converted back to channels_last) and whose weight
    gradient is the direct one (``torch.ops.aten.convolution_backward``):
    :func:`convolution_table`'s NNPACK column inside a whole step. It rounds differently from the
    direct convolution."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        ctx.save_for_backward(x, weight)
        y = torch._nnpack_spatial_convolution(
            x.contiguous(), weight.contiguous(), None, [1, 1]
        )  # (B, C_out, H, W)
        return y.contiguous(memory_format=torch.channels_last)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
        x, weight = ctx.saved_tensors
        grad_x = torch._nnpack_spatial_convolution(
            grad.contiguous(), flipped_kernel(weight), None, [1, 1]
        )  # (B, C_in, H, W)
        grad_w = torch.ops.aten.convolution_backward(
            grad, x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]
        )[1]
        return grad_x.contiguous(memory_format=torch.channels_last), grad_w


class _FastTransformConv2d(torch.nn.Conv2d):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FastTransformConvolution.apply(x, self.weight)


def fast_transform_layers(model: torch.nn.Module, size: int = 14) -> list[str]:
    """Replace in place each 3x3 stride-1 "same" convolution of ``model`` (the default network on
    28x28 images) whose input is ``size`` x ``size`` by one computed with NNPACK's fast transform
    (:class:`_FastTransformConvolution`), keeping its weight; the names replaced. The
    14x14 layer is the one :func:`convolution_table` finds faster that way (the 7x7 one is not)."""
    names = [name for name, _, shape in convolution_shapes(model, batch=2) if shape[-1] == size]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        old = getattr(parent, child)
        if (
            old.kernel_size != (3, 3)
            or old.stride != (1, 1)
            or old.padding != (1, 1)
            or old.bias is not None
        ):
            raise ValueError(f"{name} is not a 3x3 stride-1 'same' convolution without bias: {old}")
        new = _FastTransformConv2d(old.in_channels, old.out_channels, 3, padding=1, bias=False)
        new.weight = old.weight
        setattr(parent, child, new)
    return names


def bare_step_rate(
    channels_last: bool,
    steps: int,
    compiled: bool = False,
    kept: bool = False,
    relu_first: bool = False,
    fast_transform: bool = False,
) -> float:
    """img/s of a bare loop with the loop's batches (:class:`~dmlnb.samplers.MPerClassSampler`,
    the profile's images per class), model, semi-hard triplet loss and Adam, without checks,
    hooks or records; the second pass of ``steps`` steps (the first warms up, and with
    ``compiled`` compiles the model with ``torch.compile``'s default backend, inductor). With
    ``kept`` the process first keeps freed memory for reuse (:mod:`dmlnb.allocator`), as
    :func:`dmlnb.training.train` does; without it glibc's default allocation (this process must
    not have changed it before). With ``relu_first`` the network's blocks run in the literature's
    order (:func:`relu_before_pool`); with ``fast_transform`` its 14x14 convolution is computed by
    NNPACK's fast transform (:func:`fast_transform_layers`)."""
    from dmlnb.allocator import keep_freed_memory
    from dmlnb.losses import TripletLoss
    from dmlnb.pairs import pair_masks
    from dmlnb.samplers import MPerClassSampler

    if kept:
        keep_freed_memory()
    config, train_set, model = _step_setup(
        channels_last, steps
    )  # the model in the config's memory format
    if relu_first:
        relu_before_pool(model.trunk)
    if fast_transform:
        if not torch.backends.nnpack.is_available():  # asking also initialises NNPACK
            raise RuntimeError("this torch has no NNPACK: the fast-transform way cannot run here")
        fast_transform_layers(model)
    step_model = torch.compile(model) if compiled else model
    loss_fn = TripletLoss(mining="semihard")
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=config.lr,
        betas=tuple(config.betas),
        weight_decay=config.weight_decay,
    )
    sampler = MPerClassSampler(
        train_set.labels, m=config.m_per_class, batch_size=config.batch_size, seed=0
    )

    def endless() -> Iterator[
        list[int]
    ]:  # the sampler's epochs one after another, as the loop cycles them
        for epoch in itertools.count():
            sampler.set_epoch(epoch)
            yield from sampler

    batches = endless()

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            x, y = train_set.get_batch(torch.as_tensor(next(batches)))
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss = loss_fn.compute(step_model(x), y, pair_masks(y))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return steps * config.batch_size / (time.perf_counter() - t0)

    run()  # warm-up
    return run()


def loop_step_rate(steps: int) -> float:
    """img/s of the second epoch of :func:`dmlnb.training.train` at the default profile's settings
    (which keeps freed memory for reuse on the CPU, :mod:`dmlnb.allocator`)."""
    from dmlnb.losses import TripletLoss
    from dmlnb.training import train

    config, train_set, model = _step_setup(True, steps)
    record = train(model, TripletLoss(mining="semihard"), train_set, None, config, progress=False)
    return float(record.data["history"][-1]["images_per_second"])


#: The ways of running the step, each measured in a fresh process (glibc's allocation settings are
#: process-wide and stay once :mod:`dmlnb.allocator` changed them): key -> (label, img/s of steps).
WAYS: dict[str, tuple[str, Callable[[int], float]]] = {
    "nchw": ("bare loop, NCHW", lambda steps: bare_step_rate(False, steps)),
    "channels-last": ("bare loop, channels_last", lambda steps: bare_step_rate(True, steps)),
    "kept": (
        "bare loop, channels_last, freed memory kept",
        lambda steps: bare_step_rate(True, steps, kept=True),
    ),
    "compiled": (
        "bare loop, channels_last, freed memory kept, torch.compile",
        lambda steps: bare_step_rate(True, steps, compiled=True, kept=True),
    ),
    "relu-first": (
        "bare loop, channels_last, freed memory kept, ReLU before max-pool",
        lambda steps: bare_step_rate(True, steps, kept=True, relu_first=True),
    ),
    "fast-transform": (
        "bare loop, channels_last, freed memory kept, NNPACK for the 14x14 convolution",
        lambda steps: bare_step_rate(True, steps, kept=True, fast_transform=True),
    ),
    "train": ("dmlnb.train (channels_last, freed memory kept)", loop_step_rate),
}


def way_rate(key: str, steps: int, processes: int = 1) -> float:
    """Summed img/s of ``processes`` fresh processes (this script with ``--one-way``) running the
    way ``key`` at once; one process uses this process's threads, several use one thread each."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one-way", key, str(steps)]
    threads = torch.get_num_threads() if processes == 1 else 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(processes)
    ]
    outputs = [worker.communicate()[0] for worker in workers]
    for worker in workers:
        if worker.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed with exit status {worker.returncode}")
    return sum(float(out.split()[-1]) for out in outputs)


def step_table(steps: int, repeats: int = 1, compiled: bool = False) -> pd.DataFrame:
    """The default profile's training step on this CPU, img/s per way of running it: the median
    and the range of ``repeats`` rounds, each round running every way once in turn (so a change
    in the machine's load falls on every way alike); with ``compiled`` also the bare
    channels_last loop compiled by ``torch.compile`` (its compilation, in the warm-up pass,
    takes tens of seconds a round)."""
    threads = torch.get_num_threads()
    keys = [
        "nchw",
        "channels-last",
        "kept",
        *(["compiled"] if compiled else []),
        "relu-first",
        *(["fast-transform"] if torch.backends.nnpack.is_available() else []),
        "train",
    ]
    ways = [(WAYS[key][0], threads, key, 1) for key in keys]
    ways.append(("2 runs of dmlnb.train at once, 2 processes x 1 thread (sum)", 2, "train", 2))
    rates = [
        [way_rate(key, steps, processes) for _, _, key, processes in ways] for _ in range(repeats)
    ]  # (repeats, ways)
    rows = []
    for i, (way, used, _, _) in enumerate(ways):
        mine = sorted(r[i] for r in rates)
        rows.append((way, used, float(np.median(mine)), mine[0], mine[-1]))
    return pd.DataFrame(rows, columns=["way", "threads", "img/s", "min", "max"])


# ---------------------------------------------------------------- the convolutions, against the CPU


def matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of a float32 ``(size, size) @ (size, size)`` product on the current threads: this
    CPU's rate for dense float32 arithmetic (MKL's tuned kernel on x86), the most a direct
    convolution, which does the same multiply-adds, can be expected to reach."""
    g = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(size, size, generator=g),
        torch.randn(size, size, generator=g),
    )  # (size, size) each
    return 2 * size**3 / median_ms(lambda: a @ b, CPU, repeats) * 1e3 / 1e9


def convolution_shapes(
    model: torch.nn.Module, batch: int = 128
) -> list[tuple[str, torch.nn.Conv2d, torch.Size]]:
    """Each convolution of ``model`` (a network of 28x28 one-channel images) with the shape of its
    input at ``batch`` images: ``(name, layer, (batch, C_in, H, W))``, in the order a forward pass
    applies them. The probe runs in eval mode, so batch-norm statistics stay as they were."""
    shapes: list[tuple[str, torch.nn.Conv2d, torch.Size]] = []
    hooks = [
        layer.register_forward_hook(
            lambda layer, inputs, _, name=name: shapes.append((name, layer, inputs[0].shape))
        )
        for name, layer in model.named_modules()
        if isinstance(layer, torch.nn.Conv2d)
    ]
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(batch, 1, 28, 28).contiguous(memory_format=torch.channels_last))
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    return shapes


def convolution_inputs(batch: int = 128) -> list[tuple[str, torch.nn.Conv2d, torch.Size]]:
    """:func:`convolution_shapes` of the default profile's network (:class:`dmlnb.models.ConvNet`
    on 28x28 Omniglot-sized images)."""
    return convolution_shapes(_step_setup(True, 1)[2], batch)


def flipped_kernel(weight: torch.Tensor) -> torch.Tensor:
    """The kernel whose convolution of a stride-1 "same" convolution's output gradient is that
    convolution's input gradient: ``weight`` ``(C_out, C_in, k_h, k_w)`` with its two channel
    axes swapped and its taps flipped, ``(C_in, C_out, k_h, k_w)``."""
    return weight.transpose(0, 1).flip(2, 3).contiguous()


def convolution_table(batch: int = 128, repeats: int = 5) -> pd.DataFrame:
    """Milliseconds and GFLOP/s of each pass the training step makes through each convolution of
    the default network (:func:`convolution_inputs`), on one thread (what each of the launcher's
    processes has), in channels_last as the step runs them: the forward pass, the gradient of the
    input (not computed for the first layer, whose input is the images) and of the weight, each
    ``torch.ops.aten.convolution_backward`` alone. GFLOP/s counts a direct convolution's
    ``2 B C_out C_in k_h k_w H_out W_out`` multiply-adds, so it compares with
    :func:`matmul_gflops`, the last row. Where torch has NNPACK, ``NNPACK ms`` times the forward
    pass and the input gradient (:func:`flipped_kernel`) by NNPACK's fast transform instead, on
    NCHW tensors, conversions not counted (not for a kernel of one output channel, which NNPACK
    refuses): a rate above the matrix multiply's
    is fewer multiplications, not faster arithmetic. The results differ from the direct
    convolution's by float rounding; the book's network trains with the direct ones."""
    from dmlnb.allocator import keep_freed_memory

    keep_freed_memory()  # as dmlnb.train does: no page faults in the timings
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    nnpack = torch.backends.nnpack.is_available()  # asking also initialises NNPACK
    g = torch.Generator().manual_seed(0)
    rows = []
    try:
        for index, (name, layer, shape) in enumerate(convolution_inputs(batch)):
            weight = layer.weight.detach().contiguous()  # (C_out, C_in, k_h, k_w)
            x = torch.randn(shape, generator=g).contiguous(
                memory_format=torch.channels_last
            )  # (B, C_in, H, W)
            y = torch.nn.functional.conv2d(
                x, weight, None, layer.stride, layer.padding
            )  # (B, C_out, H_out, W_out)
            grad = torch.randn(y.shape, generator=g).contiguous(memory_format=torch.channels_last)
            flops = 2 * y.numel() * weight[0].numel()
            same = layer.stride == (1, 1) and layer.padding == tuple(
                k // 2 for k in layer.kernel_size
            )

            def backward(mask: list[bool]) -> Callable[[], object]:
                return lambda: torch.ops.aten.convolution_backward(
                    grad,
                    x,
                    weight,
                    None,
                    layer.stride,
                    layer.padding,
                    layer.dilation,
                    False,
                    [0, 0],
                    1,
                    mask,
                )

            passes = [
                (
                    "forward",
                    lambda: torch.nn.functional.conv2d(
                        x, weight, None, layer.stride, layer.padding
                    ),
                    (x.contiguous(), weight),
                ),
                (
                    "input gradient",
                    backward([True, False, False]) if index else None,
                    (grad.contiguous(), flipped_kernel(weight)),
                ),
                ("weight gradient", backward([False, True, False]), None),
            ]
            for kind, direct, transform in passes:
                if direct is None:
                    continue
                ms = median_ms(direct, CPU, repeats)
                fast = float("nan")
                if (
                    nnpack and same and transform is not None and transform[1].shape[0] > 1
                ):  # NNPACK fails for 1 output channel
                    inputs, kernel = transform  # (B, C, H, W) NCHW, (C', C, k_h, k_w)
                    fast = median_ms(
                        lambda: torch._nnpack_spatial_convolution(
                            inputs, kernel, None, list(layer.padding)
                        ),
                        CPU,
                        repeats,
                    )
                rows.append((f"{name} {tuple(shape[1:])}", kind, ms, flops / ms / 1e6, fast))
        rows.append(
            (
                "float32 matrix multiply, 1024 x 1024",
                "-",
                float("nan"),
                matmul_gflops(repeats=repeats),
                float("nan"),
            )
        )
    finally:
        torch.set_num_threads(threads)
    return pd.DataFrame(
        rows, columns=["convolution (C_in, H, W)", "pass", "ms", "GFLOP/s", "NNPACK ms"]
    )


def one_thread_step_ms(steps: int) -> float:
    """Milliseconds of one step of 128 images of :func:`dmlnb.training.train` on one thread
    (:func:`loop_step_rate`), to set beside the convolutions' passes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return 128 / loop_step_rate(steps) * 1e3
    finally:
        torch.set_num_threads(threads)


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :func:`platform.processor` says."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--profile", default="default")
    parser.add_argument(
        "--measure", action="store_true", help="also time the default profile's step on this CPU"
    )
    parser.add_argument(
        "--steps", type=int, default=40, help="timed steps per way (with --measure)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rounds of every way (with --measure); the median is shown",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="with --measure, also time the bare loop compiled by torch.compile (needs a C++ "
        "compiler)",
    )
    parser.add_argument(
        "--convolutions",
        action="store_true",
        help="also time each pass through each of the network's convolutions on one thread, "
        "against this CPU's float32 matrix multiply",
    )
    parser.add_argument("--out", type=Path, help="also write what is printed here (text)")
    parser.add_argument(
        "--one-way", nargs=2, metavar=("WAY", "STEPS"), help=argparse.SUPPRESS
    )  # way_rate's worker
    args = parser.parse_args(argv)
    if args.one_way is not None:
        key, steps = args.one_way[0], int(args.one_way[1])
        if key == "train":
            loop_step_rate(2)  # warm-up
        print(WAYS[key][1](steps))
        return pd.DataFrame()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text)
        lines.append(text)

    table = chapter_table(args.results, args.profile)
    say(f"run records under {args.results} at profile {args.profile!r}")
    if table.empty:
        say("no run records")
    else:
        columns = [
            "chapter",
            "runs",
            "epochs",
            "images (M)",
            "train min",
            "eval min",
            "threads",
            "total min",
            "outside %",
        ]
        say(table[columns].to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
        shares = phase_shares(table)
        say("\nshare of the training steps' time per phase (%), runs trained on the CPU:")
        say(
            shares.to_string(float_format=lambda v: f"{v:.1f}")
            if not shares.empty
            else "no record holds phase timings yet"
        )
    if args.measure:
        say(
            f"\nthe default profile's step on this CPU ({args.steps} steps of 128 timed per way; "
            f"median of {args.repeats} rounds; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, {time.strftime('%Y-%m-%d')}):"
        )
        say(
            step_table(args.steps, args.repeats, args.compile).to_string(
                index=False, float_format=lambda v: f"{v:.0f}"
            )
        )
    if args.convolutions:
        convolutions = convolution_table(repeats=args.repeats)
        say(
            "\nthe default network's convolutions, batch 128, channels_last, one thread, on this "
            f"CPU ({cpu_name()}; median of {args.repeats} calls; torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d')}):"
        )
        say(convolutions.to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
        say(
            f"the passes above sum to {convolutions['ms'].sum():.0f} ms (the direct "
            f"convolutions); a step of dmlnb.train on one thread ({args.steps} steps timed) takes "
            f"{one_thread_step_ms(args.steps):.0f} ms"
        )
    if args.out is not None:
        args.out.write_text(
            "$ python benchmarks/book.py "
            + " ".join(sys.argv[1:] if argv is None else argv)
            + "\n"
            + "\n".join(lines)
            + "\n"
        )
    return table


if __name__ == "__main__":
    main()
