"""dmlnb.experiments.easy_positive: presets, the declared runs (their names and fingerprints, the
committed records'), training and reloading through the chapter layer with the stored analyses,
verdicts, the declared claims and deviations, the paper's tables and the paper-profile path on
fabricated CUB and Hotels-50K trees."""

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from fabricated import fabricated_cub, fabricated_hotels50k, selected_record

from dmlnb.analysis import nearest_same_and_other
from dmlnb.chapter import RunGroup, deviations_frame
from dmlnb.evaluation import compute_embeddings, recall_at_k
from dmlnb.experiments import easy_positive as ep
from dmlnb.losses import EasyPositiveLoss, ProxyNCALoss, TripletLoss
from dmlnb.records import run_fingerprint
from dmlnb.reporting import paper_run_status
from dmlnb.run_analysis import ANALYSIS_FILE
from dmlnb.runs import Run
from dmlnb.selection import NOT_RECOMPUTED, both_ways_text
from dmlnb.training import NO_TRAINING_ENV, TrainingDisabledError

TINY = {"epochs": 1, "steps_per_epoch": 2, "eval_every": 1}


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))


# ------------------------------------------------------------------------------ presets


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_every_profile_resolves(profile):
    study = ep.make_study(profile)
    assert study.key_group_size in study.group_sizes
    assert all(study.config.batch_size % n == 0 for n in study.group_sizes)
    assert set(study.seeds) >= set(study.grid_seeds)
    assert ep.describe(study, ep.declare(study)).startswith(f"profile {profile}:")


def _names(groups, *which):
    return {s.name for g in which for s in groups[g].runs()}


def test_default_design_and_run_count():
    study = ep.make_study("default")
    c = study.config
    assert (c.dataset, c.model, c.embedding_dim, c.batch_size, c.width) == (
        "omniglot-small",
        "convnet",
        64,
        128,
        64,
    )
    # every epoch evaluated: a selection exists, its optimism is measured
    assert (c.epochs, c.eval_every) == (5, 1)
    assert (
        study.group_sizes == (2, 4, 8, 16) and study.key_group_size == 16 and len(study.seeds) == 3
    )
    batches = ep.declare(study)
    assert len(batches) == 1  # Table 1's cell is the study's configuration: shared runs are one
    groups = batches[0].groups
    fig4 = _names(groups, "n2", "n4", "n8", "n16", "N-pair")
    # 3 seeds at every point of the grid (the verdict rule's minimum per swept value):
    # n = 2: N-pair + EPHN, EPSHN, HPHN; n = 4, 8, 16: 6 methods
    assert study.grid_seeds == study.seeds and len(fig4) == 3 * (4 + 6 + 6 + 6)
    assert sorted(groups["n2"].methods) == ["EPHN", "EPSHN", "HPHN"]
    assert all(len(groups[f"n{n}"].seeds) >= 3 for n in study.group_sizes)
    # Table 1 reuses EPSHN (n = 16) and N-pair (n = 2) and adds triplet / Proxy-NCA x 3 seeds
    t1 = _names(groups, "table1", "table1 N-pair", "table1 Proxy-NCA") - fig4
    assert len(t1) == 6 and {n.split("-d64-")[1].split("-n")[0] for n in t1} == {
        "triplet",
        "Proxy-NCA",
    }
    assert all(groups[g].changes["m_per_class"] == 16 for g in ("table1", "table1 Proxy-NCA"))
    # the semi-hard rule comparison: the strict runs are Figure 4's, the inclusive ones (n = 16,
    # the 3 key seeds) in folders of their own
    strict = {s.name for s in groups["semihard"].runs() if s.label == "strict"}
    inclusive = {s.name for s in groups["semihard"].runs() if s.label == "inclusive"}
    assert strict <= fig4 and len(inclusive) == 3 and not inclusive & fig4
    assert "75 distinct training runs" in ep.describe(study, batches)


COMMITTED = Path(__file__).resolve().parents[1] / "results" / "01_easy_positive" / "default"


def _fingerprints(batches):
    return {
        s.name: run_fingerprint(s.config(b.config), s.spec)
        for b in batches
        for g in b.groups.values()
        for s in g.runs()
    }


def test_the_declared_runs_are_the_committed_records_and_a_change_retrains_its_runs():
    """The declaration at the notebook's defaults names every committed record's folder with its
    fingerprint (so they reload, nothing retrains); a changed method argument changes the
    fingerprints of that method's runs, and only theirs."""
    study = ep.make_study("default", validation=True)
    declared = _fingerprints(ep.declare(study))
    committed = {
        p.parent.name: json.loads(p.read_text())["fingerprint"]
        for p in COMMITTED.glob("*/record.json")
    }
    assert declared == committed and len(declared) == 75
    changed = _fingerprints(ep.declare(study, {"EPSHN": {"temperature": 0.05}}))
    moved = {n for n in declared if changed[n] != declared[n]}
    assert moved == {n for n in declared if "-EPSHN-" in n} and len(moved) == 15
    triplet = _fingerprints(ep.declare(study, {"triplet": {"margin": 0.1}}))
    assert {n for n in declared if triplet[n] != declared[n]} == {
        n for n in declared if "-triplet-" in n
    }


def test_smoke_preset_fits_the_smoke_validation_hold_out(tmp_path):
    """3 digits classes remain after the smoke hold-out: every smoke batch holds
    at most 3 classes."""
    study = ep.make_study("smoke", validation=True)
    c = study.config
    assert (c.batch_size, study.group_sizes, study.key_group_size, c.eval_every) == (
        6,
        (2, 3),
        3,
        1,
    )
    assert c.select_on == "validation" and c.dataset_options["validation"] == 2
    assert all(c.batch_size // n <= 3 for n in study.group_sizes)
    splits = ep.StoredAnalyses(tmp_path, []).splits(c)
    assert splits.train.num_classes == 3 and splits.validation.num_classes == 2


def test_canonical_method_and_run_config():
    assert [ep.canonical_method(m, 2) for m in ep.MINING_METHODS] == [
        "N-pair",
        "EPHN",
        "EPSHN",
        "N-pair",
        "HPHN",
        "N-pair",
    ]
    assert ep.canonical_method("EP", 4) == "EP"
    with pytest.raises(ValueError):
        ep.canonical_method("XX", 4)
    study = ep.make_study("default")
    (batch,) = ep.declare(study)
    cfg = batch.run_config("N-pair", "N-pair", 2)
    assert (cfg.m_per_class, cfg.seed) == (2, 2)
    proxy = batch.run_config("table1 Proxy-NCA", "Proxy-NCA", 0)
    assert proxy.loss_lr == pytest.approx(study.config.lr * study.proxy_lr_factor)
    assert batch.run_config("table1", "triplet", 0).loss_lr == study.config.loss_lr
    assert ep.figure4_side("BA", 2) == ("N-pair", "N-pair") and ep.figure4_side("BA", 4) == (
        "n4",
        "BA",
    )
    names = [s.name for s in batch.groups["N-pair"].runs()]
    assert names[0] == "omniglot-small-convnet-d64-N-pair-n2-seed0"


def _build(method, classes, dim):
    return ep.METHODS[method].build(num_classes=classes, embedding_dim=dim)


def test_build_loss_types_and_n2_equivalence():
    assert isinstance(_build("triplet", 5, 8), TripletLoss)
    proxy = _build("Proxy-NCA", 5, 8)
    assert isinstance(proxy, ProxyNCALoss) and proxy.proxies.shape == (5, 8) and proxy.scale == 9.0
    assert isinstance(_build("EPSHN", 5, 8), EasyPositiveLoss)
    with pytest.raises(KeyError, match="unknown method"):
        ep.methods({"magnet": {}})
    # group size 2: one positive per anchor, so EP = HP = BA = N-pair, computed independently
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(12, 6, generator=g), dim=1)
    y = torch.arange(6).repeat_interleave(2)
    values = [float(_build(m, 6, 6)(x, y)) for m in ("EP", "HP", "BA", "N-pair")]
    s = (x @ x.T).double() / 0.1
    ref = []
    for a in range(12):
        p = a ^ 1  # the partner of a in its pair
        neg = [j for j in range(12) if y[j] != y[a]]
        ref.append(-s[a, p] + torch.logsumexp(torch.stack([s[a, p]] + [s[a, j] for j in neg]), 0))
    assert values == pytest.approx([float(torch.stack(ref).mean())] * 4, rel=1e-5)


