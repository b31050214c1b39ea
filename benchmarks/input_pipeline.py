"""Input-pipeline throughput from JPEG files: PIL + DataLoader workers vs the decoded cache
cropped on batches (:mod:`dmlnb.data.cached_images`), and the training steps each one feeds.

    python benchmarks/input_pipeline.py           # 3,200 JPEGs of 500x375, ResNet-50, batch 128
    python benchmarks/input_pipeline.py --images 48 --width 60 --height 45 --image-size 32 \\
        --batch-size 8 --steps 2 --workers 0 --model convnet          # seconds on a CPU

The script fabricates a CUB-200-2011 tree of ``--images`` smooth random JPEGs (plus a few test
images) under ``--root`` (default: a temporary folder, removed afterwards), loads it with
``load_dataset("cub200", ...)`` both ways, and prints images per second of:

* the cache build (decode + resize once, parallel) and the reuse of the built cache;
* PIL + DataLoader batches alone, for each ``--workers`` count;
* cached batches alone on the CPU and, with CUDA, cropped on the GPU (prefetched);
* training steps of ``--model`` (bf16 autocast and channels_last on CUDA) through
  :func:`dmlnb.training.train`, fed (a) from an in-memory tensor on the device, (b) from the
  cached files and (c) from PIL + DataLoader with the most workers; the second of two epochs
  of ``--steps`` steps is timed (the first warms up).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from PIL import Image
from timing import sync  # benchmarks/timing.py, beside this script
from torch.utils.data import DataLoader

from dmlnb.data import InMemoryDataset, LabelledDataset, load_dataset
from dmlnb.data.prefetch import prefetch
from dmlnb.losses import MultiSimilarityLoss
from dmlnb.models import build_model
from dmlnb.profiles import make_config
from dmlnb.training import resolve_device, train

TEST_IMAGES = 8  # in classes 101-102: the loader needs a test split


def smooth_image(seed: int, width: int, height: int) -> Image.Image:
    """A random RGB image: bicubic-upsampled noise (blobs about 25 px wide) plus fine grain, so a
    JPEG of it has a realistic size and decode cost."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, height // 25 + 2, width // 25 + 2, generator=g)  # (1, 3, h, w)
    x = F.interpolate(
        coarse, size=(height, width), mode="bicubic", align_corners=False
    )  # (1, 3, H, W)
    x = (x + 0.05 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    return Image.fromarray((x[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy())


def _write_jpeg(job: tuple[int, str, int, int]) -> None:
    seed, path, width, height = job
    smooth_image(seed, width, height).save(path, quality=90)


def fabricate_cub(root: Path, n: int, width: int, height: int, processes: int) -> None:
    """A CUB-200-2011 tree under ``root``: ``n`` JPEGs in ``min(100, n // 4)`` training classes
    and 8 in the test classes 101-102."""
    folder = root / "CUB_200_2011"
    train_classes = max(1, min(100, n // 4))
    classes = [1 + k % train_classes for k in range(n)] + [101 + k % 2 for k in range(TEST_IMAGES)]
    rel = [f"{c:03d}.Bird_{c}/img_{k + 1}.jpg" for k, c in enumerate(classes)]
    for r in rel:
        (folder / "images" / r).parent.mkdir(parents=True, exist_ok=True)
    jobs = [(k, str(folder / "images" / r), width, height) for k, r in enumerate(rel)]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            pool.map(_write_jpeg, jobs, chunksize=16)
    else:
        for job in jobs:
            _write_jpeg(job)
    (folder / "images.txt").write_text("".join(f"{k + 1} {r}\n" for k, r in enumerate(rel)))
    (folder / "image_class_labels.txt").write_text(
        "".join(f"{k + 1} {c}\n" for k, c in enumerate(classes))
    )


def _rate(run: Callable[[], int], device: torch.device) -> tuple[float, float]:
    """``(images per second, seconds)`` of ``run()``, which returns the number of images."""
    sync(device)
    t0 = time.perf_counter()
    images = run()
    sync(device)
    seconds = time.perf_counter() - t0
    return images / seconds, seconds


def loader_rate(
    dataset: LabelledDataset, batch_size: int, steps: int, workers: int, device: torch.device
) -> tuple[float, float]:
    """PIL + DataLoader batches alone: timed from the first batch (worker start-up excluded)."""
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
    )
    batches = iter(loader)
    next(batches)
    steps = min(steps, len(loader) - 1)

    def run() -> int:
        return sum(len(next(batches)[0]) for _ in range(steps))

    return _rate(run, device)


def cached_rate(dataset, batch_size: int, steps: int, device: torch.device) -> tuple[float, float]:
    """Cached batches alone (``get_batch`` on ``device``, prefetched one ahead), after
    one warm-up batch."""
    g = torch.Generator().manual_seed(0)
    index = [torch.randint(0, len(dataset), (batch_size,), generator=g) for _ in range(steps + 1)]

    def load(t: int, idx: torch.Tensor) -> torch.Tensor:
        return dataset.get_batch(idx, device=device, generator=torch.Generator().manual_seed(t))[0]

    dataset.get_batch(index[0], device=device)  # warm-up (kernels, pinned pool)
    return _rate(lambda: sum(len(x) for x in prefetch(load, index[1:], device)), device)


def train_rate(
    dataset: LabelledDataset, args: argparse.Namespace, workers: int
) -> tuple[float, float]:
    """Images per second and seconds of the second of two ``--steps``-step epochs of ``train``."""
    config = make_config(
        None,
        {
            "model": args.model,
            "embedding_dim": 512,
            "batch_size": args.batch_size,
            "m_per_class": 4,
            "steps_per_epoch": args.steps,
            "epochs": 2,
            "lr": 1e-5,
            "device": args.device,
            "num_workers": workers,
            "amp": True,
            "channels_last": True,
        },
    )
    torch.manual_seed(0)
    model = build_model(args.model, dataset.input_shape, 512, normalize=True, width=16)
    record = train(model, MultiSimilarityLoss(), dataset, None, config, progress=False)
    last = record.data["history"][-1]
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return last["images_per_second"], last["train_seconds"]


def run(args: argparse.Namespace, root: Path) -> pd.DataFrame:
    device = resolve_device(args.device)
    cores = os.cpu_count()
    rows: list[dict] = []

    def add(name: str, rate: float, seconds: float, note: str = "") -> None:
        rows.append({"measurement": name, "images/s": rate, "seconds": seconds, "note": note})
        print(f"  {name}: {rate:,.0f} images/s in {seconds:.2f} s {note}", flush=True)

    t0 = time.perf_counter()
    fabricate_cub(root, args.images, args.width, args.height, min(cores, 16, args.images // 64))
    seconds = time.perf_counter() - t0
    print(
        f"fabricated {args.images} JPEGs of {args.width}x{args.height} in {seconds:.1f} s",
        flush=True,
    )
    options = {"image_size": args.image_size}
    if args.cache_size is not None:
        options["cache_size"] = args.cache_size
    n = args.images + TEST_IMAGES
    t0 = time.perf_counter()
    cached = load_dataset("cub200", root=root, **options)
    build = time.perf_counter() - t0
    add("cache build (decode + resize, both splits)", n / build, build, f"{cores} cores")
    t0 = time.perf_counter()
    cached = load_dataset("cub200", root=root, **options)
    add("cache reuse (stat + map)", n / (time.perf_counter() - t0), time.perf_counter() - t0)
    pil = load_dataset("cub200", root=root, image_size=args.image_size, decoded_cache=False)
    for workers in args.workers:
        rate, seconds = loader_rate(pil.train, args.batch_size, args.steps, workers, device)
        add(f"PIL + DataLoader, {workers} workers (batches only)", rate, seconds)
    rate, seconds = cached_rate(cached.train, args.batch_size, args.steps, torch.device("cpu"))
    add("cached batches on the CPU (no model)", rate, seconds, f"{torch.get_num_threads()} threads")
    if device.type == "cuda":
        rate, seconds = cached_rate(cached.train, args.batch_size, args.steps, device)
        add("cached batches cropped on the GPU (no model)", rate, seconds)
    g = torch.Generator().manual_seed(0)
    memory = torch.randn(1024, *cached.train.input_shape, generator=g).to(device)  # (1024, 3, s, s)
    labels = torch.arange(256).repeat_interleave(4)  # (1024,): 256 classes of 4
    train_memory, seconds = train_rate(InMemoryDataset(memory, labels), args, 0)
    add(
        f"train {args.model}: in-memory tensor on {device.type}", train_memory, seconds, "reference"
    )
    del memory
    rate, seconds = train_rate(cached.train, args, 0)
    add(
        f"train {args.model}: cached JPEG files",
        rate,
        seconds,
        f"{rate / train_memory:.0%} of in-memory",
    )
    workers = max(args.workers)
    rate, seconds = train_rate(pil.train, args, workers)
    add(
        f"train {args.model}: PIL + DataLoader, {workers} workers",
        rate,
        seconds,
        f"{rate / train_memory:.0%} of in-memory",
    )
    return pd.DataFrame(rows).set_index("measurement")


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=3200, help="training JPEGs to fabricate")
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument(
        "--cache-size", type=int, default=None, help="cache side (default round(size * 288 / 224))"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--steps", type=int, default=30, help="timed batches / training steps per measurement"
    )
    parser.add_argument(
        "--workers",
        type=lambda s: [int(w) for w in s.split(",")],
        default=[8, 14],
        help="comma-separated DataLoader worker counts for the PIL path",
    )
    parser.add_argument(
        "--model", default="resnet50", help="a dmlnb.models.build_model name (convnet for a CPU)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--root", type=Path, default=None, help="where to fabricate (default: a temporary folder)"
    )
    parser.add_argument("--out", default=None, help="also write the table as CSV")
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="dmlnb-input-"))
    cache = os.environ.get("DMLNB_CACHE")
    os.environ["DMLNB_CACHE"] = str(root / "cache")  # a cold cache, removed with the root
    try:
        device = resolve_device(args.device)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(
            f"{args.images} images {args.width}x{args.height} -> {args.image_size}px, batch "
            f"{args.batch_size}, {name}, {os.cpu_count()} cores, torch {torch.__version__}",
            flush=True,
        )
        table = run(args, root)
    finally:
        if cache is None:
            os.environ.pop("DMLNB_CACHE")
        else:
            os.environ["DMLNB_CACHE"] = cache
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)
    print(table.to_string(float_format=lambda v: f"{v:,.1f}"))
    if args.out:
        table.to_csv(args.out)
    return table


if __name__ == "__main__":
    main()
