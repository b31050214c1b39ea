"""Tests of the decoded-image cache and the batched crops (:mod:`dmlnb.data.decoded`,
:mod:`dmlnb.data.crops`, :mod:`dmlnb.data.cached_images`, :mod:`dmlnb.data.prefetch`), on CPU."""

from __future__ import annotations

import os
import pickle
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF
from fabricated import fabricated_cub
from PIL import Image
from scipy.stats import ks_2samp
from sklearn.datasets import load_sample_images
from torchvision import transforms

from dmlnb.data import CachedImageDataset, load_dataset, semi_supervised
from dmlnb.data import decoded as decoded_module
from dmlnb.data.crops import (
    CROP_RATIO,
    CROP_SCALE,
    IMAGENET_MEAN,
    IMAGENET_STD,
    centre_crop_boxes,
    crop_batch,
    crop_description,
    crop_options,
    crop_theta,
    horizontal_flips,
    random_resized_crop_boxes,
    square_centre_boxes,
    square_crop_boxes,
)
from dmlnb.data.decoded import decode_resized, decoded_images
from dmlnb.data.image_folders import image_transforms
from dmlnb.data.prefetch import prefetch
from dmlnb.evaluation import compute_embeddings


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never write the user's ~/.cache during tests."""
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))


def _cub(root: Path, classes: list[int]) -> tuple[Path, list[str]]:
    """A fabricated CUB tree; returns its folder and the relative paths of its images."""
    fabricated_cub(root, classes)
    folder = root / "CUB_200_2011"
    rel = [f"images/{line.split()[1]}" for line in (folder / "images.txt").read_text().splitlines()]
    return folder, rel


def _smooth(width: int, height: int, seed: int) -> Image.Image:
    """A smooth random RGB field (bicubic-upsampled noise)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, height // 25 + 2, width // 25 + 2, generator=g)
    x = F.interpolate(coarse, size=(height, width), mode="bicubic", align_corners=False).clamp(0, 1)
    return Image.fromarray((x[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy())


def _cache_of(image: Image.Image, side: int, tmp_path: Path) -> torch.Tensor:
    """``(1, 3, side, side)`` uint8: ``image`` as the decoded cache stores it."""
    path = tmp_path / f"{id(image)}.png"
    image.save(path)
    return torch.from_numpy(decode_resized(path, side)[0].copy())[None]


# --------------------------------------------------------------------------- crop boxes


def _torchvision_boxes(width: int, height: int, n: int, seed: int) -> torch.Tensor:
    """``(n, 4)`` (x0, y0, w, h) from ``RandomResizedCrop.get_params`` on the global generator."""
    torch.manual_seed(seed)
    image = torch.empty(0, height, width)  # get_params reads only the size
    rows = [
        transforms.RandomResizedCrop.get_params(image, list(CROP_SCALE), list(CROP_RATIO))
        for _ in range(n)
    ]
    return torch.tensor([(j, i, w, h) for i, j, h, w in rows], dtype=torch.float64)


@pytest.mark.parametrize(("width", "height"), [(500, 375), (120, 500), (1000, 90)])
def test_random_boxes_have_torchvision_distribution(width: int, height: int) -> None:
    """Same law as torchvision's loop (its own stream differs): fallback rate, and each
    coordinate's distribution by a two-sample KS test (fixed seeds: deterministic)."""
    n = 6000
    ours = random_resized_crop_boxes(
        torch.tensor([[width, height]] * n), torch.Generator().manual_seed(1)
    )
    ref = _torchvision_boxes(width, height, n, seed=2)
    assert (
        (ours[:, 2:] >= 1) & (ours[:, 2] <= width)[:, None] & (ours[:, 3] <= height)[:, None]
    ).all()
    assert (ours[:, 0] + ours[:, 2] <= width).all() and (ours[:, 1] + ours[:, 3] <= height).all()
    assert torch.equal(ours, ours.round())  # integer boxes, as torchvision's
    for column in range(4):
        assert ks_2samp(ours[:, column].numpy(), ref[:, column].numpy()).pvalue > 1e-3, column
    area = ours[:, 2] * ours[:, 3] / (width * height)
    assert ks_2samp(area.numpy(), (ref[:, 2] * ref[:, 3] / (width * height)).numpy()).pvalue > 1e-3


