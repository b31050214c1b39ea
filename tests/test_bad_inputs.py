"""Bad input fails early and says what is wrong (issue #14): configuration (:func:`make_config`),
notebook parameters (:func:`check_parameters`, also through papermill), data files.

Every case asserts the exception type and that the message names the offending key or value.
The tensor-level cases (losses, evaluation) live in their own file.
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fabricated import fabricated_cub

from dmlnb.data import load_dataset
from dmlnb.profiles import check_parameters, make_config

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never write the user's ~/.cache (the image-folder loaders build a decoded cache)."""
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))


# ---------------------------------------------------------------------------------------- config

CONFIG_CASES = [
    # (id, overrides, exception, text the message must contain)
    ("embedding_dim=0", {"embedding_dim": 0}, ValueError, "'embedding_dim'"),
    ("width=0", {"width": 0}, ValueError, "'width'"),
    ("epochs=-1", {"epochs": -1}, ValueError, "'epochs'"),
    ("steps_per_epoch=0", {"steps_per_epoch": 0}, ValueError, "'steps_per_epoch'"),
    ("grad_clip=-1.0", {"grad_clip": -1.0}, ValueError, "'grad_clip'"),
    ("m_per_class=0", {"m_per_class": 0}, ValueError, "'m_per_class'"),
    ("batch_size=1", {"batch_size": 1, "m_per_class": 1}, ValueError, "'batch_size'"),
    ("eval_every=0", {"eval_every": 0}, ValueError, "'eval_every'"),
    ("eval_batch_size=0", {"eval_batch_size": 0}, ValueError, "'eval_batch_size'"),
    ("num_workers=-1", {"num_workers": -1}, ValueError, "'num_workers'"),
    ("seed=-1", {"seed": -1}, ValueError, "'seed'"),
    ("lr=-0.001", {"lr": -1e-3}, ValueError, "'lr'"),
    ("lr=nan", {"lr": math.nan}, ValueError, "'lr'"),
    ("loss_lr=-1", {"loss_lr": -1.0}, ValueError, "'loss_lr'"),
    ("weight_decay=-0.1", {"weight_decay": -0.1}, ValueError, "'weight_decay'"),
    ("momentum=1.5", {"momentum": 1.5}, ValueError, "'momentum'"),
    ("lr_gamma=0", {"lr_gamma": 0.0}, ValueError, "'lr_gamma'"),
    ("lr_milestones=('x',)", {"lr_milestones": ("x",)}, TypeError, "'lr_milestones'"),
    ("lr_milestones=(2.5,)", {"lr_milestones": (2.5,)}, ValueError, "2.5"),
    ("lr_milestones=(-0.5,)", {"lr_milestones": (-0.5,)}, ValueError, "'lr_milestones'"),
    ("eval_ks=('a',)", {"eval_ks": ("a",)}, TypeError, "'eval_ks'"),
    ("eval_ks=(0,)", {"eval_ks": (0,)}, ValueError, "'eval_ks'"),
    ("eval_ks=(1,1)", {"eval_ks": (1, 1)}, ValueError, "'eval_ks'"),
    ("eval_ks=() with recall", {"eval_ks": ()}, ValueError, "eval_ks"),
    ("eval_metrics unknown", {"eval_metrics": ("recall", "accuracy")}, ValueError, "'accuracy'"),
    ("select_metric=R@3", {"select_metric": "R@3"}, ValueError, "'R@3'"),
    (
        "select_metric=NMI without nmi",
        {"select_metric": "NMI", "eval_metrics": ("recall",)},
        ValueError,
        "'NMI'",
    ),
    ("optimizer=adagrad", {"optimizer": "adagrad"}, ValueError, "'adagrad'"),
    ("model=resnet", {"model": "resnet"}, ValueError, "'resnet'"),
    ("dataset=imagenet", {"dataset": "imagenet"}, ValueError, "'imagenet'"),
    ("device=gpu", {"device": "gpu"}, ValueError, "'gpu'"),
    ("dataset_options=list", {"dataset_options": ["image_size"]}, TypeError, "'dataset_options'"),
    ("amp='yes'", {"amp": "yes"}, TypeError, "'amp'"),
    ("batch not multiple of m", {"batch_size": 30, "m_per_class": 8}, ValueError, "m_per_class"),
]


@pytest.mark.parametrize(
    "overrides,error,text", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES]
)
def test_make_config_rejects(overrides: dict, error: type, text: str) -> None:
    with pytest.raises(error) as info:
        make_config("smoke", overrides)
    assert text in str(info.value)
    assert "must" in str(info.value) or "choose" in str(info.value)  # says what is allowed


