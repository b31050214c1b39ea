"""Tests of the dataset registry :mod:`dmlnb.data` (no network: nothing is downloaded)."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
import torch.nn.functional as F
from fabricated import fabricated_hotels50k
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dmlnb.data import (
    CachedImageDataset,
    DatasetSplits,
    ImageFileDataset,
    InMemoryDataset,
    available_datasets,
    data_root,
    load_dataset,
    split_labelled_per_class,
)
from dmlnb.data import omniglot as omniglot_module
from dmlnb.data.image_folders import IMAGENET_MEAN, IMAGENET_STD
from dmlnb.data.torchvision_sets import standardise, to_float_images

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never write the user's ~/.cache during tests."""
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))


# --------------------------------------------------------------------------- registry, errors


def test_unknown_dataset_lists_valid_names() -> None:
    with pytest.raises(ValueError) as info:
        load_dataset("imagenet-22k")
    for name in [
        "digits",
        "omniglot-small",
        "omniglot",
        "mnist",
        "fashion-mnist",
        "cifar10",
        "cub200",
        "cars196",
        "sop",
        "inshop",
        "hotels50k",
    ]:
        assert name in available_datasets()
        assert name in str(info.value)


def test_unknown_option_names_valid_options() -> None:
    with pytest.raises(TypeError) as info:
        load_dataset("digits", splitt="classes")
    message = str(info.value)
    assert "splitt" in message
    for option in ("split", "test_size", "labelled_per_class", "seed"):
        assert option in message


