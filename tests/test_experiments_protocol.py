"""dmlnb.experiments.protocol: the protocol chapter's softmax runs are reloaded or trained, and what
the chapter draws from the trained network is stored next to the record and read back without
weights."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dmlnb.chapter import RunSet, evaluate, train_runs
from dmlnb.checkpoints import load_checkpoint
from dmlnb.data import load_dataset
from dmlnb.evaluation import compute_embeddings, knn
from dmlnb.experiments import protocol
from dmlnb.models import configured_model
from dmlnb.profiles import make_config
from dmlnb.records import as_json, read_json
from dmlnb.run_analysis import ANALYSIS_FILE
from dmlnb.training import NO_TRAINING_ENV, TrainingDisabledError

TINY = {"epochs": 1, "steps_per_epoch": 2, "eval_every": 1}
SMALL = {**protocol.VIEW_SETTINGS, "points": 60, "queries": 3, "k": 2}


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))


def test_view_indices_are_seeded_draws_without_repetition():
    points, queries = protocol.view_indices(100, SMALL)
    assert points.shape == (60,) and queries.shape == (3,) and points.unique().numel() == 60
    again = protocol.view_indices(100, SMALL)
    assert points.tolist() == again[0].tolist() and queries.tolist() == again[1].tolist()
    assert protocol.view_indices(40, SMALL)[0].shape == (40,)  # capped at the test set


def _softmax(config, splits, folder, retrain=False):
    """The chapter's seed-``config.seed`` softmax run, through the chapter layer."""
    groups = protocol.softmax_groups([config.seed], 0.05)
    runs = train_runs(groups, config, folder, splits=splits, retrain=retrain, say=lambda _: None)
    return runs.run(protocol.GROUP, protocol.LABEL, config.seed)


def test_views_are_read_from_analysis_json_without_weights(tmp_path, monkeypatch):
    config = make_config("smoke", TINY)
    splits = load_dataset(config.dataset)
    run_dir = tmp_path / "softmax-seed0"
    run = _softmax(config, splits, tmp_path)
    assert run.trained and (run_dir / "checkpoint.pt").exists()
    assert run.record.data["spec"]["loss_seed"] == "config.seed"  # the committed records' entries
    views, same = protocol.embedding_views(run, config, splits, SMALL)
    assert same is run and views["tsne"].shape == (60, 2) and views["neighbours"].shape == (3, 2)
    # the neighbours are the final network's (checkpoint.pt), the queries' nearest other test images
    model = configured_model(config, splits.input_shape)
    model.load_state_dict(load_checkpoint(run_dir / "checkpoint.pt")["model"])
    emb, _ = compute_embeddings(model, splits.test)
    _, queries = protocol.view_indices(len(splits.test), SMALL)
    assert views["neighbours"].tolist() == knn(emb, None, k=2)[1][queries].tolist()
    assert read_json(run_dir / ANALYSIS_FILE)["embedding_views"]["run"] == run.record.outcome()
    # weights gone, training disabled: the record is reloaded and the views read from the file
    (run_dir / "checkpoint.pt").unlink()
    (run_dir / "best.pt").unlink()
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    again = _softmax(config, splits, tmp_path)
    assert not again.trained and again.record.data == as_json(run.record.data)
    for key, value in protocol.embedding_views(again, config, splits, SMALL)[0].items():
        np.testing.assert_array_equal(value, views[key])
    # a changed setting needs the weights: with none and training disabled, an error naming both
    with pytest.raises(
        TrainingDisabledError,
        match=r"'softmax-seed0'.*'embedding_views' is needed: .*other settings",
    ):
        protocol.embedding_views(again, config, splits, {**SMALL, "k": 3})
    with pytest.raises(TrainingDisabledError, match="softmax-seed1"):  # nor is a missing run
        _softmax(config.replace(seed=1), splits, tmp_path)
    # training allowed: the run is trained again (seeded by the run: the same record) and the
    # views redone
    monkeypatch.delenv(NO_TRAINING_ENV)
    torch.manual_seed(123)  # the run seeds itself: what ran before does not matter
    views3, retrained = protocol.embedding_views(again, config, splits, {**SMALL, "k": 3})
    assert retrained.trained and views3["neighbours"].shape == (3, 3)
    assert retrained.record.outcome() == run.record.outcome()
    assert views3["neighbours"][:, :2].tolist() == views["neighbours"].tolist()
    assert read_json(run_dir / ANALYSIS_FILE)["embedding_views"]["settings"]["k"] == 3


def test_the_claims_follow_the_floors_and_the_books_optimism():
    runs = RunSet(
        {
            protocol.GROUP: {
                (protocol.LABEL, s): SimpleNamespace(metrics={"R@1": v}, record=None)
                for s, v in enumerate([0.50, 0.52, 0.51])
            }
        }
    )
    floors = {"raw pixels": {"R@1": 0.30}, "untrained network": {"R@1": 0.70}}
    optimism = pd.DataFrame(
        {
            "validation split": [True, True, True, False],
            "optimism": [0.01, 0.02, 0.015, None],
            "evaluations": [5, 5, 5, 5],
        }
    )
    judged = evaluate(protocol.chapter_claims(floors, optimism), runs)
    verdicts = {j.spec.id: str(j.verdict) for j in judged}
    assert verdicts == {
        "softmax-beats-raw-pixels": "holds",
        "softmax-beats-untrained-network": "does not hold",
        "test-selection-optimistic": "holds",
    }
    assert judged[-1].verdict.n == (3,)  # the run without a validation split is left out


def test_the_holdout_sentence_is_computed_from_the_splits():
    assert protocol.holdout_sentence({"train": 109, "validation": 27, "test": 60}).startswith(
        "27 of the 136 training classes"
    )
    assert "No validation classes" in protocol.holdout_sentence({"train": 136, "test": 60})


def test_floors_need_no_training_and_are_seeded(monkeypatch, tmp_path):
    """Raw pixels and the untrained network: every metric, the same numbers twice, and with
    training disabled (the SSDML chapter computes them too); stored in a folder, reloaded."""
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    config = make_config("smoke")
    splits = load_dataset(config.dataset)
    rows = protocol.floors(config, splits)
    assert list(rows) == ["raw pixels", "untrained network"]
    assert set(rows["raw pixels"]) == {"R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R"}
    assert protocol.pixel_vectors(splits).shape == (
        len(splits.test),
        64,
    )  # 8 x 8 digits, not resized
    assert protocol.floors(config, splits) == rows
    stored = protocol.floors(config, splits, folder=tmp_path / "floors")  # stored, then reloaded
    monkeypatch.setattr(
        protocol, "evaluate", lambda *a, **k: pytest.fail("a stored floor was evaluated again")
    )
    assert protocol.floors(config, splits, folder=tmp_path / "floors") == stored == rows
    assert protocol.untrained_name(config.replace(pretrained=True)).endswith(
        "(ImageNet weights, random head)"
    )
