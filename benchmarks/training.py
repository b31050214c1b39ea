"""Paper-profile training speed on one device, next to a bare-PyTorch loop and PML.

    python benchmarks/training.py             # the first CUDA device, else the CPU (small sizes)
    python benchmarks/training.py --out benchmarks/results/training_h100.txt
    python benchmarks/training.py --quick --device cpu
                                              # tiny sizes: checks the script runs (CI does)

Prints, for one device:

1. **Training, in-memory input** (images already on the device): img/s of each paper-profile
   backbone through :func:`dmlnb.training.train` at its defaults next to a bare PyTorch loop
   with the same model, loss and precision; for the first backbone, the loop's speed-ups switched
   on one at a time (host reads every step -> every 50 steps, foreach -> fused Adam, cuDNN
   autotuning, ``torch.compile``).
2. **Training, file-backed input** (``benchmarks/input_pipeline.py``): a fabricated tree of JPEGs
   read through PIL + DataLoader workers and through the decoded cache cropped on the device
   (:mod:`dmlnb.data.cached_images`), alone and feeding training, next to in-memory input.
3. **Facility-location loss-augmented inference** ms per batch size, on the device and on the
   CPU of the same machine.
4. **Losses**: forward+backward of every loss beside pytorch-metric-learning
   (``benchmarks/losses.py``), ours timed as the training loop runs it on a GPU (value checks
   deferred).

Throughput is measured from the training records' ``images_per_second`` of the second epoch
(the first is warm-up: cuDNN autotuning, compilation); each configuration runs ``--steps``
steps per epoch.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import math
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import facility_location as fl_benchmark  # benchmarks/*.py beside this script
import input_pipeline
import losses as loss_benchmark
import pandas as pd
import torch
from timing import median_ms, sync
from torch import nn

from dmlnb import training
from dmlnb.data import InMemoryDataset
from dmlnb.losses import TripletLoss
from dmlnb.losses.facility_location import loss_augmented_inference
from dmlnb.models import build_model
from dmlnb.pairs import pair_masks
from dmlnb.profiles import make_config
from dmlnb.samplers import MPerClassSampler
from dmlnb.training import loop

# ------------------------------------------------------------------------------ training speed


def _synthetic_set(n: int, size: int, classes: int, device: torch.device) -> InMemoryDataset:
    """``n`` random normalised images ``(n, 3, size, size)`` of ``classes``
    classes, on ``device``."""
    g = torch.Generator().manual_seed(0)
    images = torch.randn(n, 3, size, size, generator=g).to(device)  # (n, 3, S, S)
    return InMemoryDataset(images, torch.arange(n) % classes)


def _config(backbone: str, batch: int, steps: int, size: int, **changes: object):
    return make_config(
        "paper",
        {
            "model": backbone,
            "pretrained": False,
            "batch_size": batch,
            "steps_per_epoch": steps,
            "epochs": 2,
            "eval_every": 1,
            "num_workers": 0,
            "dataset_options": {"image_size": size},
            **changes,
        },
    )


def _model(config, size: int) -> nn.Module:  # noqa: ANN001
    torch.manual_seed(0)
    return build_model(
        config.model,
        (3, size, size),
        config.embedding_dim,
        normalize=True,
        pretrained=False,
        width=config.width,
    )


def train_images_per_second(config, train_set) -> float:  # noqa: ANN001
    """img/s of the second epoch of :func:`dmlnb.training.train` (the first warms up)."""
    size = train_set.input_shape[-1]
    record = training.train(
        _model(config, size),
        TripletLoss(mining="semihard"),
        train_set,
        None,
        config,
        progress=False,
    )
    return float(record.data["history"][-1]["images_per_second"])


def bare_images_per_second(config, train_set, device: torch.device) -> float:  # noqa: ANN001
    """img/s of a bare PyTorch loop: same model, loss, sampler, precision and memory format; Adam
    with PyTorch's default implementation; no checks, no records."""
    size = train_set.input_shape[-1]
    model = (
        _model(config, size).to(device).to(memory_format=torch.channels_last)
    )  # as the loop does
    loss_fn = TripletLoss(mining="semihard").to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sampler = MPerClassSampler(
        train_set.labels.cpu(), m=config.m_per_class, batch_size=config.batch_size
    )
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if device.type == "cuda"
        else contextlib.nullcontext()
    )
    batches = _endless(sampler)

    def epoch() -> float:
        sync(device)
        t0 = time.perf_counter()
        for _ in range(config.steps_per_epoch):
            index = torch.as_tensor(next(batches))
            x, y = train_set.get_batch(index)
            x = x.contiguous(memory_format=torch.channels_last)
            with autocast:
                out = model(x)
            loss = loss_fn.compute(out.float(), y, pair_masks(y))  # no checks
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        sync(device)
        return config.batch_size * config.steps_per_epoch / (time.perf_counter() - t0)

    epoch()  # warm-up
    return epoch()