def test_epshn_runs_the_papers_strict_rule_and_the_inclusive_one_in_folders_of_its_own():
    """The paper's strict rule is the default; EPSHN's specification always names its rule, and
    the authors' inclusive rule runs under names of its own."""
    assert _build("EPSHN", 5, 8).semihard == "strict"
    proc = ep.AsRecorded()
    assert proc.spec_entries("EPSHN", ep.METHODS["EPSHN"]) == {
        "method": "EPSHN",
        "semihard": "strict",
    }
    assert proc.spec_entries("EPHN", ep.METHODS["EPHN"]) == {"method": "EPHN"}  # no semi-hard
    assert proc.spec_entries("triplet", ep.METHODS["triplet"]) == {
        "method": "triplet",
        "triplet_margin": 0.2,
    }
    study = ep.make_study("default")
    (batch,) = ep.declare(study)
    semi = {s.label: s for s in batch.groups["semihard"].runs() if s.seed == 0}
    assert semi["strict"].name == "omniglot-small-convnet-d64-EPSHN-n16-seed0"
    assert semi["inclusive"].name == "omniglot-small-convnet-d64-EPSHN-n16-seed0-semihard-inclusive"
    spec = semi["inclusive"].spec
    assert spec["method"] == "EPSHN" and spec["semihard"] == "inclusive"
    assert spec["factory"]["args"]["semihard"] == "inclusive"
    # the strict run is Figure 4's EPSHN at n = 16: one name, one specification
    fig = next(s for s in batch.groups["n16"].runs() if s.label == "EPSHN" and s.seed == 0)
    assert (fig.name, fig.spec) == (semi["strict"].name, semi["strict"].spec)
    # a reader's change to EPSHN reaches both rules' runs
    changed = ep.declare(study, {"EPSHN": {"temperature": 0.05}})[0].groups["semihard"]
    assert all(s.call.args["temperature"] == 0.05 for s in changed.runs())


def test_paper_profile_matches_the_paper():
    study = ep.make_study("paper")
    c = study.config
    assert (c.dataset, c.model, c.pretrained, c.batch_size) == ("cars196", "resnet18", True, 128)
    assert (c.optimizer, c.momentum, c.epochs, c.lr, c.lr_milestones) == (
        "sgd",
        0.0,
        40,
        5e-4,
        (20, 30),
    )
    assert c.dataset_options == {
        "image_size": 256,
        "resize": 256,
        "padding": 10,
    }  # Sec. 5.1's crops
    assert study.key_group_size == 16 and max(study.group_sizes) > 16
    cells = {(t.dataset, t.model) for t in study.table1}
    assert cells == {
        (d, m) for d in ("cub200", "cars196") for m in ("googlenet", "resnet18", "resnet50")
    }
    assert all(t.embedding_dim == 64 for t in study.table1)
    assert {t.dataset: t.lr for t in study.table1} == {"cub200": 1e-4, "cars196": 5e-4}
    rows = {t.dataset: t for t in study.table2}
    assert {d: (t.model, t.embedding_dim, t.m_per_class) for d, t in rows.items()} == {
        "cub200": ("resnet50", 512, 16),
        "cars196": ("resnet50", 512, 16),
        "sop": ("resnet50", 512, 4),
        "inshop": ("resnet50", 512, 4),
    }
    assert rows["sop"].eval_ks == (1, 10, 100) and rows["inshop"].eval_ks == (1, 10, 20)
    # Table 3: Hotels-50K, ResNet-50, 256-d, batch 128, n = 4 (Sec. 5.1, 6.3), 3 seeds like Table 2
    (hotels,) = study.table3
    assert (
        hotels.dataset,
        hotels.model,
        hotels.embedding_dim,
        hotels.batch_size,
        hotels.m_per_class,
    ) == ("hotels50k", "resnet50", 256, 128, 4)
    assert hotels.eval_ks == (1, 10, 100) and study.paper_seeds == (0, 1, 2)
    # with the switch on, Tables 1 and 2 select on validation classes; Hotels-50K (same
    # hotels) on the test images
    on = ep.make_study("paper", validation=True)
    assert on.table2[0].select_on == "validation" and on.table3[0].select_on == "test"


def test_make_study_overrides_and_errors():
    s = ep.make_study("default", {"epochs": 3}, group_sizes=[2, 8], seeds=[5, 6])
    assert (
        s.config.epochs == 3
        and s.group_sizes == (2, 8)
        and s.key_group_size == 8
        and s.seeds == (5, 6)
    )
    assert s.grid_seeds == (
        5,
        6,
    )  # the default grid runs every seed, also when the seeds are replaced
    assert ep.make_study("smoke", seeds=[5, 6]).grid_seeds == (0,)
    assert all(t.epochs == 3 for t in s.table1)
    with pytest.raises(ValueError, match="divide"):
        ep.make_study("default", group_sizes=[3])
    with pytest.raises(KeyError):
        ep.make_study("default", group_size=[2])
    with pytest.raises(ValueError, match="profile"):
        ep.make_study("huge")


# ------------------------------------------------------------------------------ methods


# ------------------------------------------------------------------------------ runner


def _only(batch, group, label, seed=0):
    """A batch of the one run ``label`` with ``seed`` of ``batch``'s ``group``."""
    g = batch.groups[group]
    one = RunGroup({label: g.methods[label]}, (seed,), g.changes, g.procedure)
    return ep.Batch(batch.config, {group: one})


def test_runs_train_reload_analyse_and_retrain(tmp_path):
    study = ep.make_study("smoke", TINY)
    batch = _only(ep.declare(study)[0], "n3", "EPHN")
    folder = tmp_path / "smoke"
    run = ep.train_chapter([batch], folder).run("n3", "EPHN", 0)
    stored = ep.StoredAnalyses(folder, [batch])
    summary = stored.summary(run)
    run_dir = folder / run.name
    assert run.trained and (run_dir / "record.json").exists() and (run_dir / "best.pt").exists()
    saved = json.loads((run_dir / "record.json").read_text())
    assert saved["status"] == "finished" and saved["config"]["m_per_class"] == 3
    assert saved["analysis"] == summary and set(summary) >= {
        "train_same_class_median",
        "test_to_train_mean",
        "test_nn_correct",
    }
    # the analysed model is the best epoch's: its test NN accuracy is the recorded Recall@1
    model = stored.best_model(run, "a test asks")
    emb, lab = compute_embeddings(model, stored.splits(study.config).test)
    assert recall_at_k(emb, lab, ks=(1,))[1] == pytest.approx(run.metrics["R@1"], abs=1e-12)
    # float32 near-ties of a barely trained model may flip a few points between the two searches
    assert summary["test_nn_correct"] == pytest.approx(run.metrics["R@1"], abs=1e-2)
    exact = nearest_same_and_other(emb.double(), lab).accuracy
    assert exact == pytest.approx(recall_at_k(emb.double(), lab, ks=(1,))[1], abs=1e-12)
    # a new call reloads the record (no training), its summary and the best weights on demand
    again = ep.train_chapter([batch], folder).run("n3", "EPHN", 0)
    fresh = ep.StoredAnalyses(folder, [batch])
    assert not again.trained and fresh.summary(again) == summary
    for a, b in zip(
        fresh.best_model(again, "test").state_dict().values(), model.state_dict().values()
    ):
        assert torch.equal(a, b)
    # missing weights: trained again on demand, to the same result (seeded), summary recomputed
    (run_dir / "best.pt").unlink()
    (run_dir / "checkpoint.pt").unlink()
    redo = ep.train_chapter([batch], folder).run("n3", "EPHN", 0)
    ep.StoredAnalyses(folder, [batch]).best_model(redo, "a test asks")
    assert redo.trained and redo.metrics["R@1"] == run.metrics["R@1"]
    assert json.loads((run_dir / "record.json").read_text())["analysis"] == summary
    # retrain=True ignores the finished record
    forced = ep.train_chapter([batch], folder, retrain=True).run("n3", "EPHN", 0)
    assert forced.trained and forced.record.data["history"][-1]["epoch"] == 1