def test_data_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DMLNB_DATA", raising=False)
    assert data_root() == (Path.home() / ".cache" / "dmlnb").resolve()
    monkeypatch.setenv("DMLNB_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "arg") == tmp_path / "arg"


@pytest.mark.parametrize(
    ("name", "expected", "url", "downloadable"),
    [
        (
            "omniglot-small",
            "omniglot/images_background_small1.zip",
            "github.com/brendenlake/omniglot",
            True,
        ),
        (
            "omniglot",
            "omniglot/omniglot-py/images_background.zip",
            "github.com/brendenlake/omniglot",
            True,
        ),
        ("mnist", "MNIST/raw", "yann.lecun.com/exdb/mnist", True),
        ("cifar10", "cifar-10-batches-py", "www.cs.toronto.edu/~kriz/cifar", True),
        (
            "cub200",
            "CUB_200_2011/images.txt",
            "www.vision.caltech.edu/datasets/cub_200_2011",
            False,
        ),
        ("cars196", "Cars196/cars_annos.mat", "ai.stanford.edu/~jkrause/cars", False),
        (
            "sop",
            "Stanford_Online_Products/Ebay_train.txt",
            "cvgl.stanford.edu/projects/lifted_struct",
            False,
        ),
        (
            "inshop",
            "In-Shop/list_eval_partition.txt",
            "mmlab.ie.cuhk.edu.hk/projects/DeepFashion",
            False,
        ),
        ("hotels50k", "Hotels-50K/images/train", "github.com/GWUvision/Hotels-50K", False),
    ],
)
def test_missing_files_message(
    tmp_path: Path, name: str, expected: str, url: str, downloadable: bool
) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_dataset(name, root=tmp_path)
    message = str(info.value)
    assert str(tmp_path / expected) in message
    assert url in message
    assert "DMLNB_DATA" in message
    assert ("download=True" in message) == downloadable
    assert not any(tmp_path.iterdir())  # nothing was downloaded or created


# --------------------------------------------------------------------------- dataset classes


def test_in_memory_dataset_batch_subset_and_validation() -> None:
    images = torch.arange(6 * 4, dtype=torch.float32).reshape(6, 1, 2, 2)
    ds = InMemoryDataset(images, [3, 1, 3, 0, 1, 1])
    idx = torch.tensor([4, 0, 4])
    x, y = ds.get_batch(idx)
    assert torch.equal(x, images[[4, 0, 4]]) and y.tolist() == [1, 3, 1]
    item, label = ds[3]
    assert torch.equal(item, images[3]) and label == 0 and isinstance(label, int)
    sub = ds.subset([5, 2])
    assert len(sub) == 2 and sub.labels.tolist() == [1, 3] and torch.equal(sub.images[1], images[2])
    assert ds.num_classes == 3 and ds.input_shape == (1, 2, 2)
    with pytest.raises(ValueError, match="N, C, H, W"):
        InMemoryDataset(images[:, 0], ds.labels)
    with pytest.raises(TypeError, match="float32"):
        InMemoryDataset(images.double(), ds.labels)
    with pytest.raises(ValueError, match=r"\(6,\)"):
        InMemoryDataset(images, [0, 1])


# --------------------------------------------------------------------------- digits


def _exact_cdist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pairwise distances without the matmul shortcut, so identical rows give exactly 0."""
    return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")


def test_digits_class_disjoint_split() -> None:
    bunch = load_digits()
    splits = load_dataset("digits")
    assert isinstance(splits, DatasetSplits) and splits.input_shape == (1, 8, 8)
    assert len(splits.train) == int((bunch.target < 5).sum())
    assert len(splits.test) == int((bunch.target >= 5).sum())
    assert splits.class_names == {"train": list("01234"), "test": list("56789")}
    assert splits.num_train_classes == 5 and splits.test.num_classes == 5
    # Every test image is a sklearn image of the digit its remapped label names.
    reference = torch.as_tensor(bunch.images / 16.0, dtype=torch.float32).flatten(1)  # (1797, 64)
    for ds, names in (
        (splits.train, splits.class_names["train"]),
        (splits.test, splits.class_names["test"]),
    ):
        digit = torch.tensor([int(names[y]) for y in ds.labels.tolist()])
        match = _exact_cdist(ds.images.flatten(1), reference) == 0  # (N, 1797) identical images
        target_ok = match & (digit[:, None] == torch.as_tensor(bunch.target)[None, :])
        assert target_ok.any(dim=1).all()
    assert float(splits.train.images.min()) == 0.0 and float(splits.train.images.max()) == 1.0


def test_digits_sample_split_same_classes_stratified() -> None:
    bunch = load_digits()
    splits = load_dataset("digits", split="samples", test_size=0.3, seed=1)
    _, test_y = train_test_split(bunch.target, test_size=0.3, random_state=1, stratify=bunch.target)
    assert len(splits.test) == len(test_y) and len(splits.train) + len(splits.test) == len(
        bunch.target
    )
    assert splits.class_names["train"] == splits.class_names["test"] == [str(d) for d in range(10)]
    assert torch.equal(torch.bincount(splits.test.labels), torch.as_tensor(np.bincount(test_y)))
    with pytest.raises(ValueError, match="split must be"):
        load_dataset("digits", split="random")


# --------------------------------------------------------------------------- semi-supervised


def test_split_labelled_per_class_counts_partition_and_seed() -> None:
    labels = torch.tensor([5] * 7 + [2] * 3 + [9] * 12 + [0] * 4)[
        torch.randperm(26, generator=torch.Generator().manual_seed(0))
    ]
    labelled, unlabelled = split_labelled_per_class(labels, 3, seed=4)
    assert torch.equal(torch.sort(torch.cat([labelled, unlabelled])).values, torch.arange(26))
    for c in (0, 2, 5, 9):
        assert int((labels[labelled] == c).sum()) == 3
    again, _ = split_labelled_per_class(labels, 3, seed=4)
    assert torch.equal(labelled, again)
    draws = {tuple(split_labelled_per_class(labels, 3, seed=s)[0].tolist()) for s in range(5)}
    assert len(draws) > 1
    with pytest.raises(ValueError, match="exceeds the size of class"):
        split_labelled_per_class(labels, 4, seed=0)


def test_split_labelled_per_class_is_uniform() -> None:
    """Each item of a class of 4 is labelled with probability n/4 = 1/2 over seeds."""
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    hits = torch.zeros(8)
    for seed in range(400):
        hits[split_labelled_per_class(labels, 2, seed=seed)[0]] += 1
    assert torch.allclose(hits / 400, torch.full((8,), 0.5), atol=0.1)


def test_digits_semi_supervised() -> None:
    full = load_dataset("digits")  # class split: the seed only drives the labelled draw
    splits = load_dataset("digits", labelled_per_class=10, seed=3)
    assert torch.equal(torch.bincount(splits.train.labels), torch.full((5,), 10))
    assert splits.unlabelled is not None and splits.unlabelled_targets is not None
    assert len(splits.train) + len(splits.unlabelled) == len(full.train)
    assert (splits.unlabelled.labels == -1).all()
    assert splits.unlabelled.num_classes == 0
    assert torch.equal(splits.test.images, full.test.images)
    # hidden targets: each unlabelled image is a training image whose true label is its target
    same = _exact_cdist(splits.unlabelled.images.flatten(1), full.train.images.flatten(1)) == 0
    same &= splits.unlabelled_targets[:, None] == full.train.labels[None, :]
    assert same.any(dim=1).all()
    assert torch.equal(
        torch.bincount(splits.unlabelled_targets, minlength=5) + 10,
        torch.bincount(full.train.labels),
    )
    again = load_dataset("digits", labelled_per_class=10, seed=3)
    other = load_dataset("digits", labelled_per_class=10, seed=4)
    assert torch.equal(again.train.images, splits.train.images)
    assert torch.equal(again.unlabelled_targets, splits.unlabelled_targets)
    assert not torch.equal(other.train.images, splits.train.images)


# --------------------------------------------------------------------------- torchvision sets


def test_to_float_images_and_standardise() -> None:
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    x = to_float_images(grey)
    assert x.shape == (5, 1, 4, 3) and torch.allclose(
        x[:, 0], torch.as_tensor(grey / 255.0, dtype=torch.float32)
    )
    rgb = rng.integers(0, 256, (6, 4, 3, 3), dtype=np.uint8)  # (N, H, W, C) as CIFAR stores it
    train = to_float_images(rgb)
    assert train.shape == (6, 3, 4, 3) and torch.allclose(
        train[2, 1], torch.as_tensor(rgb[2, :, :, 1] / 255.0, dtype=torch.float32)
    )
    test = to_float_images(rng.integers(0, 256, (2, 4, 3, 3), dtype=np.uint8))
    train_s, test_s = standardise(train, test)
    ref = rgb.astype(np.float64) / 255.0
    mean, std = ref.mean(axis=(0, 1, 2)), ref.std(axis=(0, 1, 2), ddof=1)
    assert torch.allclose(train_s.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5)
    expected = (test.double().permute(0, 2, 3, 1).numpy() - mean) / std
    assert np.allclose(test_s.permute(0, 2, 3, 1).numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match="uint8"):
        to_float_images(np.zeros((2, 3, 3), dtype=np.float32))


def _write_idx(path: Path, array: np.ndarray) -> None:
    """An uncompressed IDX file (the MNIST format: magic 0x0000 08 ndim, big-endian dims, bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_mnist_loader_on_fabricated_idx_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    train_x = rng.integers(0, 256, (40, 28, 28), dtype=np.uint8)
    train_y = np.repeat(np.arange(10), 4)[rng.permutation(40)]
    test_x = rng.integers(0, 256, (10, 28, 28), dtype=np.uint8)
    raw = tmp_path / "MNIST" / "raw"
    _write_idx(raw / "train-images-idx3-ubyte", train_x)
    _write_idx(raw / "train-labels-idx1-ubyte", train_y)
    _write_idx(raw / "t10k-images-idx3-ubyte", test_x)
    _write_idx(raw / "t10k-labels-idx1-ubyte", np.arange(10))
    splits = load_dataset("mnist", root=tmp_path)
    assert splits.input_shape == (1, 28, 28) and len(splits.train) == 40 and len(splits.test) == 10
    assert splits.train.labels.tolist() == train_y.tolist()
    mean, std = (train_x / 255.0).mean(), (train_x / 255.0).std(ddof=1)
    expected = torch.as_tensor((test_x / 255.0 - mean) / std, dtype=torch.float32)
    assert torch.allclose(splits.test.images[:, 0], expected, atol=1e-5)
    semi = load_dataset("mnist", root=tmp_path, labelled_per_class=1, seed=0)
    assert torch.equal(torch.bincount(semi.train.labels), torch.ones(10, dtype=torch.long))
    assert len(semi.unlabelled) == 30 and (semi.unlabelled.labels == -1).all()


# --------------------------------------------------------------------------- omniglot-small


def _shared_data() -> Path:
    return Path(os.environ.get("DMLNB_DATA") or REPO.parent / "shared" / "data").resolve()


OMNIGLOT = _shared_data() / "omniglot"
needs_omniglot = pytest.mark.skipif(
    not (OMNIGLOT / "images_background_small1.zip").is_file()
    or not (OMNIGLOT / "images_background_small2.zip").is_file(),
    reason=f"Omniglot small archives not found in {OMNIGLOT} (set DMLNB_DATA to the data root)",
)


@needs_omniglot
def test_omniglot_small_split_sizes_and_values(tmp_path: Path) -> None:
    omniglot_module._decoded.cache_clear()  # decode afresh, so the cache files get written here
    splits = load_dataset("omniglot-small", root=_shared_data())
    assert (len(splits.train), splits.num_train_classes) == (2720, 136)
    assert (len(splits.test), splits.test.num_classes) == (2120, 106)
    assert splits.input_shape == (1, 28, 28)
    assert torch.equal(torch.bincount(splits.train.labels), torch.full((136,), 20))
    train_alpha = {n.split("/")[0] for n in splits.class_names["train"]}
    test_alpha = {n.split("/")[0] for n in splits.class_names["test"]}
    assert train_alpha == {"Balinese", "Early_Aramaic", "Greek", "Korean", "Latin"}
    assert test_alpha == {"Japanese_(katakana)", "Sanskrit", "Tagalog"}
    for ds in (splits.train, splits.test):
        assert ds.images.dtype == torch.float32
        assert float(ds.images.min()) >= 0.0 and float(ds.images.max()) <= 1.0
        assert float(ds.images.max()) > 0.9  # strokes reach full brightness
        border = torch.cat([ds.images[..., 0, :], ds.images[..., -1, :]], dim=-1)  # (N, 1, 56)
        assert float(border.mean()) < 0.02  # inverted: the paper is 0
        assert float(ds.images.mean()) < 0.2  # strokes are a minority of pixels
    # cached: a second load (no in-process cache) reads the .pt file and gives the same tensors
    assert len(list((tmp_path / "cache").glob("omniglot-*.pt"))) == 2
    omniglot_module._decoded.cache_clear()
    again = load_dataset("omniglot-small", root=_shared_data(), labelled_per_class=2, seed=0)
    assert torch.equal(torch.bincount(again.train.labels), torch.full((136,), 2))
    assert torch.equal(again.test.images, splits.test.images)


@needs_omniglot
@pytest.mark.parametrize("character", ["Tagalog/character05", "Japanese_(katakana)/character47"])
def test_omniglot_small_images_match_inverted_pngs(character: str) -> None:
    """Each drawing is 1 - PNG / 255 of its archive member, shrunk to 28x28; reference: torch's
    antialiased bilinear resize (an implementation independent of PIL's)."""
    splits = load_dataset("omniglot-small", root=_shared_data())
    label = splits.class_names["test"].index(character)
    images = splits.test.images[splits.test.labels == label]  # (20, 1, 28, 28)
    with zipfile.ZipFile(OMNIGLOT / "images_background_small2.zip") as archive:
        members = sorted(
            n for n in archive.namelist() if f"/{character}/" in n and n[-4:] == ".png"
        )
        raw = np.stack(
            [np.asarray(Image.open(io.BytesIO(archive.read(m))).convert("L")) for m in members]
        )
    paper = torch.from_numpy(raw).float().unsqueeze(1) / 255.0  # (20, 1, 105, 105), paper = 1
    reference = 1.0 - F.interpolate(paper, size=(28, 28), mode="bilinear", antialias=True)
    assert images.shape == reference.shape == (20, 1, 28, 28)
    assert torch.allclose(images, reference, atol=0.01)


def _write_omniglot_zip(path: Path, top: str, alphabets: dict[str, int], drawings: int) -> None:
    """A fabricated Omniglot archive: ``top/<alphabet>/characterNN/<i>.png``, black on white."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for alphabet, characters in alphabets.items():
            for c in range(1, characters + 1):
                for d in range(drawings):
                    pixels = np.full((105, 105), 255, dtype=np.uint8)
                    pixels[10 * c : 10 * c + 5, :] = 0  # a horizontal stroke marking the character
                    buffer = io.BytesIO()
                    Image.fromarray(pixels).convert("1").save(buffer, format="PNG")
                    archive.writestr(
                        f"{top}/{alphabet}/character{c:02d}/{c:04d}_{d:02d}.png", buffer.getvalue()
                    )


def test_omniglot_full_on_fabricated_archives(tmp_path: Path) -> None:
    folder = tmp_path / "omniglot" / "omniglot-py"
    _write_omniglot_zip(
        folder / "images_background.zip", "images_background", {"Alpha": 2, "Beta": 3}, 2
    )
    _write_omniglot_zip(folder / "images_evaluation.zip", "images_evaluation", {"Gamma": 4}, 3)
    splits = load_dataset("omniglot", root=tmp_path, image_size=21)
    assert (
        len(splits.train),
        splits.num_train_classes,
        len(splits.test),
        splits.test.num_classes,
    ) == (10, 5, 12, 4)
    assert splits.class_names["train"] == [
        "Alpha/character01",
        "Alpha/character02",
        "Beta/character01",
        "Beta/character02",
        "Beta/character03",
    ]
    # the stroke of character c sits on rows 10c..10c+4 of 105, i.e. around row 2c of 21
    for ds, names in (
        (splits.train, splits.class_names["train"]),
        (splits.test, splits.class_names["test"]),
    ):
        for image, label in zip(ds.images, ds.labels.tolist()):
            c = int(names[label][-2:])
            rows = image[0].mean(dim=1)  # (21,)
            assert int(rows.argmax()) == 2 * c and float(rows[2 * c]) > 0.5  # antialiased stroke
            assert float(rows[0]) == 0.0


def test_omniglot_corrupt_png_names_member_and_archive(tmp_path: Path) -> None:
    folder = tmp_path / "omniglot" / "omniglot-py"
    _write_omniglot_zip(folder / "images_background.zip", "images_background", {"Alpha": 2}, 2)
    _write_omniglot_zip(folder / "images_evaluation.zip", "images_evaluation", {"Gamma": 2}, 2)
    with zipfile.ZipFile(folder / "images_evaluation.zip", "a") as archive:
        archive.writestr(
            "images_evaluation/Gamma/character03/0003_00.png", b"\x89PNG\r\n\x1a\n cut"
        )
    with pytest.raises(OSError) as info:
        load_dataset("omniglot", root=tmp_path, image_size=21)
    message = str(info.value)
    assert "character03/0003_00.png" in message and str(folder / "images_evaluation.zip") in message


# --------------------------------------------------------------------------- image folders


def _colour(class_id: int, k: int) -> tuple[int, int, int]:
    """A distinct solid colour per (class, image), so a loaded tensor identifies its file."""
    return (class_id * 37 % 256, (k * 80 + 20) % 256, (class_id * 11 + k * 5) % 256)


def _write_image(path: Path, colour: tuple[int, int, int], size: tuple[int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path, format="PNG")


def _expected_tensor(colour: tuple[int, int, int], image_size: int) -> torch.Tensor:
    rgb = torch.tensor(colour, dtype=torch.float32) / 255.0
    value = (rgb - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)  # (3,)
    return value[:, None, None].expand(3, image_size, image_size)


def _check_split(
    ds: ImageFileDataset | CachedImageDataset,
    items: dict[str, tuple[int, int]],
    orig_classes: list[int],
    image_size: int,
) -> None:
    """Labels are the rank of the original class; a test item decodes to its file's colour."""
    assert ds.labels.tolist() == [sorted(set(orig_classes)).index(c) for c in orig_classes]
    assert ds.input_shape == (3, image_size, image_size)
    for i, path in enumerate(ds.paths):
        assert orig_classes[i] == items[path.name][0]
    image, label = ds[0]
    assert image.shape == (3, image_size, image_size) and image.dtype == torch.float32
    assert isinstance(label, int)


def _check_test_pixels(
    ds: ImageFileDataset | CachedImageDataset, items: dict[str, tuple[int, int]], image_size: int
) -> None:
    for i in range(len(ds)):
        image, _ = ds[i]
        assert torch.allclose(
            image, _expected_tensor(_colour(*items[ds.paths[i].name]), image_size), atol=0.02
        )


# Each loader is checked on both storage paths: the decoded cache cropped on batches (default)
# and PIL decoding on access.
both_paths = pytest.mark.parametrize("decoded_cache", [True, False], ids=["cache", "pil"])


def _check_storage(splits: DatasetSplits, decoded_cache: bool) -> None:
    kind = CachedImageDataset if decoded_cache else ImageFileDataset
    parts = [splits.train, splits.test, splits.query, splits.gallery]
    assert all(isinstance(ds, kind) for ds in parts if ds is not None)


@both_paths
def test_cub200_fabricated(tmp_path: Path, decoded_cache: bool) -> None:
    folder = tmp_path / "CUB_200_2011"
    classes = [101, 99, 100, 200, 99, 101, 1, 150]  # image ids 1..8, shuffled classes
    items: dict[str, tuple[int, int]] = {}
    lines, labels = [], []
    for image_id, c in enumerate(classes, start=1):
        rel = f"{c:03d}.Bird_{c}/Bird_{c}_{image_id}.png"
        items[Path(rel).name] = (c, image_id)
        _write_image(folder / "images" / rel, _colour(c, image_id), (20 + image_id, 17))
        lines.append(f"{image_id} {rel}")
        labels.append(f"{image_id} {c}")
    (folder / "images.txt").write_text("\n".join(lines[::-1]) + "\n")  # order must not matter
    (folder / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    splits = load_dataset("cub200", root=tmp_path, image_size=16, decoded_cache=decoded_cache)
    _check_storage(splits, decoded_cache)
    train_classes = [c for c in classes if c <= 100]
    test_classes = [c for c in classes if c > 100]
    assert len(splits.train) == 4 and len(splits.test) == 4
    _check_split(splits.train, items, train_classes, 16)
    _check_split(splits.test, items, test_classes, 16)
    _check_test_pixels(splits.test, items, 16)
    assert splits.class_names == {
        "train": ["001.Bird_1", "099.Bird_99", "100.Bird_100"],
        "test": ["101.Bird_101", "150.Bird_150", "200.Bird_200"],
    }
    assert splits.input_shape == (3, 16, 16) and splits.num_train_classes == 3


def test_cub200_images_not_unpacked(tmp_path: Path) -> None:
    folder = tmp_path / "CUB_200_2011"
    folder.mkdir()
    (folder / "images.txt").write_text("1 001.A/a.jpg\n2 101.B/b.jpg\n")
    (folder / "image_class_labels.txt").write_text("1 1\n2 101\n")
    with pytest.raises(
        FileNotFoundError, match=str(folder / "images" / "001.A" / "a.jpg").replace(".", r"\.")
    ):
        load_dataset("cub200", root=tmp_path)


@both_paths
def test_cars196_fabricated(tmp_path: Path, decoded_cache: bool) -> None:
    folder = tmp_path / "Cars196"
    classes = [98, 99, 1, 196, 98, 99]
    items = {}
    records = []
    for k, c in enumerate(classes):
        rel = f"car_ims/{k + 1:06d}.png"
        items[Path(rel).name] = (c, k)
        _write_image(folder / rel, _colour(c, k), (30, 18 + k))
        records.append((rel, c, k % 2))
    annotations = np.array(
        records, dtype=[("relative_im_path", "O"), ("class", "O"), ("test", "O")]
    )
    class_names = np.array([f"Car model {i}" for i in range(1, 197)], dtype=object)
    scipy.io.savemat(
        folder / "cars_annos.mat",
        {"annotations": annotations[None, :], "class_names": class_names[None, :]},
    )
    splits = load_dataset("cars196", root=tmp_path, image_size=12, decoded_cache=decoded_cache)
    _check_storage(splits, decoded_cache)
    _check_split(splits.train, items, [c for c in classes if c <= 98], 12)
    _check_split(splits.test, items, [c for c in classes if c > 98], 12)
    _check_test_pixels(splits.test, items, 12)
    assert splits.class_names == {
        "train": ["Car model 1", "Car model 98"],
        "test": ["Car model 99", "Car model 196"],
    }


@both_paths
def test_sop_fabricated(tmp_path: Path, decoded_cache: bool) -> None:
    folder = tmp_path / "Stanford_Online_Products"
    items = {}
    parts = {
        "train": [(1, 1), (1, 1), (7, 2), (3, 1)],
        "test": [(11319, 3), (11320, 3), (11319, 3)],
    }
    image_id = 0
    for split, rows in parts.items():
        lines = ["image_id class_id super_class_id path"]
        for c, sc in rows:
            image_id += 1
            rel = f"cat{sc}_final/{c}_{image_id}.png"
            items[Path(rel).name] = (c, image_id)
            _write_image(folder / rel, _colour(c, image_id), (15, 15))
            lines.append(f"{image_id} {c} {sc} {rel}")
        (folder / f"Ebay_{split}.txt").write_text("\n".join(lines) + "\n")
    splits = load_dataset("sop", root=tmp_path, image_size=8, decoded_cache=decoded_cache)
    _check_storage(splits, decoded_cache)
    _check_split(splits.train, items, [c for c, _ in parts["train"]], 8)
    _check_split(splits.test, items, [c for c, _ in parts["test"]], 8)
    _check_test_pixels(splits.test, items, 8)
    assert splits.train.labels.tolist() == [0, 0, 2, 1]


@both_paths
def test_inshop_fabricated(tmp_path: Path, decoded_cache: bool) -> None:
    folder = tmp_path / "In-Shop"
    rows = [
        ("id_00000005", "train"),
        ("id_00000002", "train"),
        ("id_00000005", "train"),
        ("id_00000010", "query"),
        ("id_00000003", "query"),
        ("id_00000003", "gallery"),
        ("id_00000010", "gallery"),
        ("id_00000010", "gallery"),
    ]
    items = {}
    lines = [str(len(rows)), "image_name item_id evaluation_status"]
    for k, (item, status) in enumerate(rows):
        rel = f"img/WOMEN/Dresses/{item}/{k:02d}_front.png"
        number = int(item.split("_")[1])
        items[Path(rel).name] = (number, k)
        _write_image(folder / rel, _colour(number, k), (16, 24))
        lines.append(f"{rel}   {item}   {status}")
    (folder / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")
    splits = load_dataset("inshop", root=tmp_path, image_size=10, decoded_cache=decoded_cache)
    _check_storage(splits, decoded_cache)
    assert splits.query is not None and splits.gallery is not None
    assert (len(splits.train), len(splits.query), len(splits.gallery), len(splits.test)) == (
        3,
        2,
        3,
        5,
    )
    _check_split(splits.train, items, [5, 2, 5], 10)
    # query and gallery share one label map: item 3 -> 0, item 10 -> 1 in both
    assert splits.query.labels.tolist() == [1, 0]
    assert splits.gallery.labels.tolist() == [0, 1, 1]
    assert [p.name for p in splits.test.paths] == [
        p.name for p in splits.query.paths + splits.gallery.paths
    ]
    _check_test_pixels(splits.query, items, 10)
    _check_test_pixels(splits.gallery, items, 10)


@both_paths
def test_hotels50k_fabricated(tmp_path: Path, decoded_cache: bool) -> None:
    """Test images are the queries, training images the gallery, one label map (the hotel ids)."""
    train = [(3, 40), (3, 12), (7, 40), (7, 95), (3, 12)]  # (chain id, hotel id): hotels 12, 40, 95
    test = [(7, 95), (3, 12)]
    items = fabricated_hotels50k(tmp_path, train, test, colour=_colour)
    splits = load_dataset("hotels50k", root=tmp_path, image_size=10, decoded_cache=decoded_cache)
    _check_storage(splits, decoded_cache)
    assert (len(splits.train), len(splits.query), len(splits.gallery), len(splits.test)) == (
        5,
        2,
        5,
        7,
    )
    assert splits.class_names == {"train": ["12", "40", "95"], "test": ["12", "40", "95"]}
    by_name = lambda ds: [items[p.name][0] for p in ds.paths]  # noqa: E731  the hotel of each item
    assert sorted(by_name(splits.train)) == sorted(h for _, h in train)
    assert sorted(by_name(splits.query)) == [12, 95] and by_name(splits.gallery) == by_name(
        splits.train
    )
    for ds in (splits.train, splits.query, splits.gallery):
        assert ds.labels.tolist() == [[12, 40, 95].index(h) for h in by_name(ds)]
    assert [p.name for p in splits.test.paths] == [
        p.name for p in splits.query.paths + splits.gallery.paths
    ]
    assert not any(
        "occlusions" in str(p) for p in splits.test.paths
    )  # the occluded copies are not read
    _check_test_pixels(splits.query, items, 10)
    _check_test_pixels(splits.gallery, items, 10)  # the gallery: training images with the test crop
    # train and test share hotels: no class-disjoint validation split
    with pytest.raises(ValueError, match="share 3 classes"):
        load_dataset(
            "hotels50k", root=tmp_path, image_size=10, decoded_cache=decoded_cache, validation=2
        )


def test_hotels50k_errors_name_the_path_and_the_layout(tmp_path: Path) -> None:
    fabricated_hotels50k(tmp_path, [(3, 12), (3, 40)], [(3, 77)])
    with pytest.raises(ValueError, match=r"1 test hotel\(s\) have no training image .*\[77\]"):
        load_dataset("hotels50k", root=tmp_path)
    stray = tmp_path / "Hotels-50K" / "images" / "train" / "3" / "stray.jpg"
    Image.new("RGB", (4, 4)).save(stray)
    with pytest.raises(ValueError, match=f"{stray} is not at <chain_id>/<hotel_id>/"):
        load_dataset("hotels50k", root=tmp_path)
    empty = tmp_path / "empty"
    (empty / "Hotels-50K" / "images" / "train").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="images/test/unoccluded, which does not exist"):
        load_dataset("hotels50k", root=empty)


def test_gather_images_same_for_memory_and_file_backed_datasets():
    from dmlnb.data import InMemoryDataset, LabelledDataset, gather_images

    images = torch.rand(10, 3, 12, 12)
    mem = InMemoryDataset(images, torch.arange(10) % 3)

    class ItemsOnly(LabelledDataset):  # no get_batch: the file-backed path
        labels = mem.labels

        def __getitem__(self, i):
            return images[i], int(self.labels[i])

    pick = [7, 2, 2, 9]
    assert torch.equal(gather_images(mem, pick, batch_size=3), images[pick])
    assert torch.equal(gather_images(ItemsOnly(), pick, batch_size=3), images[pick])
    small = gather_images(mem, size=6)
    assert small.shape == (10, 3, 6, 6)
    torch.testing.assert_close(small.mean(dim=(2, 3)), images.mean(dim=(2, 3)), atol=0.02, rtol=0)