@pytest.mark.parametrize(
    "overrides", ["epochs=3", [("epochs", 3)], 3], ids=["str", "list-of-pairs", "int"]
)
def test_make_config_overrides_must_be_a_mapping(overrides: Any) -> None:
    with pytest.raises(TypeError, match=r"overrides must be a dict .*\{\"epochs\": 3\}"):
        make_config("smoke", overrides)


def test_replace_checks_ranges_too() -> None:
    with pytest.raises(ValueError, match="'epochs'"):
        make_config("smoke").replace(epochs=0)


# ------------------------------------------------------------------------- notebook parameters

PARAMETER_CASES = [
    ("seeds=3", {"seeds": 3}, TypeError, "'seeds'"),
    ("seeds='0,1'", {"seeds": "0,1"}, TypeError, "-y 'seeds: [0, 1, 2]'"),
    ("seeds=[]", {"seeds": []}, ValueError, "'seeds'"),
    ("seeds=[0,0]", {"seeds": [0, 0]}, ValueError, "'seeds'"),
    ("seeds=[-1]", {"seeds": [-1]}, ValueError, "'seeds'"),
    ("kmeans_seeds=[1.5]", {"kmeans_seeds": [1.5]}, TypeError, "'kmeans_seeds'"),
    ("group_sizes=[1,2]", {"group_sizes": [1, 2]}, ValueError, "'group_sizes'"),
    ("m_grid=[0]", {"m_grid": [0]}, ValueError, "'m_grid'"),
    ("lambda_grid=[-0.1]", {"lambda_grid": [-0.1]}, ValueError, "'lambda_grid'"),
    ("temperature=0", {"temperature": 0}, ValueError, "'temperature'"),
    ("temperature=-0.05", {"temperature": -0.05}, ValueError, "'temperature'"),
    ("gamma=-1", {"gamma": -1.0}, ValueError, "'gamma'"),
    ("tsne_classes=0", {"tsne_classes": 0}, ValueError, "'tsne_classes'"),
    ("threads=0", {"threads": 0}, ValueError, "'threads'"),
    ("retrain='yes'", {"retrain": "yes"}, TypeError, "'retrain'"),
    ("validation='yes'", {"validation": "yes"}, TypeError, "'validation'"),
    (
        "validation=1.5",
        {"validation": 1.5},
        ValueError,
        "a fraction of the training classes in (0, 1)",
    ),
    ("validation=0", {"validation": 0}, ValueError, "'validation'"),
    ("results_dir=''", {"results_dir": ""}, ValueError, "'results_dir'"),
    ("data_root=3", {"data_root": 3}, TypeError, "'data_root'"),
    ("profile=nope", {"profile": "nope"}, ValueError, "'nope'"),
    ("overrides as text", {"overrides": '{"epochs": -1}'}, TypeError, "'overrides'"),
    ("overrides epochs=-1", {"overrides": {"epochs": -1}}, ValueError, "'epochs'"),
    ("overrides unknown key", {"overrides": {"epoch": 3}}, KeyError, "'epoch'"),
    ("unknown parameter", {"sedes": [0]}, KeyError, "'sedes'"),
]


@pytest.mark.parametrize(
    "parameters,error,text", [c[1:] for c in PARAMETER_CASES], ids=[c[0] for c in PARAMETER_CASES]
)
def test_check_parameters_rejects(parameters: dict, error: type, text: str) -> None:
    with pytest.raises(error) as info:
        check_parameters(parameters)
    assert text in str(info.value)


def test_required_parameter_may_not_be_none() -> None:
    with pytest.raises(TypeError, match="'seeds' must be a non-empty"):
        check_parameters({"seeds": None}, required=("seeds",))
    check_parameters({"seeds": None})  # elsewhere None means "the profile's seeds"