def test_figures_are_read_from_analysis_json_without_weights(tmp_path, monkeypatch):
    study = ep.make_study("smoke", TINY)
    batch = _only(ep.declare(study)[0], "n3", "EPSHN")
    folder = tmp_path / "smoke"
    run = ep.train_chapter([batch], folder).run("n3", "EPSHN", 0)
    stored = ep.StoredAnalyses(folder, [batch])
    stored.summary(run)
    figs, maps = stored.figures(run), stored.tsne(run, 2)
    run_dir = folder / run.name
    on_disk = json.loads((run_dir / ANALYSIS_FILE).read_text())
    assert (
        set(on_disk) == {"figures", "tsne"} and on_disk["figures"]["settings"] == ep.FIGURE_SETTINGS
    )
    assert on_disk["figures"]["run"] == on_disk["tsne"]["run"] == run.record.outcome()
    # the stored figure data are the model's statistics, rounded to 4 decimals
    splits = stored.splits(study.config)
    raw = ep.embedding_statistics(stored.best_model(run, "test"), splits)
    assert figs["train_same"].shape == (len(splits.train),)
    assert figs["test_other"].shape == (len(splits.test),)
    assert np.nanmax(np.abs(figs["test_other"] - raw["test_other"].numpy())) <= 5e-5
    pairs = raw["train_same_class"].double().numpy()
    q = figs["train_same_class_quantiles"]
    assert q.shape == (1001,) and q[[0, 500, -1]] == pytest.approx(
        [pairs.min(), np.median(pairs), pairs.max()], abs=5e-5
    )
    assert np.unique(maps["train_labels"]).size == 2
    assert maps["train"].shape == (len(maps["train_labels"]), 2)
    assert maps["test"].shape == (len(maps["test_labels"]), 2)
    # no weights and training disabled: a new reader draws both figures from the JSON
    (run_dir / "best.pt").unlink()
    (run_dir / "checkpoint.pt").unlink()
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    again = ep.train_chapter([batch], folder).run("n3", "EPSHN", 0)
    fresh = ep.StoredAnalyses(folder, [batch])
    fresh.summary(again)
    for k, v in fresh.figures(again).items():
        np.testing.assert_array_equal(v, figs[k])
    for k, v in fresh.tsne(again, 2).items():
        np.testing.assert_array_equal(v, maps[k])
    assert not again.trained  # the weights were never needed
    # a changed setting needs the weights: with none and training disabled, an error naming both
    with pytest.raises(
        TrainingDisabledError, match=r"EPSHN-n3-seed0.*analysis 'tsne' is needed: .*other settings"
    ):
        fresh.tsne(again, 3)
    # training allowed: the run is trained again (seeded: the same record), only the t-SNE redone
    monkeypatch.delenv(NO_TRAINING_ENV)
    maps3 = fresh.tsne(again, 3)
    assert again.trained and np.unique(maps3["train_labels"]).size == 3
    assert again.record.outcome() == run.record.outcome()
    on_disk = json.loads((run_dir / ANALYSIS_FILE).read_text())
    assert on_disk["tsne"]["settings"]["classes"] == 3
    assert on_disk["figures"]["settings"] == ep.FIGURE_SETTINGS


def test_a_run_of_another_config_is_not_reused(tmp_path):
    study = ep.make_study("smoke", TINY)
    ep.train_chapter([_only(ep.declare(study)[0], "n3", "BA")], tmp_path)
    other = ep.make_study("smoke", {**TINY, "lr": 1e-4})
    batch = _only(ep.declare(other)[0], "n3", "BA")
    run = ep.train_chapter([batch], tmp_path).run("n3", "BA", 0)
    assert run.trained and run.record.config["lr"] == 1e-4


def test_group_size_frame_and_recall_table(tmp_path):
    study = ep.make_study("smoke", TINY, seeds=[0], grid_seeds=[0])
    b = ep.declare(study)[0]
    fig4 = ep.Batch(b.config, {g: b.groups[g] for g in ("n2", "n3", "N-pair")})
    runs = ep.train_chapter([fig4], tmp_path)
    frame = ep.group_size_frame(runs, study)
    assert len(frame) == len(ep.MINING_METHODS) * len(study.group_sizes)
    at2 = frame[frame["n"] == 2].set_index("method")
    assert at2.loc["EP", "mean"] == at2.loc["HP", "mean"] == at2.loc["BA", "mean"]  # one N-pair run
    assert (at2.loc[["EP", "HP", "BA"], "run"] == "N-pair").all()
    assert frame["std"].isna().all() and (frame["seeds"] == 1).all()
    assert len(ep.figure4_names(runs, study)) == 1 + 3 + 6 == len(runs.records())
    table = ep.recall_table({"EPHN": [runs.run("n3", "EPHN", 0)]}, ks=(1, 2))
    assert list(table["EPHN"][0]) == ["R@1", "R@2"]
    with pytest.raises(ValueError, match="declared in two batches"):
        ep.train_chapter([fig4, fig4], tmp_path)


# ------------------------------------------------------------------------------ verdicts, tables


def test_reported_tables():
    t = ep.REPORTED_TABLE1[("CUB", "ResNet-50")]
    assert t.loc["EPSHN", "R@1"] == 57.3 and math.isnan(t.loc["triplet", "R@1"])
    ((label, cell),) = ep.reported_table1("cars196", "resnet18").items()
    assert cell.loc["EPSHN", "R@8"] == 93.0 and label == "reported (CAR, ResNet-18, 64-d)"
    # a cell the paper has not run: the two full cells, each under its own dataset's label
    cells = ep.reported_table1("omniglot-small", "convnet")
    assert list(cells) == ["reported (CUB, GoogLeNet, 64-d)", "reported (CAR, GoogLeNet, 64-d)"]
    assert cells["reported (CUB, GoogLeNet, 64-d)"].loc["triplet", "R@1"] == 42.6
    assert ep.REPORTED_TABLE2.loc["EPSHN512", ("SOP", "R@1")] == 78.3
    assert ep.REPORTED_TABLE3.loc["EPSHN256", ("Hotels-50K", "R@1")] == 16.3
    # each reported R@K row is non-decreasing in K (a typo check of the transcription)
    for table in ep.REPORTED_TABLE1.values():
        values = table.to_numpy()
        ok = ~np.isnan(values).any(axis=1)
        assert (np.diff(values[ok], axis=1) >= 0).all()


def test_paper_side_by_side_keeps_reported_and_reproduced_apart():
    cfg = ep.make_study("paper").table2[0]  # cub200, resnet50, 512-d
    t = ep.paper_side_by_side(cfg, {"R@1": 0.5, "R@2": 0.625, "R@4": 0.75, "R@8": 0.875})
    assert list(t.index) == ["EPSHN512"]
    assert t.loc["EPSHN512", ("reported (CUB, ResNet-50, 512-d)", "R@1")] == "64.9"
    ours = [c for c in t.columns.get_level_values("source").unique() if c.startswith("reproduced")]
    assert ours == ["reproduced (cub200, resnet50, 512-d, n = 16, 1 run)"]
    assert (
        t.loc["EPSHN512", (ours[0], "R@1")] == "50.0" and (ours[0], "R@8") not in t
    )  # the paper's Ks only
    # Table 3: both reported rows (batch all, EPSHN256) under their dataset, ours beside them
    (hotels,) = ep.make_study("paper").table3
    t3 = ep.paper_side_by_side(hotels, {"R@1": 0.2, "R@10": 0.3, "R@100": 0.5}, runs=3)
    assert list(t3.index) == ["BATCH-ALL256", "EPSHN256"]
    assert t3.loc["BATCH-ALL256", ("reported (Hotels-50K, ResNet-50, 256-d)", "R@1")] == "8.1"
    mine = "reproduced (hotels50k, resnet50, 256-d, n = 4, 3 runs)"
    assert (
        t3.loc["EPSHN256", (mine, "R@100")] == "50.0"
        and t3.loc["BATCH-ALL256", (mine, "R@1")] == "—"
    )