def _endless(sampler: MPerClassSampler) -> Iterator[list[int]]:
    """The sampler's batches, epoch after epoch."""
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        yield from sampler


@contextlib.contextmanager
def _patched(owner: object, name: str, value: object) -> Iterator[None]:
    """``owner.name`` replaced by ``value`` for the duration of the block."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _reads_every_step() -> contextlib.AbstractContextManager:
    """The training loop as it was: the loss and the value checks read back after every step."""
    return _patched(loop, "LossMeter", functools.partial(loop.LossMeter, every=1))


def _foreach_adam() -> contextlib.AbstractContextManager:
    """Adam with PyTorch's default (foreach) implementation instead of the fused one."""

    def build(config, model, loss_fn):  # noqa: ANN001, ANN202
        return torch.optim.Adam(
            [p for p in [*model.parameters(), *loss_fn.parameters()] if p.requires_grad],
            lr=config.lr,
            weight_decay=config.weight_decay,
        )

    return _patched(loop, "build_optimizer", build)


def _no_autotune() -> contextlib.AbstractContextManager:
    """cuDNN autotuning off: the loop autotunes only when no determinism is asked of cuDNN."""
    return _patched(torch.backends.cudnn, "deterministic", True)


def training_table(
    device: torch.device,
    backbones: list[str],
    batch: int,
    steps: int,
    size: int,
    compile_model: bool,
) -> pd.DataFrame:
    """Table 1: img/s in-memory, per backbone; the ablation for the first backbone."""
    n = max(batch * 4, 512)
    train_set = _synthetic_set(n, size, n // 4, device)
    rows = []
    for i, backbone in enumerate(backbones):
        config = _config(backbone, batch, steps, size)
        bare = bare_images_per_second(config, train_set, device)
        rows.append(
            {"backbone": backbone, "input": "in-memory", "what": "bare PyTorch loop", "img/s": bare}
        )
        _progress(rows[-1])
        variants: list[tuple[str, Callable[[], contextlib.AbstractContextManager], dict]] = []
        if i == 0 and device.type == "cuda":
            variants += [
                (
                    "dmlnb.train, host read every step, foreach Adam, no autotune",
                    lambda: _stack(_reads_every_step(), _foreach_adam(), _no_autotune()),
                    {},
                ),
                ("  + reads every 50 steps", lambda: _stack(_foreach_adam(), _no_autotune()), {}),
                ("  + fused Adam", _no_autotune, {}),
            ]
        variants.append(
            (
                "dmlnb.train (defaults)"
                if i or device.type != "cuda"
                else "  + cuDNN autotune (= defaults)",
                contextlib.nullcontext,
                {},
            )
        )
        if compile_model and device.type == "cuda":
            variants.append(("  + compile=True", contextlib.nullcontext, {"compile": True}))
        for what, context, changes in variants:
            with context():
                ips = train_images_per_second(config.replace(**changes), train_set)
            rows.append(
                {
                    "backbone": backbone,
                    "input": "in-memory",
                    "what": what,
                    "img/s": ips,
                    "vs bare": ips / bare,
                }
            )
            _progress(rows[-1])
    return pd.DataFrame(rows)


def _stack(*contexts: contextlib.AbstractContextManager) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for c in contexts:
        stack.enter_context(c)
    return stack


def file_backed_table(
    device: torch.device, backbones: list[str], batch: int, steps: int, size: int, quick: bool
) -> pd.DataFrame:
    """Table 2: ``benchmarks/input_pipeline.py`` per backbone (fabricated JPEG tree; PIL +
    DataLoader workers vs the decoded cache cropped on the device; training fed by each)."""
    frames = []
    for backbone in backbones:
        argv = [
            "--model",
            backbone,
            "--batch-size",
            str(batch),
            "--steps",
            str(steps),
            "--image-size",
            str(size),
            "--device",
            device.type,
        ]
        if quick:
            argv += ["--images", "48", "--width", "60", "--height", "45", "--workers", "0"]
        table = input_pipeline.main(argv).reset_index()
        frames.append(
            table.assign(backbone=backbone)[["backbone", "measurement", "images/s", "note"]]
        )
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------- facility-location inference


def inference_table(
    device: torch.device, batch_sizes: list[int], m: int, repeats: int
) -> pd.DataFrame:
    """Table 3: ms of one loss-augmented inference (greedy + 5 PAM passes, ``refinement="full"``,
    the form with the static-shape path and CUDA graphs) at ``m`` images per
    class (``benchmarks/facility_location.py``'s batches), on ``device`` and on
    this machine's CPU."""
    rows = []
    for b in batch_sizes:
        dist, y = fl_benchmark.batch(b, m, torch.device("cpu"))  # (B, B), (B,)
        cpu_ms = median_ms(
            lambda: loss_augmented_inference(dist, y, 1.0, refinement="full"),
            torch.device("cpu"),
            repeats,
            math.inf,
        )
        row = {"B": b, "classes": b // m, "CPU (ms)": cpu_ms}
        if device.type != "cpu":
            d_dev, y_dev = dist.to(device), y.to(device)
            row[f"{device.type} (ms)"] = median_ms(
                lambda: loss_augmented_inference(d_dev, y_dev, 1.0, refinement="full"),
                device,
                repeats,
                math.inf,
            )
            row["CPU / device"] = row["CPU (ms)"] / row[f"{device.type} (ms)"]
        rows.append(row)
        _progress(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------- output


def _progress(row: dict) -> None:
    print(
        "  "
        + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
        file=sys.stderr,
        flush=True,
    )


def _device_line(device: torch.device) -> str:
    import torchvision

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        cuda = f", CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    else:
        name, cuda = platform.processor() or platform.machine(), ""
    return (
        f"device: {name}; {torch.get_num_threads()} CPU threads; torch {torch.__version__}, "
        f"torchvision {torchvision.__version__}{cuda}; python {platform.python_version()}"
    )


def _show(title: str, table: pd.DataFrame | None, out: io.StringIO) -> None:
    if table is None or table.empty:
        return
    text = table.to_string(index=False, float_format=lambda v: f"{v:.2f}")
    print(f"\n## {title}\n{text}", file=out)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backbones", nargs="+", default=["resnet50", "googlenet"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument(
        "--steps", type=int, default=40, help="steps per epoch (2 epochs, the second timed)"
    )
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row")
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["training", "files", "inference", "losses"],
        choices=["training", "files", "inference", "losses"],
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    parser.add_argument("--out", help="also write the tables here (text)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.quick:
        args.backbones, args.batch, args.steps, args.image_size, args.repeats = (
            ["resnet18"],
            16,
            2,
            32,
            2,
        )
    out = io.StringIO()
    print(
        f"# benchmarks/training.py {' '.join(argv if argv is not None else sys.argv[1:])}", file=out
    )
    print(f"# {_device_line(device)}", file=out)
    if "training" in args.parts:
        in_memory = training_table(
            device,
            args.backbones,
            args.batch,
            args.steps,
            args.image_size,
            compile_model=not args.no_compile,
        )
        _show(
            f"Training img/s, in-memory input (batch {args.batch}, "
            f"{args.image_size}x{args.image_size}, bf16 autocast + channels_last on CUDA, triplet "
            "semi-hard loss)",
            in_memory,
            out,
        )
    if "files" in args.parts:
        _show(
            "File-backed input: a fabricated CUB-like tree of JPEGs (benchmarks/input_pipeline.py)",
            file_backed_table(
                device, args.backbones, args.batch, args.steps, args.image_size, args.quick
            ),
            out,
        )
    if "inference" in args.parts:
        sizes = [16, 32] if args.quick else [64, 128, 256, 512]
        _show(
            "Facility-location loss-augmented inference, ms (greedy + 5 PAM passes, 4 images per "
            f"class, median of {args.repeats})",
            inference_table(device, sizes, 4, args.repeats),
            out,
        )
    if "losses" in args.parts:
        sizes, dims = ([16], [8]) if args.quick else ([128, 512], [128, 512])
        _show(
            f"Losses, forward+backward ms beside PML (median of {args.repeats}; ours with value "
            "checks deferred as in the training loop)",
            loss_benchmark.run(device, sizes, dims, args.repeats, deferred=True),
            out,
        )
    text = out.getvalue()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return text


if __name__ == "__main__":
    main()