def _setup_call(path: Path) -> tuple[dict[str, Any], str]:
    """A notebook's parameters (the tagged cell's values) and its set-up cell's
    ``check_parameters(...)`` statement."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    i = next(k for k, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    namespace: dict[str, Any] = {}
    exec("".join(cells[i]["source"]), namespace)
    setup = cells[i + 2]  # after papermill's injected "Parameters" cell
    tree = ast.parse("".join(setup["source"]).replace("%matplotlib inline", ""))
    calls = [
        n for n in tree.body if isinstance(n, ast.Expr) and "check_parameters" in ast.unparse(n)
    ]
    assert len(calls) == 1, f"{path.name}: the set-up cell must call check_parameters once"
    params = {k: v for k, v in namespace.items() if not k.startswith("__")}
    return params, ast.unparse(calls[0])


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("0*.ipynb")), ids=lambda p: p.name)
def test_every_notebook_checks_all_its_parameters_and_its_defaults_pass(path: Path) -> None:
    params, call = _setup_call(path)
    passed = {k.arg for k in ast.parse(call).body[0].value.args[0].keywords}  # type: ignore[attr-defined]
    assert passed == set(params), f"{path.name} checks {sorted(passed)}, declares {sorted(params)}"
    exec(call, {"check_parameters": check_parameters, **params})
    for profile in ("smoke", "default", "paper"):
        exec(call, {"check_parameters": check_parameters, **params, "profile": profile})


# ------------------------------------------------------------------------------------ data files


def _cub(root: Path) -> Path:
    fabricated_cub(root, [1, 1, 2, 2, 101, 101, 102, 102])
    return root / "CUB_200_2011"


def test_truncated_jpeg_names_its_file(tmp_path: Path) -> None:
    """On access with PIL; when the decoded cache is built (the default), at load, and no
    half-built cache file is left behind."""
    folder = _cub(tmp_path)
    image = folder / "images" / "001.Bird_1" / "img_1.jpg"
    image.write_bytes(image.read_bytes()[:200])
    splits = load_dataset("cub200", root=tmp_path, image_size=8, decoded_cache=False)
    with pytest.raises(OSError, match="img_1.jpg") as info:
        splits.train[0]
    assert str(image) in str(info.value) and "truncated or corrupt" in str(info.value)
    with pytest.raises(OSError, match="img_1.jpg") as info:
        load_dataset("cub200", root=tmp_path, image_size=8)
    assert str(image) in str(info.value) and "truncated or corrupt" in str(info.value)
    assert not list((tmp_path / "cache").glob("decoded-cub200-train-*"))


def test_file_that_is_not_an_image_names_its_file(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    image = folder / "images" / "101.Bird_101" / "img_5.jpg"
    image.write_text("<html>404 Not Found</html>")
    splits = load_dataset("cub200", root=tmp_path, image_size=8, decoded_cache=False)
    with pytest.raises(OSError, match="img_5.jpg"):
        splits.test[0]
    with pytest.raises(OSError, match="img_5.jpg"):
        load_dataset("cub200", root=tmp_path, image_size=8)


def test_missing_image_in_the_middle_names_its_file(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    image = folder / "images" / "002.Bird_2" / "img_3.jpg"
    image.unlink()
    with pytest.raises(FileNotFoundError, match="img_3.jpg"):
        load_dataset("cub200", root=tmp_path, image_size=8)


IMAGE_FOLDER_OPTION_CASES = [
    # (id, options, exception, texts the message must contain)
    (
        "decoded_cache='yes'",
        {"decoded_cache": "yes"},
        TypeError,
        ["decoded_cache", "'yes'", "True", "False"],
    ),
    ("cache_size=0", {"cache_size": 0}, ValueError, ["cache_size", "0", "e.g. 10"]),
    ("cache_size=12.5", {"cache_size": 12.5}, ValueError, ["cache_size", "12.5"]),
    (
        "cache_size-without-cache",
        {"decoded_cache": False, "cache_size": 12},
        ValueError,
        ["cache_size=12", "decoded_cache=True"],
    ),
    ("image_size=0", {"image_size": 0}, ValueError, ["image_size", "0"]),
    ("resize<image_size", {"resize": 6}, ValueError, ["resize=6", "image_size=8", "resize >= 8"]),
    ("padding-without-resize", {"padding": 2}, ValueError, ["padding=2", "set resize"]),
    ("padding=-1", {"resize": 10, "padding": -1}, ValueError, ["padding", "-1"]),
]


@pytest.mark.parametrize("dataset", ["cub200", "cars196", "sop", "inshop", "hotels50k"])
@pytest.mark.parametrize(
    "options,exception,texts",
    [c[1:] for c in IMAGE_FOLDER_OPTION_CASES],
    ids=[c[0] for c in IMAGE_FOLDER_OPTION_CASES],
)
def test_bad_image_folder_option_names_the_option(
    dataset: str, options: dict, exception: type, texts: list[str], tmp_path: Path
) -> None:
    """Checked before any file is read: the data root may even be empty."""
    options = {"image_size": 8, **options}
    with pytest.raises(exception) as info:
        load_dataset(dataset, root=tmp_path, **options)
    for text in texts:
        assert text in str(info.value)


def test_cub_non_integer_class_id_names_file_line_and_value(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    labels = folder / "image_class_labels.txt"
    lines = labels.read_text().splitlines()
    lines[2] = "3 two"
    labels.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        load_dataset("cub200", root=tmp_path)
    assert f"{labels}:3" in str(info.value) and "'two'" in str(info.value)


def test_cub_missing_label_row_names_image_id_and_files(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    labels = folder / "image_class_labels.txt"
    lines = labels.read_text().splitlines()
    labels.write_text("\n".join(lines[:5] + lines[6:]) + "\n")  # drop image 6
    with pytest.raises(ValueError) as info:
        load_dataset("cub200", root=tmp_path)
    message = str(info.value)
    assert "[6]" in message and "image_class_labels.txt" in message and "images.txt" in message


def test_cub_short_row_names_file_and_line(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    index = folder / "images.txt"
    index.write_text(index.read_text() + "9\n")
    with pytest.raises(ValueError, match=f"{index}:9: expected 2"):
        load_dataset("cub200", root=tmp_path)


def test_cub_non_integer_image_id_names_file_and_line(tmp_path: Path) -> None:
    folder = _cub(tmp_path)
    index = folder / "images.txt"
    index.write_text("one 001.Bird_1/img_1.jpg\n" + index.read_text())
    with pytest.raises(ValueError) as info:
        load_dataset("cub200", root=tmp_path)
    assert f"{index}:1" in str(info.value) and "'one'" in str(info.value)


def test_sop_non_integer_class_id_names_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "Stanford_Online_Products"
    folder.mkdir()
    for split in ("train", "test"):
        (folder / f"Ebay_{split}.txt").write_text(
            "image_id class_id super_class_id path\n1 1 1 a_final/1.JPG\n2 x1 1 a_final/2.JPG\n"
        )
    with pytest.raises(ValueError) as info:
        load_dataset("sop", root=tmp_path)
    assert f"{folder / 'Ebay_train.txt'}:3" in str(info.value) and "'x1'" in str(info.value)


# ------------------------------------------------------------------------ through papermill
# Each case fails in the set-up cell (cell 3: after the parameters and injected cells), so it
# costs one kernel start. Values are what papermill's ``-p`` produces (``-p seeds 3`` -> int 3,
# ``-p overrides '{...}'`` -> a str) or ``-y`` (lists, dicts).

PAPERMILL_CASES = [
    ("00-seeds=3", "00_protocol", {"seeds": 3}, "TypeError", "'seeds'"),
    ("00-profile=nope", "00_protocol", {"profile": "nope"}, "ValueError", "'nope'"),
    (
        "00-overrides-as-text",
        "00_protocol",
        {"overrides": '{"epochs": -1}'},
        "TypeError",
        "'overrides'",
    ),
    ("01-tsne_classes=0", "01_easy_positive", {"tsne_classes": 0}, "ValueError", "'tsne_classes'"),
    ("02-gamma=-1", "02_facility_location", {"gamma": -1.0}, "ValueError", "'gamma'"),
    (
        "03-kmeans_seeds-repeat",
        "03_discriminative",
        {"kmeans_seeds": [0, 0]},
        "ValueError",
        "'kmeans_seeds'",
    ),
    ("04-m_grid=[0,4]", "04_profs", {"m_grid": [0, 4]}, "ValueError", "'m_grid'"),
    ("05-overrides-epochs=-1", "05_ssdml", {"overrides": {"epochs": -1}}, "ValueError", "'epochs'"),
]


@pytest.mark.notebook
@pytest.mark.parametrize(
    "stem,parameters,ename,text",
    [c[1:] for c in PAPERMILL_CASES],
    ids=[c[0] for c in PAPERMILL_CASES],
)
def test_bad_notebook_parameter_fails_in_the_setup_cell(
    stem: str,
    parameters: dict,
    ename: str,
    text: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    papermill = pytest.importorskip("papermill")
    monkeypatch.delenv("DMLNB_PROFILE", raising=False)
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(
            str(NOTEBOOKS / f"{stem}.ipynb"),
            str(tmp_path / "out.ipynb"),
            parameters={"profile": "smoke", "results_dir": str(tmp_path / "results"), **parameters},
            kernel_name="python3",
            cwd=str(NOTEBOOKS),
            progress_bar=False,
        )
    assert info.value.ename == ename
    assert text in info.value.evalue
    assert info.value.cell_index == 3, "must fail in the set-up cell, before any work"
    assert not (tmp_path / "results").exists()


@pytest.mark.notebook
def test_papermill_cli_dash_p_seeds_3_names_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line of the issue: ``papermill ... -p seeds 3``."""
    monkeypatch.delenv("DMLNB_PROFILE", raising=False)
    out = tmp_path / "out.ipynb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(NOTEBOOKS / "00_protocol.ipynb"),
            str(out),
            "-k",
            "python3",
            "--cwd",
            str(NOTEBOOKS),
            "--no-progress-bar",
            "-p",
            "profile",
            "smoke",
            "-p",
            "results_dir",
            str(tmp_path / "results"),
            "-p",
            "seeds",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    errors = [
        o
        for c in json.loads(out.read_text())["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert [e["ename"] for e in errors] == ["TypeError"]
    assert "'seeds'" in errors[0]["evalue"] and "-y 'seeds: [0, 1, 2]'" in errors[0]["evalue"]