# ------------------------------------------------------------------------------ paper path


def test_paper_status_and_table1_cell_on_a_fabricated_cub_tree(tmp_path):
    fabricated_cub(tmp_path / "data", [c for c in (1, 2, 3, 4, 101, 102, 103) for _ in range(4)])
    small = {
        "dataset_options": {"image_size": 32},
        "pretrained": False,
        "batch_size": 8,
        "m_per_class": 4,
        "epochs": 1,
        "steps_per_epoch": 1,
        "num_workers": 0,
        "eval_batch_size": 8,
        "eval_every": 1,
    }
    study = ep.make_study(
        "paper", small, group_sizes=[2, 4], seeds=[0], grid_seeds=[0], table1_seeds=[0]
    )
    status = paper_run_status(study.table2, tmp_path / "data")
    assert status["dataset"].tolist() == ["cub200", "cars196", "sop", "inshop"]
    assert status["data"].tolist()[0] == "found" and all(
        "does not exist" in d for d in status["data"][1:]
    )
    assert status["runnable"].tolist()[1:] == [False] * 3
    assert status["runnable"].tolist()[0] == torch.cuda.is_available()
    # Table 1's cells are batches of their own (another dataset or backbone than Figure 4's)
    batches = ep.declare(study)
    assert len(batches) == 1 + len(study.table1)
    i, cell = next(
        (i, b)
        for i, b in enumerate(batches[1:])
        if (b.config.dataset, b.config.model) == ("cub200", "resnet18")
    )
    group, label = ep.table1_side("EPSHN", i, len(study.table1))
    runs = ep.train_chapter(
        [_only(cell, group, label)], tmp_path / "results", data_root=tmp_path / "data"
    )
    run = runs.run(group, label, 0)
    assert run.record.data["status"] == "finished"
    assert run.name == "cub200-resnet18-d64-EPSHN-n4-seed0"
    c = run.record.config
    assert (c["embedding_dim"], c["optimizer"], c["m_per_class"]) == (64, "sgd", 4)
    assert set(run.metrics) >= {"R@1", "R@2", "R@4", "R@8"}


def test_table3_path_on_a_fabricated_hotels50k_tree(tmp_path):
    """Table 3's run at the paper profile: the Hotels-50K test images queried against the training
    images, selected on the test images (the hotels are shared), 3 seeds by default."""
    hotels = [(1, h) for h in (10, 11, 12, 13) for _ in range(4)]
    fabricated_hotels50k(tmp_path / "data", hotels, [(1, 10), (1, 12), (1, 13)], size=(34, 30))
    small = {
        "dataset_options": {"image_size": 32},
        "pretrained": False,
        "batch_size": 8,
        "m_per_class": 4,
        "epochs": 1,
        "steps_per_epoch": 1,
        "num_workers": 0,
        "eval_batch_size": 8,
        "eval_every": 1,
        "eval_ks": (1, 2),
    }
    study = ep.make_study(
        "paper",
        small,
        validation=True,
        group_sizes=[2, 4],
        seeds=[0],
        grid_seeds=[0],
        table1_seeds=[0],
        paper_seeds=[0],
    )
    assert ep.make_study("paper").paper_seeds == (0, 1, 2)
    status = paper_run_status(study.table2 + study.table3, tmp_path / "data")
    assert status["dataset"].tolist()[-1] == "hotels50k" and status["data"].tolist()[-1] == "found"
    with pytest.raises(ValueError, match="5 runs of Tables 2 and 3"):
        ep.paper_batches(study, [True] * 4)
    assert ep.paper_batches(ep.make_study("smoke"), [True] * 5) == []
    batches = ep.paper_batches(study, [False] * 4 + [True])
    assert [list(b.groups) for b in batches] == [["table3"]]
    runs = ep.train_chapter(batches, tmp_path / "results", data_root=tmp_path / "data")
    table2, table3 = ep.paper_table_runs(runs)
    (run,) = table3
    assert table2 == {} and run.name == "hotels50k-resnet50-d256-EPSHN-n4-seed0"
    assert run.record.data["status"] == "finished" and run.record.config["select_on"] == "test"
    assert set(run.metrics) >= {"R@1", "R@2"} and "validation" not in run.record.selections


# ------------------------------------------------------------------------------ plots


def test_chapter_plots_label_everything():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from dmlnb.plots import (
        plot_group_size,
        plot_reference_overlay,
        plot_same_vs_other,
        plot_similarity_distributions,
    )

    frame = pd.DataFrame(
        {
            "method": ["EP", "EP", "HP", "HP"],
            "n": [2, 16, 2, 16],
            "mean": [0.5, 0.6, 0.5, 0.4],
            "std": [0.01, np.nan, 0.01, 0.02],
        }
    )
    ax = plot_group_size(frame)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "16"]
    assert ax.get_xlabel().startswith("group size") and len(ax.get_legend().get_texts()) == 2
    ax = plot_similarity_distributions(
        {"a": np.array([0.1, 0.9, np.nan]), "b": torch.tensor([0.5, 0.7])}
    )
    assert "median 0.50" in ax.get_legend().get_texts()[0].get_text() and ax.get_title()
    same, other = torch.tensor([0.9, 0.2, 0.5, float("nan")]), torch.tensor([0.1, 0.8, 0.4, 0.3])
    ax = plot_same_vs_other(same, other)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "66.7%" in texts[0] and "33.3%" in texts[1]  # 2 of the 3 finite points are below y = x
    ax = plot_reference_overlay(np.zeros((3, 2)), np.ones((2, 2)))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["training (3)", "test (2)"]
    plt.close("all")


# ------------------------------------------------------------- claims (fabricated runs)

#: Recall@1 of each mining method at n = 2 and n = 16 (linear between), easy rising, hard falling.
_BASE = {
    "EP": (0.50, 0.70),
    "EPHN": (0.45, 0.68),
    "EPSHN": (0.52, 0.72),
    "HP": (0.50, 0.40),
    "HPHN": (0.45, 0.30),
    "BA": (0.50, 0.55),
}
_JITTER = np.array([-0.004, 0.0, 0.004, 0.002, -0.002])


def _record(name, seed, method, r1, losses=(1.0, 0.5), analysis=None):
    """A finished record of ``method`` with ``seed``: two epochs of training ``losses``, the last
    (its best) with Recall@1 ``r1`` and MAP@R ``r1 / 3``; ``analysis``: its kept weights'
    statistics."""
    from dmlnb.records import RunRecord

    record = RunRecord.new(
        name,
        config={"seed": seed},
        components={},
        environment={"device": "cpu"},
        spec={"method": method},
    )
    for e, loss in enumerate(losses, 1):
        r = r1 - 0.01 * (len(losses) - e)
        metrics = {"R@1": r, "MAP@R": r / 3}
        record.add_epoch(
            {"epoch": e, "loss": loss, "train_seconds": 0.0, "metrics": metrics}, "R@1"
        )
    record.finish("2024-01-01T00:00:00+00:00")
    if analysis is not None:
        record.data["analysis"] = analysis
    return Run(name, record)


def _stats(med, t2t, gap, j):
    return {
        "train_same_class_median": med + j,
        "test_to_train_mean": t2t + j,
        "train_nn_correct": 0.9 + j,
        "test_nn_correct": 0.9 - gap + 2 * j,
    }