def test_random_boxes_fall_back_to_torchvision_centre_crop() -> None:
    """A 1000 x 90 image: most draws do not fit in 10 tries; the fallback is the centred
    ``round(90 * 4/3) x 90`` box (in_ratio > 4/3), as torchvision's; a 90 x 1000 one gets
    ``90 x round(90 / (3/4))``."""
    n = 4000
    wide = random_resized_crop_boxes(
        torch.tensor([[1000, 90]] * n), torch.Generator().manual_seed(0)
    )
    fallback = (wide == torch.tensor([440.0, 0.0, 120.0, 90.0])).all(dim=1)
    ref = _torchvision_boxes(1000, 90, n, seed=0)
    ref_fallback = (ref == torch.tensor([440.0, 0.0, 120.0, 90.0])).all(dim=1)
    assert 0.2 < float(fallback.float().mean()) < 0.95
    assert abs(float(fallback.float().mean()) - float(ref_fallback.float().mean())) < 0.04
    tall = random_resized_crop_boxes(
        torch.tensor([[90, 1000]] * n), torch.Generator().manual_seed(0)
    )
    assert (tall == torch.tensor([0.0, 440.0, 90.0, 120.0])).all(dim=1).any()


def test_random_boxes_are_seeded_by_the_generator() -> None:
    sizes = torch.tensor([[500, 375], [80, 60], [33, 400]])
    a = random_resized_crop_boxes(sizes, torch.Generator().manual_seed(5))
    b = random_resized_crop_boxes(sizes, torch.Generator().manual_seed(5))
    c = random_resized_crop_boxes(sizes, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    flips = horizontal_flips(4000, torch.Generator().manual_seed(0))
    assert abs(float(flips.float().mean()) - 0.5) < 0.03


def test_centre_boxes_are_torchvision_resize_and_centre_crop() -> None:
    """Short side to round(224 * 256 / 224) = 256, long side int(256 * long / short), offsets
    round((side - 224) / 2) with half to even, mapped back to the original pixels."""
    boxes = centre_crop_boxes(torch.tensor([[500, 375], [375, 500], [256, 256]]), 224)
    # 500 x 375 -> 341 x 256: left round(58.5) = 58, top 16
    expected = torch.tensor(
        [
            [58 * 500 / 341, 16 * 375 / 256, 224 * 500 / 341, 224 * 375 / 256],
            [16 * 375 / 256, 58 * 500 / 341, 224 * 375 / 256, 224 * 500 / 341],
            [16.0, 16.0, 224.0, 224.0],
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(boxes, expected, rtol=0, atol=1e-9)


def test_crop_theta_samples_boxes_and_flips_exactly() -> None:
    """On a stored image whose pixel values are their own original x coordinates (a linear
    ramp, which bilinear sampling reproduces exactly), output pixel p of a box (x0, w) reads
    x0 + (p + 1/2) w / size, mirrored by a flip; rows likewise with y."""
    width, height, side, size = 500, 375, 288, 64
    xs = (torch.arange(side) + 0.5) * width / side  # original x of each stored column
    ys = (torch.arange(side) + 0.5) * height / side
    stored = torch.stack([xs.expand(side, side), ys[:, None].expand(side, side)])[
        None
    ]  # (1, 2, S, S)
    sizes = torch.tensor([[width, height]] * 2)
    boxes = torch.tensor([[100.0, 50.0, 200.0, 150.0]] * 2)
    theta = crop_theta(sizes, boxes, torch.tensor([False, True]))
    out = crop_batch(
        stored.expand(2, -1, -1, -1), theta, size, mean=(0.0, 0.0), std=(1 / 255, 1 / 255)
    )
    p = torch.arange(size) + 0.5
    torch.testing.assert_close(out[0, 0, 0], 100 + p * 200 / size, rtol=0, atol=1e-3)
    torch.testing.assert_close(out[0, 1, :, 0], 50 + p * 150 / size, rtol=0, atol=1e-3)
    torch.testing.assert_close(out[1], out[0].flip(-1), rtol=0, atol=1e-3)


def test_crop_batch_normalises_with_the_imagenet_statistics() -> None:
    colour = torch.tensor([200, 30, 90], dtype=torch.uint8)
    pixels = colour[None, :, None, None].expand(3, 3, 40, 40)  # (3, 3, 40, 40) a solid colour
    sizes = torch.tensor([[500, 375]] * 3)
    boxes = random_resized_crop_boxes(sizes, torch.Generator().manual_seed(0))  # (3, 4)
    theta = crop_theta(sizes, boxes, torch.tensor([0, 1, 0]))
    out = crop_batch(pixels, theta, 16)
    assert out.shape == (3, 3, 16, 16) and out.dtype == torch.float32
    expected = (colour.float() / 255 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(
        IMAGENET_STD
    )  # (3,)
    torch.testing.assert_close(out, expected[None, :, None, None].expand_as(out), rtol=0, atol=1e-5)


def test_crop_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"sizes must be \(B, 2\)"):
        centre_crop_boxes(torch.tensor([500, 375]), 224)
    with pytest.raises(ValueError, match="positive"):
        random_resized_crop_boxes(torch.tensor([[0, 375]]))
    with pytest.raises(ValueError, match=r"boxes must be \(1, 4\)"):
        crop_theta(torch.tensor([[500, 375]]), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="one per channel"):
        crop_batch(torch.zeros(1, 3, 4, 4), torch.zeros(1, 2, 3), 2, mean=(0.5,), std=(0.5,))


# --------------------------------------------------------------------------- square crops


@pytest.mark.parametrize(("size", "resize", "padding"), [(256, 256, 10), (227, 256, 0)])
def test_square_boxes_are_resize_then_a_padded_random_crop(
    size: int, resize: int, padding: int
) -> None:
    """Easy Positive's (256 of 256 padded by 10) and facility location's (227 of 256) train
    crops: in the square's pixels, a size x size box at integer offsets uniform over
    RandomCrop's range in the padded square, mapped back by W / resize and H / resize."""
    n, (width, height) = 8000, (500, 375)
    boxes = square_crop_boxes(
        torch.tensor([[width, height]] * n), size, resize, padding, torch.Generator().manual_seed(0)
    )
    scale = torch.tensor([width, height, width, height], dtype=torch.float64) / resize
    square = boxes / scale  # (n, 4) in the square's pixels
    torch.testing.assert_close(square, square.round(), rtol=0, atol=1e-9)
    assert (square[:, 2:] == size).all()
    span = resize + 2 * padding - size
    ref = torch.tensor(
        [
            transforms.RandomCrop.get_params(
                torch.empty(0, resize + 2 * padding, resize + 2 * padding), (size, size)
            )[:2]
            for _ in range(n)
        ],
        dtype=torch.float64,
    )
    for column, ref_column in ((0, 1), (1, 0)):  # x0 <-> j, y0 <-> i
        offsets = square[:, column].round() + padding
        assert offsets.min() == 0 and offsets.max() == span  # every offset of the range is drawn
        counts = torch.bincount(offsets.long(), minlength=span + 1).double()
        ref_counts = torch.bincount(ref[:, ref_column].long(), minlength=span + 1).double()
        assert (counts - n / (span + 1)).abs().max() < 5 * (n / (span + 1)) ** 0.5  # uniform
        assert ks_2samp(offsets.numpy(), ref[:, ref_column].numpy()).pvalue > 1e-3
        assert ks_2samp(counts.numpy(), ref_counts.numpy()).pvalue > 1e-3
    same = square_crop_boxes(
        torch.tensor([[width, height]] * 5), size, resize, padding, torch.Generator().manual_seed(1)
    )
    assert torch.equal(
        same,
        square_crop_boxes(
            torch.tensor([[width, height]] * 5),
            size,
            resize,
            padding,
            torch.Generator().manual_seed(1),
        ),
    )


def test_square_centre_boxes_are_resize_and_torchvision_centre_crop() -> None:
    """CenterCrop(227) of a 256 x 256 resize: offset round(14.5) = 14 (half to even, as
    torchvision's int(round(...))); a 256 crop of 256 is the whole image."""
    sizes = torch.tensor([[500, 375], [90, 1000]])
    boxes = square_centre_boxes(sizes, 227, 256)
    expected = torch.tensor(
        [
            [14 * 500 / 256, 14 * 375 / 256, 227 * 500 / 256, 227 * 375 / 256],
            [14 * 90 / 256, 14 * 1000 / 256, 227 * 90 / 256, 227 * 1000 / 256],
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(boxes, expected, rtol=0, atol=1e-9)
    whole = square_centre_boxes(sizes, 256, 256)
    torch.testing.assert_close(
        whole, torch.cat([torch.zeros(2, 2, dtype=torch.float64), sizes.double()], 1)
    )
    with pytest.raises(ValueError, match="resize=200 is smaller than image_size=227"):
        square_centre_boxes(sizes, 227, 200)
    with pytest.raises(ValueError, match="padding must be an int >= 0"):
        square_crop_boxes(sizes, 227, 256, -1)


def test_square_crops_copy_the_cache_pixels_with_black_padding(tmp_path: Path) -> None:
    """With a cache of side resize (the loaders' default for square crops) a square crop is the
    cache padded by black pixels, cut at the box and mirrored by the flip: torchvision's
    RandomCrop(size, padding) + RandomHorizontalFlip of the resized image, pixel for pixel."""
    image = _smooth(500, 375, seed=4)
    size, resize, padding, n = 24, 32, 4, 16
    stored = _cache_of(image, resize, tmp_path)  # (1, 3, 32, 32)
    sizes = torch.tensor([image.size] * n)
    boxes = square_crop_boxes(
        sizes, size, resize, padding, torch.Generator().manual_seed(2)
    )  # (n, 4)
    flips = torch.arange(n) % 2 == 1
    ours = crop_batch(
        stored.expand(n, -1, -1, -1), crop_theta(sizes, boxes, flips), size, padding_mode="zeros"
    )
    normalise = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    padded = F.pad(stored[0].float() / 255, (padding,) * 4)  # (3, 40, 40) black border
    corners = (
        boxes[:, :2] * resize / sizes.double()
    ).round().long() + padding  # (n, 2) in the padded square
    ref = torch.stack([padded[:, y : y + size, x : x + size] for x, y in corners.tolist()])
    ref = normalise(torch.where(flips[:, None, None, None], ref.flip(-1), ref))
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-4)
    assert bool((corners < padding).any()) and bool((corners > padding).any())  # padding was cut in
    test = crop_batch(
        stored,
        crop_theta(sizes[:1], square_centre_boxes(sizes[:1], size, resize)),
        size,
        padding_mode="zeros",
    )
    torch.testing.assert_close(
        test[0], normalise(stored[0, :, 4:28, 4:28].float() / 255), rtol=0, atol=1e-4
    )


@pytest.mark.parametrize(("size", "resize", "padding"), [(227, 256, 0), (256, 256, 10)])
def test_cached_square_crops_stay_close_to_torchvision(
    size: int, resize: int, padding: int, tmp_path: Path
) -> None:
    """Against torchvision's Resize((resize, resize)), padding and crop at the same offsets, the
    cached square crops differ only by the resize filter (the cache's bicubic vs Resize's
    bilinear): measured 1.6 (china) and 0.7 (flower) grey levels of 255, mean absolute."""
    normalise = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    levels = 255 * torch.tensor(IMAGENET_STD)[:, None, None]
    for array, bound in zip(load_sample_images().images, (2.0, 1.0)):
        image = Image.fromarray(array)
        stored = _cache_of(image, resize, tmp_path)  # (1, 3, resize, resize)
        sizes = torch.tensor([image.size] * 8)
        boxes = square_crop_boxes(sizes, size, resize, padding, torch.Generator().manual_seed(0))
        ours = crop_batch(
            stored.expand(8, -1, -1, -1), crop_theta(sizes, boxes), size, padding_mode="zeros"
        )
        square = TF.pad(TF.resize(image, [resize, resize], antialias=True), padding)
        corners = (boxes[:, :2] * resize / sizes.double()).round().long() + padding
        ref = torch.stack(
            [
                normalise(TF.to_tensor(TF.crop(square, y, x, size, size)))
                for x, y in corners.tolist()
            ]
        )
        assert float(((ours - ref).abs() * levels).mean()) < bound


def test_square_crops_through_the_loaders_on_both_paths(tmp_path: Path) -> None:
    fabricated_cub(tmp_path / "data", [c for c in (1, 2, 101, 102) for _ in range(2)])
    splits = load_dataset("cub200", root=tmp_path / "data", image_size=16, resize=20, padding=3)
    train, test = splits.train, splits.test
    assert train.images.size == 20 and (train.resize, train.padding) == (
        20,
        3,
    )  # the cache is the square
    x, _ = train.get_batch(torch.arange(4), generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 3, 16, 16)
    assert (
        train.subset([1]).resize,
        train.for_evaluation().resize,
        train.relabel(train.labels).padding,
    ) == (20, 20, 3)
    tx, _ = test.get_batch(torch.arange(len(test)))
    cache = test.images.pixels  # (N, 3, 20, 20): the test crop is its centre 16 x 16
    normalise = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    torch.testing.assert_close(
        tx,
        normalise(torch.from_numpy(np.array(cache))[:, :, 2:18, 2:18].float() / 255),
        rtol=0,
        atol=1e-4,
    )
    pil = load_dataset(
        "cub200", root=tmp_path / "data", image_size=16, resize=20, padding=3, decoded_cache=False
    )
    assert pil.train[0][0].shape == (3, 16, 16) and pil.test[0][0].shape == (3, 16, 16)
    train_t, test_t = image_transforms(16, 20, 3)
    assert [type(t).__name__ for t in train_t.transforms[:3]] == [
        "Resize",
        "RandomCrop",
        "RandomHorizontalFlip",
    ]
    assert [type(t).__name__ for t in test_t.transforms[:2]] == ["Resize", "CenterCrop"]
    with pytest.raises(ValueError, match="padding=3 pads the square crops only"):
        load_dataset("cub200", root=tmp_path / "data", image_size=16, padding=3)
    with pytest.raises(ValueError, match="resize=12 is smaller than image_size=16"):
        load_dataset("cub200", root=tmp_path / "data", image_size=16, resize=12)


# --------------------------------------------------------------------------- against torchvision

# Mean absolute error in grey levels (0-255) of the cached path against torchvision's PIL crop of
# the original image, over 24 random boxes (train) and the test crop; measured at S = 288 for 224:
# train 4.2 / 1.5 / 0.4, test 3.4 / 1.3 / 0.4 (china, flower, smooth field).
_MAE_BOUNDS = {"china": (5.0, 4.0), "flower": (2.0, 1.7), "smooth": (0.6, 0.6)}


@pytest.mark.parametrize("name", list(_MAE_BOUNDS))
def test_cached_crops_stay_close_to_torchvision(name: str, tmp_path: Path) -> None:
    """The documented deviation, quantified: resampling the 288 x 288 cache bilinearly instead of
    the original image with torchvision's antialiased resize."""
    samples = load_sample_images().images
    image = {
        "china": Image.fromarray(samples[0]),
        "flower": Image.fromarray(samples[1]),
        "smooth": _smooth(500, 375, seed=3),
    }[name]
    size, side, n = 224, 288, 24
    stored = _cache_of(image, side, tmp_path)  # (1, 3, 288, 288)
    sizes = torch.tensor([image.size] * n)
    boxes = random_resized_crop_boxes(sizes, torch.Generator().manual_seed(0))  # (n, 4)
    ours = crop_batch(stored.expand(n, -1, -1, -1), crop_theta(sizes, boxes), size)
    normalise = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    ref = torch.stack(
        [
            normalise(
                TF.to_tensor(
                    TF.resized_crop(
                        image, int(y0), int(x0), int(h), int(w), [size, size], antialias=True
                    )
                )
            )
            for x0, y0, w, h in boxes.tolist()
        ]
    )
    levels = 255 * torch.tensor(IMAGENET_STD)[:, None, None]  # normalised units -> grey levels
    train_mae = float(((ours - ref).abs() * levels).mean())
    test_ours = crop_batch(stored, crop_theta(sizes[:1], centre_crop_boxes(sizes[:1], size)), size)[
        0
    ]
    test_ref = image_transforms(size)[1](image)
    test_mae = float(((test_ours - test_ref).abs() * levels).mean())
    train_bound, test_bound = _MAE_BOUNDS[name]
    assert train_mae < train_bound and test_mae < test_bound, (train_mae, test_mae)


# --------------------------------------------------------------------------- the decoded cache


def test_cache_build_matches_pil_and_is_reused(tmp_path: Path) -> None:
    folder, rel = _cub(tmp_path / "data", [1, 2, 3, 101])
    images = decoded_images(folder, rel, 20, name="t", workers=0, progress=False)
    assert images.pixels.shape == (4, 3, 20, 20) and images.size == 20 and len(images) == 4
    assert images.sizes.tolist() == [[34, 30]] * 4  # fabricated_cub writes 30 x 34 (H x W)
    for k, r in enumerate(rel):
        expected = np.asarray(
            Image.open(folder / r).convert("RGB").resize((20, 20), Image.Resampling.BICUBIC)
        )
        assert np.array_equal(images.pixels[k], expected.transpose(2, 0, 1))
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 2 and all(f.startswith("decoded-t-20px-") for f in files)  # pixels + sizes
    assert files[1] == files[0].replace(".npy", ".sizes.npy")
    stat = os.stat(images.file)
    again = decoded_images(folder, rel, 20, name="t", workers=0, progress=False)
    assert again.file == images.file and np.array_equal(again.pixels, images.pixels)
    after = os.stat(images.file)
    assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)  # not rewritten


def test_cache_is_rebuilt_when_a_file_changes(tmp_path: Path) -> None:
    folder, rel = _cub(tmp_path / "data", [1, 2, 101])
    first = decoded_images(folder, rel, 12, name="t", workers=0, progress=False)
    Image.new("RGB", (40, 10), (255, 0, 0)).save(folder / rel[1], format="JPEG")
    os.utime(folder / rel[1], ns=(1, 1))  # a new modification time even on a coarse clock
    second = decoded_images(folder, rel, 12, name="t", workers=0, progress=False)
    assert second.file != first.file
    assert second.sizes[1].tolist() == [40, 10] and int(second.pixels[1, 0].min()) > 200  # red
    assert np.array_equal(second.pixels[0], first.pixels[0])
    other_size = decoded_images(folder, rel, 14, name="t", workers=0, progress=False)
    assert other_size.file not in (first.file, second.file) and other_size.size == 14


def test_unreadable_cache_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    folder, rel = _cub(tmp_path / "data", [1, 2, 101])
    built = decoded_images(folder, rel, 12, name="t", workers=0, progress=False)
    expected = np.array(built.pixels)
    del built
    path = next((tmp_path / "cache").glob("decoded-t-12px-*[0-9a-f].npy"))
    path.write_bytes(path.read_bytes()[:200])  # truncated
    with pytest.warns(UserWarning, match="rebuilding the unreadable decoded-image cache"):
        rebuilt = decoded_images(folder, rel, 12, name="t", workers=0, progress=False)
    assert np.array_equal(rebuilt.pixels, expected)


def test_parallel_build_equals_in_process_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, rel = _cub(tmp_path / "data", [c for c in (1, 2, 3, 4, 5, 101) for _ in range(4)])
    serial = decoded_images(folder, rel, 16, name="serial", workers=0, progress=False)
    parallel = decoded_images(folder, rel, 16, name="parallel", workers=2, progress=False)
    assert np.array_equal(serial.pixels, parallel.pixels) and torch.equal(
        serial.sizes, parallel.sizes
    )


def test_unwritable_or_full_cache_folder_names_dmlnb_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, rel = _cub(tmp_path / "data", [1, 101])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DMLNB_CACHE", str(blocker / "cache"))
    with pytest.raises(OSError, match="DMLNB_CACHE") as info:
        decoded_images(folder, rel, 12, name="t", workers=0, progress=False)
    assert str(blocker / "cache") in str(info.value) and "decoded_cache=False" in str(info.value)
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(decoded_module.shutil, "disk_usage", lambda _: SimpleNamespace(free=100))
    with pytest.raises(OSError, match=r"need 0\.00 GB, 0\.00 GB are free.*DMLNB_CACHE"):
        decoded_images(folder, rel, 12, name="t", workers=0, progress=False)


def test_decoded_images_pickle_without_their_pixels(tmp_path: Path) -> None:
    folder, rel = _cub(tmp_path / "data", [1, 2, 101])
    images = decoded_images(folder, rel, 32, name="t", workers=0, progress=False)
    data = pickle.dumps(images)
    assert len(data) < images.pixels.nbytes
    copy = pickle.loads(data)
    assert np.array_equal(copy.pixels, images.pixels) and torch.equal(copy.sizes, images.sizes)


# --------------------------------------------------------------------------- the dataset


@pytest.fixture()
def cub_cached(tmp_path: Path):
    fabricated_cub(tmp_path / "data", [c for c in (1, 2, 3, 101, 102) for _ in range(3)])
    return load_dataset("cub200", root=tmp_path / "data", image_size=16)


def test_cached_dataset_batches_are_seeded_and_match_items(cub_cached) -> None:
    train, test = cub_cached.train, cub_cached.test
    assert isinstance(train, CachedImageDataset) and train.train and not test.train
    assert (
        train.input_shape == (3, 16, 16)
        and len(train) == 9
        and train.images.size == round(16 * 288 / 224)
    )
    idx = torch.tensor([4, 0, 4, 8])
    x, y = train.get_batch(idx, generator=torch.Generator().manual_seed(3))
    assert (
        x.shape == (4, 3, 16, 16)
        and x.dtype == torch.float32
        and y.tolist() == train.labels[idx].tolist()
    )
    again, _ = train.get_batch(idx, generator=torch.Generator().manual_seed(3))
    other, _ = train.get_batch(idx, generator=torch.Generator().manual_seed(4))
    assert torch.equal(x, again) and not torch.equal(x, other)
    assert not torch.equal(x[0], x[2])  # the same image, two random crops
    tx, ty = test.get_batch(torch.arange(len(test)))
    assert torch.equal(
        tx, test.get_batch(torch.arange(len(test)), generator=torch.Generator().manual_seed(9))[0]
    )
    for i in range(len(test)):
        item, label = test[i]
        torch.testing.assert_close(item, tx[i])
        assert label == int(ty[i])
    assert isinstance(train[0][1], int) and train[0][0].shape == (3, 16, 16)
    with pytest.raises(IndexError, match=r"\[-9, 9\)"):
        train.get_batch(torch.tensor([9]))


def test_cached_dataset_subset_relabel_and_paths(cub_cached) -> None:
    train = cub_cached.train
    sub = train.subset([5, 1])
    assert len(sub) == 2 and sub.labels.tolist() == train.labels[[5, 1]].tolist()
    assert sub.paths == [train.paths[5], train.paths[1]] and sub.images is train.images
    g = torch.Generator().manual_seed(0)
    assert torch.equal(
        sub.get_batch(torch.tensor([0]), generator=g)[0],
        train.get_batch(torch.tensor([5]), generator=torch.Generator().manual_seed(0))[0],
    )
    hidden = train.relabel(torch.full((len(train),), -1))
    assert (hidden.labels == -1).all() and hidden.num_classes == 0 and hidden.train
    with pytest.raises(ValueError, match=r"\(9,\)"):
        train.relabel([0, 1])


def test_semi_supervised_split_of_a_cached_training_set(cub_cached) -> None:
    splits = semi_supervised(cub_cached, labelled_per_class=1, seed=0)
    assert isinstance(splits.train, CachedImageDataset) and isinstance(
        splits.unlabelled, CachedImageDataset
    )
    assert (
        len(splits.train) == 3
        and len(splits.unlabelled) == 6
        and (splits.unlabelled.labels == -1).all()
    )
    assert not set(splits.train.paths) & set(splits.unlabelled.paths)
    assert sorted(splits.unlabelled_targets.tolist()) == [0, 0, 1, 1, 2, 2]


def test_compute_embeddings_of_a_cached_test_set(cub_cached) -> None:
    test = cub_cached.test
    flatten = torch.nn.Sequential(torch.nn.Flatten())
    emb, lab = compute_embeddings(flatten, test, batch_size=4, device="cpu")
    x, y = test.get_batch(torch.arange(len(test)))
    torch.testing.assert_close(emb, x.flatten(1))
    assert torch.equal(lab, y)


# --------------------------------------------------------------------------- prefetch


def test_prefetch_keeps_order_raises_in_place_and_stops_early() -> None:
    def load(i: int, batch: int) -> torch.Tensor:
        if batch == 13:
            raise RuntimeError("bad batch 13")
        return torch.full((2,), float(batch))

    cpu = torch.device("cpu")
    plain = [t.tolist() for t in prefetch(load, range(10), cpu, ahead=0)]
    assert (
        [t.tolist() for t in prefetch(load, range(10), cpu, ahead=3)]
        == plain
        == [[float(b)] * 2 for b in range(10)]
    )
    seen = []
    with pytest.raises(RuntimeError, match="bad batch 13"):
        for t in prefetch(load, range(10, 20), cpu, ahead=2):
            seen.append(int(t[0]))
    assert seen == [10, 11, 12]
    before = threading.active_count()
    stream = prefetch(load, range(100), cpu, ahead=2)
    next(stream)
    stream.close()
    assert threading.active_count() == before
    assert not any(t.name == "dmlnb-prefetch" for t in threading.enumerate())


def test_prefetch_reports_a_failing_batch_iterator() -> None:
    def batches():
        yield 0
        raise ValueError("sampler broke")

    with pytest.raises(ValueError, match="sampler broke"):
        list(prefetch(lambda i, b: b, batches(), torch.device("cpu")))


def test_pil_path_stays_available(tmp_path: Path) -> None:
    fabricated_cub(tmp_path / "data", [1, 1, 101, 101])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        splits = load_dataset("cub200", root=tmp_path / "data", image_size=8, decoded_cache=False)
    assert not isinstance(splits.train, CachedImageDataset) and splits.train[0][0].shape == (
        3,
        8,
        8,
    )
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "options",
    [
        {"image_size": 224},
        {"image_size": 227, "resize": 256},
        {"image_size": 256, "resize": 256, "padding": 10},
    ],
)
def test_the_crop_description_names_the_transforms_the_loaders_build(options):
    text = crop_description(*crop_options(options))
    train, test = image_transforms(*crop_options(options))
    random_crop = next(
        t for t in train.transforms if type(t).__name__ in ("RandomCrop", "RandomResizedCrop")
    )
    if "resize" in options:
        assert type(random_crop).__name__ == "RandomCrop" and random_crop.padding == options.get(
            "padding", 0
        )
        assert (
            f"resized to {options['resize']} x {options['resize']}" in text and "area" not in text
        )
        assert ("padded by 10 px" in text) == ("padding" in options)
    else:
        assert type(random_crop).__name__ == "RandomResizedCrop" and "of the image's area" in text
    assert f"centre crop {options['image_size']} x {options['image_size']}" in text