def fabricated_runs(
    study, recall=None, collapsed=(), analysis=None, table1=None, semihard=None, alike=()
):
    """A :class:`~dmlnb.chapter.RunSet` shaped like the chapter's declaration of ``study``
    (groups ``n<n>``, ``N-pair``, ``semihard``, ``table1...``): ``recall``: method -> n -> R@1 per
    seed (default: :data:`_BASE`, each method with its own jitter); ``collapsed``: (method, n)
    whose runs sit at ln 2; ``analysis``: Figure method -> (median, test-to-train, NN gap);
    ``table1``: method -> R@1 per seed; ``semihard``: rule -> R@1 per seed, ``alike``: seeds
    whose two rules' runs have the same history."""
    from dmlnb.chapter import RunSet

    seeds, key = study.seeds, study.key_group_size
    grid = study.group_sizes
    if recall is None:
        recall = {
            m: {
                n: list(lo + (hi - lo) * i / (len(grid) - 1) + np.roll(_JITTER[: len(seeds)], k))
                for i, n in enumerate(grid)
            }
            for k, (m, (lo, hi)) in enumerate(_BASE.items())
        }
    analysis = analysis or {
        **{m: (0.5, 0.6, 0.1) for m in ("EP", "EPHN", "EPSHN")},
        **{m: (0.9, 0.8, 0.3) for m in ("BA", "HP", "N-pair")},
    }
    figure = lambda m, i: _stats(*analysis[m], _JITTER[i % 5])  # noqa: E731
    ln2 = (ep.LN2, ep.LN2)
    runs: dict = {}

    def put(group, label, s, method, r1, n, k=0):
        bad = (method, n) in collapsed
        stats = figure(label, k + s) if label in analysis and n in (2, key) else None
        name = f"{group}-{label}-seed{s}"
        runs.setdefault(group, {})[(label, s)] = _record(
            name, s, method, r1, ln2 if bad else (1.0, 0.5), stats
        )

    for n in grid:
        for k, m in enumerate(ep.MINING_METHODS):
            c = ep.canonical_method(m, n)
            for i, s in enumerate(seeds):
                if c == "N-pair":
                    put("N-pair", "N-pair", s, "N-pair", recall[m][n][i], 2, k)
                else:
                    put(f"n{n}", m, s, m, recall[m][n][i], n, k)
    table1 = table1 or {
        "triplet": list(0.60 + _JITTER[:3]),
        "N-pair": list(0.66 + np.roll(_JITTER[:3], 1)),
        "Proxy-NCA": list(0.44 + np.roll(_JITTER[:3], 2)),
        "EPSHN": list(0.62 + _JITTER[:3]),
    }
    for m, values in table1.items():
        for s, v in zip(study.table1_seeds, values):
            put(ep.table1_side(m)[0], m, s, m, v, key)
    semihard = semihard or {"strict": recall["EPSHN"][key], "inclusive": recall["EPSHN"][key]}
    for rule, values in semihard.items():
        for s, v in zip(seeds, values):
            loss = (1.0, 0.5) if rule == "strict" or s in alike else (1.0, 0.4)
            runs.setdefault("semihard", {})[(rule, s)] = _record(
                f"semihard-{rule}-seed{s}",
                s,
                "EPSHN",
                v,
                ln2 if ("EPSHN", key) in collapsed else loss,
            )
    return RunSet(runs)


def _judged(study, runs, per_class=20, status=None):
    from dmlnb.chapter import evaluate

    claims = ep.declare_claims(study, runs, per_class, status)
    return claims, {j.spec.id: j.verdict for j in evaluate(claims, runs)}


def test_claims_are_declared_with_the_vocabulary_and_judged_by_the_rule():
    from dmlnb.chapter import AboveThreshold, Beats, Custom, Untestable
    from dmlnb.reporting import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED

    study = ep.make_study("default")
    claims, v = _judged(study, fabricated_runs(study))
    tests = {c.id: c.test for c in claims}
    assert len(tests) == len(claims) and all(c.where for c in claims if c.origin == "paper")
    # comparisons are Beats / BeatsEvery, paired by seed; every-pair claims a declared Custom
    assert isinstance(tests["fig4-EP-rises"], Beats) and tests["fig4-EP-rises"].paired
    for ident in ("fig4-contrast", "fig2-embedding", "ours-easy-beat-hard-r1", "table1-cell0"):
        assert isinstance(tests[ident], Custom) and tests[ident].shape == "every"
        assert tests[ident].paired
    untestable = {k: t for k, t in tests.items() if isinstance(t, Untestable)}
    assert set(untestable) == {
        "sec61-mechanism",
        "sec34-multimode",
        "sec62-architectures",
        "fig4-optimum",
        "table2-cub",
        "table2-car",
        "table2-sop",
        "table2-in-shop",
        "table3-hotels50k",
    }
    assert {t.reason for t in untestable.values()} == {"needs-paper-data", "not-run"}
    assert "20 images" in untestable["fig4-optimum"].why
    assert "default profile" in untestable["table2-cub"].why
    assert not any(isinstance(t, AboveThreshold) for t in tests.values())
    assert v["fig4-EP-rises"] == HOLDS and v["fig4-HPHN-falls"] == HOLDS
    assert v["fig4-contrast"] == HOLDS and v["ours-easy-beat-hard-r1"] == HOLDS
    assert str(v["sec61-npair-best-of-ba-hp"]).startswith(FAILS) and v["fig2-embedding"] == HOLDS
    assert v["fig4-optimum"] == NOT_TESTED
    # Proxy-NCA (0.44) is far below the rest: an untuned baseline, judged and named; N-pair beats
    # EPSHN
    assert str(v["table1-cell0"]).startswith(FAILS) and ep.UNTUNED in v["table1-cell0"].note
    # the two rules give the same R@1 (their histories differ): judged, inconclusive
    assert v["ours-semihard-strict-beats-inclusive-r1"] == INCONCLUSIVE


def test_a_comparison_with_a_collapsed_side_is_judged_and_a_collapsed_trend_set_aside():
    """A collapse is the outcome of the mining rule under test: a comparison with a collapsed
    side is judged, the collapsed runs (and, for HPHN against EPHN or EPSHN, the drop rule) named;
    only a trend within a method whose every run collapsed is set aside."""
    from dmlnb.reporting import HOLDS, NOT_TESTED

    study = ep.make_study("default")
    collapsed = {("HPHN", 2), ("HPHN", 16), ("EPHN", 2)}
    claims, v = _judged(study, fabricated_runs(study, collapsed=collapsed))
    hphn = v["fig4-HPHN-falls"]
    assert hphn == NOT_TESTED and hphn.note.startswith(ep.EVERY_RUN_COLLAPSED)
    rises = v["fig4-EPHN-rises"]
    assert rises != NOT_TESTED and ep.COLLAPSED_SIDE in rises.note
    assert "EPHN at n = 2 seeds 0, 1, 2" in rises.note
    assert v["fig4-EP-rises"] == HOLDS  # its runs did not collapse
    assert v["fig4-contrast"] != NOT_TESTED and ep.COLLAPSED_SIDE in v["fig4-contrast"].note
    assert "not tested" not in v["ours-easy-beat-hard-r1"].note
    pairs = ep.pair_tables(claims, fabricated_runs(study, collapsed=collapsed)).reset_index()
    hphn = pairs[(pairs["worse"] == "HPHN") & (pairs["comparison"] == "fig4-contrast")]
    assert (hphn["verdict"] != NOT_TESTED).all() and len(hphn) == 3
    assert all(ep.COLLAPSED_SIDE in n for n in hphn["note"])
    confounded = hphn[hphn["better"].isin(["EPHN", "EPSHN"])]["note"]
    assert len(confounded) == 2 and all(ep.DROP_RULE_CONFOUND in n for n in confounded)
    # a sweep with a collapsed end has no tested interior optimum (the Figure 4 section's table)
    points = {"EPHN": {2: [0.4, 0.41, 0.39], 8: [0.7, 0.71, 0.69], 16: [0.6, 0.61, 0.59]}}
    assert ep.group_size_optima(points).loc["EPHN", "interior optimum"] == HOLDS
    row = ep.group_size_optima(points, frozenset({("EPHN", 2)})).loc["EPHN"]
    assert row["interior optimum"] == HOLDS and "collapsed n = 2" in row["note"]
    every = frozenset(("EPHN", n) for n in (2, 8, 16))
    row = ep.group_size_optima(points, every).loc["EPHN"]
    assert row["interior optimum"] == NOT_TESTED and "collapsed" in row["note"]
    assert row["effect"] != "—"


def test_the_contrast_is_paired_through_the_shared_n2_runs():
    """At n = 2 EP and HP are the same N-pair runs, so "EP gains more than HP" is "EP beats HP at
    n = 16", seed by seed: a difference the seeds' spread hides from an unpaired test shows."""
    from dmlnb.reporting import HOLDS, compare

    study = ep.make_study("default")
    recall = {m: {n: [0.5 + 0.1 * s for s in range(3)] for n in study.group_sizes} for m in _BASE}
    recall["EP"][16] = [0.51 + 0.1 * s + 0.001 * s for s in range(3)]
    claims, v = _judged(study, fabricated_runs(study, recall=recall))
    pairs = ep.pair_tables(claims, fabricated_runs(study, recall=recall))
    assert pairs.loc[("fig4-contrast", "EP", "HP"), "verdict"] == HOLDS
    shown = ep.pairs_for_reader(pairs, claims).index.get_level_values("comparison")
    assert shown[0] == next(c.text for c in claims if c.id == pairs.index[0][0])
    # unpaired, the seeds' spread hides the same difference
    assert str(compare(recall["EP"][16], recall["HP"][16])) != HOLDS


def test_claims_with_a_grid_beyond_16_and_the_paper_tables_when_run():
    from dmlnb.chapter import InteriorOptimum, evaluate
    from dmlnb.reporting import FAILS, HOLDS

    study = ep.make_study("default", group_sizes=[2, 4, 8, 16, 32], key_group_size=16)
    recall = {
        m: {
            n: [0.5 + 0.1 * min(n, 16) / 16 + j for j in np.roll(_JITTER[:3], k)]
            for n in study.group_sizes
        }
        for k, m in enumerate(_BASE)
    }
    recall["EP"][32] = [x + 0.05 for x in recall["EP"][16]]  # EP keeps rising: no interior optimum
    recall["EPSHN"][32] = [x - 0.05 for x in recall["EPSHN"][16]]
    runs = fabricated_runs(study, recall=recall)
    claims, v = _judged(study, runs)
    assert isinstance(next(c for c in claims if c.id == "fig4-optimum-EPSHN").test, InteriorOptimum)
    assert v["fig4-optimum-EPSHN"] == HOLDS and v["fig4-optimum-EP"] == FAILS
    # Tables 2 and 3, run: judged against the best other reported R@1 and twice batch all's
    from dmlnb.chapter import RunSet

    paper = dict(runs.runs)
    paper["table2 CUB"] = {
        ("EPSHN", s): _record(f"cub{s}", s, "EPSHN", 0.70 + 0.01 * s) for s in range(3)
    }
    paper["table3"] = {
        ("EPSHN", s): _record(f"h{s}", s, "EPSHN", 0.20 + 0.01 * s) for s in range(3)
    }
    more = RunSet(paper)
    judged = {j.spec.id: j.verdict for j in evaluate(ep.declare_claims(study, more, 20), more)}
    assert judged["table2-cub"] == HOLDS and judged["table3-hotels50k"] == HOLDS


def test_two_semihard_rules_that_trained_alike_are_not_a_test():
    from dmlnb.reporting import INCONCLUSIVE, NOT_TESTED

    study = ep.make_study("default")
    every = fabricated_runs(study, alike=(0, 1, 2))
    pairs = [
        [every.run("semihard", r, s).record for r in ("strict", "inclusive")] for s in range(3)
    ]
    assert all(ep.identical_histories(a, b) for a, b in pairs)
    _, v = _judged(study, every)
    for metric in ("r1", "mapr"):
        verdict = v[f"ours-semihard-strict-beats-inclusive-{metric}"]
        assert verdict == NOT_TESTED and verdict.note.startswith(ep.SAME_NEGATIVES)
    # one seed whose two runs differ: the rule was exercised, the comparison is judged
    some = fabricated_runs(study, alike=(0, 2))
    a, b = (some.run("semihard", r, 1).record for r in ("strict", "inclusive"))
    assert not ep.identical_histories(a, b)
    assert _judged(study, some)[1]["ours-semihard-strict-beats-inclusive-r1"] == INCONCLUSIVE


def test_an_untuned_baseline_is_judged_and_named_in_table1():
    from dmlnb.reporting import HOLDS, NOT_TESTED

    study = ep.make_study("default")
    res = {
        "triplet": list(0.60 + _JITTER[:3]),
        "N-pair": list(0.62 + np.roll(_JITTER[:3], 1)),
        "Proxy-NCA": list(0.40 + np.roll(_JITTER[:3], 2)),
        "EPSHN": list(0.70 + _JITTER[:3]),
    }
    assert ep.untuned_baselines(res) == ["Proxy-NCA"]
    runs = fabricated_runs(study, table1=res)
    claims, v = _judged(study, runs)
    # EPSHN beats all three; the pair against the untuned baseline is judged, its caveat named
    assert v["table1-cell0"] == HOLDS and ep.UNTUNED in v["table1-cell0"].note
    pairs = ep.pair_tables(claims, runs).loc["table1-cell0"]
    proxy = pairs.loc[("EPSHN", "Proxy-NCA")]
    assert proxy["verdict"] == HOLDS and proxy["note"].startswith(ep.UNTUNED)
    assert pairs.loc[("EPSHN", "triplet"), "verdict"] == HOLDS
    # a baseline within reach of the others carries no caveat
    close = {**res, "Proxy-NCA": list(0.58 + _JITTER[:3])}
    w = _judged(study, fabricated_runs(study, table1=close))[1]["table1-cell0"]
    assert w == HOLDS and ep.UNTUNED not in w.note
    # collapsed EPSHN runs: judged, the collapse named
    gone = fabricated_runs(study, table1=res)
    for s in range(3):
        gone.run("table1", "EPSHN", s).record.data["history"][-1]["loss"] = ep.LN2
        gone.run("table1", "EPSHN", s).record.data["history"][-2]["loss"] = ep.LN2
    w = _judged(study, gone)[1]["table1-cell0"]
    assert w != NOT_TESTED and ep.COLLAPSED_SIDE in w.note


def test_claims_read_from_the_kept_weights_are_not_recomputed_under_the_other_protocol():
    from dmlnb.chapter import ClaimSpec, Custom, RunSet, evaluate_both_ways
    from dmlnb.reporting import compare
    from dmlnb.selection import protocol_column

    # ours: the validation classes pick epoch 1 (R@1 0.5), the test classes epoch 3 (0.9);
    # theirs: 0.7 either way
    ours = [
        selected_record([0.5, 0.6, 0.9], [0.8, 0.5, 0.4], "validation", name=f"ours{i}")[0]
        for i in range(3)
    ]
    theirs = [
        selected_record(
            [0.5, 0.6, 0.7 + 0.01 * i], [0.5, 0.6, 0.7], "validation", name=f"theirs{i}"
        )[0]
        for i in range(3)
    ]
    runs = RunSet(
        {
            "g": {
                **{("ours", i): Run(r.data["name"], r) for i, r in enumerate(ours)},
                **{("theirs", i): Run(r.data["name"], r) for i, r in enumerate(theirs)},
            }
        }
    )
    kept = {"ours": [0.2, 0.21, 0.22], "theirs": [0.5, 0.51, 0.52]}  # of the kept weights
    r1 = lambda rs, label: rs.values("g", label, "R@1")  # noqa: E731
    claims = [
        ClaimSpec(
            "a",
            "ours beats theirs",
            Custom(lambda rs: compare(r1(rs, "ours"), r1(rs, "theirs"))),
            "Sec. 1",
        ),
        ClaimSpec(
            "b",
            ep.KEPT_WEIGHTS_CLAIMS[0],
            Custom(lambda rs: compare(kept["theirs"], kept["ours"])),
            "Figure 2",
        ),
    ]
    frame = evaluate_both_ways(claims, runs, kept_weights=ep.kept_weights).set_index("claim")
    assert frame.loc["ours beats theirs", "verdict changes"] is True
    row = frame.loc[ep.KEPT_WEIGHTS_CLAIMS[0]]
    assert (
        row["verdict changes"] == NOT_RECOMPUTED and row[protocol_column("verdict", "test")] == "—"
    )
    assert row[protocol_column("verdict", "validation")] == "holds"
    text = both_ways_text(frame.reset_index())
    assert text == (
        "1 of 1 recomputed verdicts change under the papers' protocol: ours beats theirs; 1 claim "
        "reads the kept weights and is not recomputed"
    )
    # the three claims of Figures 2, 3 and 5 are the chapter's claims on the kept weights
    study = ep.make_study("default")
    names = [c.text for c in ep.declare_claims(study, fabricated_runs(study), 20)]
    assert all(k in names for k in ep.KEPT_WEIGHTS_CLAIMS)
    # no run with a validation split: one protocol only
    papers = RunSet({"g": {("p", 0): Run("p", selected_record([0.5], None, "test", name="p")[0])}})
    assert evaluate_both_ways(claims[:1], papers) is None


def test_the_pair_tables_list_every_pair_of_the_claims_about_several():
    study = ep.make_study("default")
    runs = fabricated_runs(study)
    t = ep.pair_tables(ep.declare_claims(study, runs, 20), runs)
    comps = t.index.get_level_values("comparison")
    assert (comps == "fig4-contrast").sum() == 6 and (comps == "fig5-embedding").sum() == 9
    assert (comps == "table1-cell0").sum() == 3 and (comps == "ours-easy-beat-npair").sum() == 3


def test_collapsed_groups_near_ln2_and_the_kept_epoch_in_words():
    ln2 = ep.LN2
    curves = pd.DataFrame(
        [
            {
                "run": "HPHN",
                "n": 2,
                "seed": s,
                "epoch 1": 0.74,
                "epoch 2": ln2 + 0.003,
                "epoch 3": ln2 + 0.001,
                "collapsed": True,
            }
            for s in range(3)
        ]
        + [
            {
                "run": "EPHN",
                "n": 4,
                "seed": s,
                "epoch 1": 0.712,
                "epoch 2": 0.688,
                "epoch 3": 0.673,
                "collapsed": False,
            }
            for s in range(3)
        ]
        + [
            {
                "run": "EP",
                "n": 4,
                "seed": s,
                "epoch 1": 2.0,
                "epoch 2": ln2,
                "epoch 3": 0.5,
                "collapsed": s == 0,
            }
            for s in range(3)
        ]
    )
    # a group with any collapsed seed is one no verdict may rest on
    assert ep.collapsed_groups(curves) == frozenset({("HPHN", 2), ("EP", 4)})
    curves.loc[(curves["run"] == "HPHN") & (curves["seed"] == 0), "epoch 2"] = (
        ln2 + 0.02
    )  # seed 0 enters a epoch later
    lines = ep.near_ln2(curves)
    assert (
        lines[0].startswith("EPHN n = 4: within 2.5% of ln 2 at epoch 2 only")
        and "0.673" in lines[0]
    )
    assert lines[0].endswith(
        "0 of 3 seeds collapsed"
    )  # no seed stays in the band: no per-seed epochs
    # the mean enters the band at epoch 2, seed 0 only at epoch 3: each seed's own epoch is given
    assert lines[1].startswith("HPHN n = 2: within 2.5% of ln 2 at epochs 2-3")
    assert lines[1].endswith(
        "3 of 3 seeds collapsed; per seed (0, 1, 2), within it from epoch 3, 2, 2 to the last"
    )
    assert len(lines) == 2  # EP is not a single-negative variant: ln 2 means nothing for it
    assert ep.is_collapsed("HPHN", [0.9, ln2 + 0.003, ln2 - 0.002]) and not ep.is_collapsed(
        "HPHN", [ln2, 0.6]
    )
    assert not ep.is_collapsed(
        "EP", [ln2, ln2]
    )  # ln 2 means nothing for a variant with every negative


def _deviation_curves() -> pd.DataFrame:
    """Loss curves of three methods: EP falls 10% over the last epoch, EPHN's two non-collapsed
    seeds 30% and 40% and its collapsed one (at ln 2) 0%, every HPHN run is collapsed."""
    ln2 = ep.LN2
    rows = [
        {"run": "EP", "n": 4, "seed": s, "epoch 1": 1.0, "epoch 2": 0.9, "collapsed": False}
        for s in range(3)
    ]
    rows += [
        {"run": "EPHN", "n": n, "seed": 0, "epoch 1": 1.0, "epoch 2": 1.0 - f, "collapsed": False}
        for n, f in ((4, 0.3), (8, 0.4))
    ]
    rows += [
        {"run": "EPHN", "n": 2, "seed": s, "epoch 1": ln2, "epoch 2": ln2, "collapsed": True}
        for s in range(3)
    ]
    rows += [
        {"run": "HPHN", "n": 2, "seed": s, "epoch 1": ln2, "epoch 2": ln2, "collapsed": True}
        for s in range(3)
    ]
    return pd.DataFrame(rows)


def test_the_last_epochs_fall_is_of_non_collapsed_runs_only_per_method_too():
    text = ep.last_epoch_fall(_deviation_curves())
    assert text.startswith(
        "not converged: from epoch 1 to 2 the loss of the 5 non-collapsed runs (of 11) still fell"
    )
    # EPHN: the median of its non-collapsed runs (30%, 40%), not of all five (its
    # collapsed n = 2 runs fall 0%)
    assert "EP 10%, EPHN 35%" in text and "EPHN 0%" not in text
    # HPHN has no non-collapsed run: no figure, named as such
    assert "HPHN 0%" not in text and text.endswith("; HPHN: none, every run collapsed)")


class _Part:
    """A labelled split with only what :func:`ep.deviations` reads: labels, classes, length."""

    def __init__(self, classes: int, per_class: int) -> None:
        self.labels = torch.arange(classes).repeat_interleave(per_class)
        self.num_classes = classes

    def __len__(self) -> int:
        return len(self.labels)


def test_deviations_say_what_was_measured(monkeypatch):
    study = ep.make_study("default", validation=True)
    splits = SimpleNamespace(train=_Part(109, 20), validation=_Part(27, 20), test=_Part(106, 20))
    module = ep.deviations
    monkeypatch.setattr(
        module,
        "record_provenance",
        lambda r: {"code": "code", "threads": {1: 1}, "train seconds": (1.0, 2.0)},
    )
    monkeypatch.setattr(ep.setting_rows, "selection_gain_text", lambda records: "")
    curves = _deviation_curves()
    drop = pd.DataFrame(
        {
            "terms dropped by the rule": [0, 0],
            "terms": [64, 64],
            "min similarity in a batch": [0.3, 0.9],
        },
        index=pd.Index([1, 2], name="epoch"),
    )
    drop.attrs["seed"] = 0
    rows = ep.deviation_rows(study, splits, curves, drop, [], {})
    frame = deviations_frame(rows)
    dev = frame["effect"]
    # the training length's per-method figures come from the same non-collapsed runs as the median
    assert "EPHN 35%" in dev["training length"] and "HPHN: none" in dev["training length"]
    # the drop rule: one rerun of one seed measured; the records compare EPHN and HPHN per
    # seed; EPSHN not measured
    rule = dev["drop rule (authors' code)"]
    assert rule.startswith(
        "measured in one rerun, EPHN at n = 2 with seed 0: the rule dropped 0 of 128 terms"
    )
    assert "same training loss at every epoch in 3 of 3 seeds" in rule
    assert (
        "EPHN's other seeds, EPSHN at n = 2 (the same rule) and at every n > 2: not measured"
        in rule
    )
    # the sampler pads a class smaller than n; it never does at the default profile
    # (20 images, n <= 16)
    assert dev["classes smaller than n"].startswith("never applied at the default profile")
    # a setting this profile does not vary is not measured, with the scale that would
    assert dev["optimiser"].startswith(
        "not measured: this scale could measure it, not done yet; would be measured at this "
        "profile with SGD"
    )
    # each row not measured says why: a rerun of this profile, the paper's data or GPU, or none
    why = {r.setting: r.why for r in rows}
    assert why["data and network"] == "needs-paper-data" and why["Batch All loss"] == (
        "structurally-untestable"
    )
    assert why["group-size grid"] == "needs-paper-data" and why["duplicate positives"] == (
        "not-measured"
    )
    assert not any("a rerun of this profile" in r.scale for r in rows)
    # the same reason for Tables 2 and 3 as their claims; the reasons in words for a reader
    assert why["Table 2 (state of the art)"] == why["Table 3 (Hotels-50K)"] == "needs-paper-data"
    words = deviations_frame(rows)["effect"]
    assert not words.str.contains("not-measured|needs-gpu|needs-paper-data").any()
    # the settings the paper leaves implicit: steps, a group's share of a class, validation
    assert "17 batches of 128 per epoch" in frame["ours"]["optimisation steps"]
    assert "80% of the class" in frame["ours"]["share of a class in one group"]
    assert "alphabets never seen" in frame["ours"]["validation classes"]
    here = frame["ours"]
    assert "duplicates" in here["classes smaller than n"]
    # the paper profile's runs, with validation classes, train on 80% of the training classes
    assert "train on 80% of the paper's training classes" in here["model selection (paper profile)"]
    # the rows follow the configuration and the methods as run: a changed argument shows
    shorter = ep.make_study("default", {"epochs": 3}, validation=True)
    assert (
        deviations_frame(ep.deviation_rows(shorter, splits, curves, drop, [], {}))["ours"][
            "training length"
        ]
        == "3 epochs"
    )
    margin = ep.methods({"triplet": {"margin": 0.3}})
    again = deviations_frame(ep.deviation_rows(study, splits, curves, drop, [], {}, margin))
    assert "margin 0.3;" in again["ours"]["Table 1 baselines"]


def test_a_baseline_far_below_every_other_method_is_named_untuned():
    assert ep.untuned_baselines(
        {"triplet": [0.638], "N-pair": [0.668], "Proxy-NCA": [0.438], "EPSHN": [0.605]}
    ) == ["Proxy-NCA"]
    assert (
        ep.untuned_baselines(
            {"triplet": [0.60], "N-pair": [0.66], "Proxy-NCA": [0.58], "EPSHN": [0.62]}
        )
        == []
    )
    assert (
        ep.untuned_baselines(
            {"triplet": [0.60], "N-pair": [0.66], "Proxy-NCA": [0.64], "EPSHN": [0.1]}
        )
        == []
    )


def test_group_size_optima_calls_an_optimum_only_through_the_rule():
    from dmlnb.reporting import FAILS, HOLDS, INCONCLUSIVE

    points = {
        "peak": {2: [0.5, 0.51, 0.49], 4: [0.7, 0.71, 0.69], 8: [0.6, 0.61, 0.59]},
        "rising": {2: [0.5, 0.51, 0.49], 4: [0.6, 0.61, 0.59], 8: [0.7, 0.71, 0.69]},
        "one seed": {2: [0.5], 4: [0.7], 8: [0.6]},
    }
    table = ep.group_size_optima(points)
    assert table["interior optimum"].tolist() == [HOLDS, FAILS, INCONCLUSIVE]
    assert (
        table.loc["peak", "runs per side"] == "3 vs 3" and table.loc["peak", "effect"] == "+10 pts"
    )


def test_anchor_terms_average_to_the_hp_and_ep_losses():
    from dmlnb.losses import easy_positive_loss

    angles = torch.tensor([0.0, 20.0, 150.0, 60.0, 200.0, 230.0])
    x = torch.stack([torch.cos(torch.deg2rad(angles)), torch.sin(torch.deg2rad(angles))], dim=1)
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    for pos, name in (("hard", "HP"), ("easy", "EP")):
        terms = ep.anchor_terms(x, y, pos)
        assert float(terms["term"].mean()) == pytest.approx(
            float(easy_positive_loss(name)(x, y)), rel=1e-5
        )
    assert (
        ep.anchor_terms(x, y, "hard")["positive"].tolist()[0] == 2
    )  # 0 deg: its hard positive is 150 deg


# ------------------------------------------------------------------------------ the chapter's size


def test_the_chapter_package_and_notebook_keep_the_books_sizes():
    """No module of the package over 500 lines, no function over 80; the notebook's code cells at
    most 200 lines in all, none over 25 (ARCHITECTURE.md, issue #45)."""
    import ast

    package = Path(ep.__file__).parent
    for path in package.glob("*.py"):
        text = path.read_text()
        assert len(text.splitlines()) <= 500, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno < 80, f"{path.name}: {node.name}"
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "01_easy_positive.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    code = [len("".join(c["source"]).splitlines()) for c in cells if c["cell_type"] == "code"]
    assert sum(code) <= 200 and max(code) <= 25, (sum(code), max(code))


@pytest.mark.skipif(
    torch.cuda.is_available()
    or not (Path(os.environ.get("DMLNB_DATA", "/")) / "omniglot").exists(),
    reason="needs Omniglot under DMLNB_DATA, and no GPU (the committed claims name none)",
)
def test_the_committed_claims_json_is_the_judgement_of_the_committed_records(monkeypatch, tmp_path):
    """Reloaded (nothing trains), the committed records judged by the declared claims give the
    committed ``claims.json``, verdict for verdict."""
    from dmlnb.chapter import evaluate, write_claims_json

    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    study = ep.make_study("default", validation=True)
    batches = ep.declare(study)
    runs = ep.train_chapter(batches, COMMITTED)
    assert not runs.trained
    stored = ep.StoredAnalyses(COMMITTED, batches)
    splits = stored.splits(study.config)
    ep.analysis_runs(runs, study, stored, 30)  # the statistics of Figures 2, 3 and 5, stored
    paper = ep.make_study("paper", validation=True)
    status = paper_run_status(paper.table2 + paper.table3)
    per_class = len(splits.train) // splits.train.num_classes
    judged = evaluate(ep.declare_claims(study, runs, per_class, status), runs)
    path = write_claims_json(tmp_path, judged, chapter=ep.CHAPTER, profile="default")
    committed = json.loads((COMMITTED / "claims.json").read_text())
    assert json.loads(path.read_text()) == committed
    assert len(committed["claims"]) == len(judged) and {
        c["origin"] for c in committed["claims"]
    } == {
        "paper",
        "ours",
    }


def test_seed_offset_shifts_every_seed_of_the_study():
    """``python -m dmlnb replicate`` sets the notebook's ``seed_offset``: every run of the study
    moves to the shifted seeds (folders and lookups alike)."""
    base, moved = ep.make_study("default"), ep.make_study("default", seed_offset=100)
    for name in ("seeds", "grid_seeds", "table1_seeds"):
        assert getattr(moved, name) == tuple(s + 100 for s in getattr(base, name))
    names = {s.name for b in ep.declare(moved) for g in b.groups.values() for s in g.runs()}
    assert names and all("seed10" in n for n in names)


def test_the_methods_table_shows_each_call_and_what_it_trains():
    frame = ep.methods_frame(ep.methods())
    call = ep.METHODS["EPSHN"]
    assert frame.loc["EPSHN", "loss"] == call.name == "easy-positive"
    assert all(frame.loc["EPSHN", k] == repr(v) for k, v in call.args.items())
    assert frame.loc["triplet", "temperature"] == "—"
    terms = frame["in the paper's terms"]
    assert "semi-hard (strict rule)" in terms["EPSHN"] and "drops terms" in terms["EPSHN"]
    assert "strict" not in terms["EP"] and "no drop rule" in terms["EP"]  # unused, resolved
    assert "margin 0.2" in terms["triplet"] and "scale 9" in terms["Proxy-NCA"]
    assert (terms != "").all()


def test_the_text_glues_the_toy_and_the_papers_settings() -> None:
    """The worked example's angles, the group sizes and the paper's settings the text names come
    from the toy's definition, the study and the paper profile (issue #45: no count typed)."""
    study, paper = ep.make_study("default"), ep.make_study("paper")
    glued = ep.text_constants(ep.methods({}), study, paper)
    assert [glued[f"toy_{i}"] for i in range(3)] == [f"{a:g}°" for a in ep.TOY_ANGLES[:3]]
    assert glued["toy_pair_other"] == "60° and 200°"  # class 1 in the two-per-class batch
    assert glued["above_lo"] == "4, 8 and 16" and glued["n_max"] == "16"
    assert (glued["paper_batch"], glued["paper_epochs"]) == ("128", "40")  # Sec. 5.1
    assert (glued["paper_t1_dim"], glued["paper_optimum"]) == ("64", "16")  # Table 1, Sec. 6.3
    assert "paper_batch" not in ep.text_constants(ep.methods({}), study)
