"""Tests of the facility-location chapter's experiment glue
(dmlnb.experiments.facility_location)."""

import dataclasses
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dmlnb.chapter import Deviation, RunSet, deviations_frame, evaluate
from dmlnb.data import load_dataset
from dmlnb.experiments import facility_location as fl
from dmlnb.losses import FacilityLocationLoss, LiftedStructureLoss, NPairLoss, TripletLoss
from dmlnb.losses.facility_location import loss_augmented_inference
from dmlnb.models import build_model
from dmlnb.samplers import ClassRatioSampler

# --------------------------------------------------------------------------- presets


def _run(declared, group, label, seed=0):
    """The declared run of ``label`` with ``seed`` in ``group`` (a :class:`RunSpec`)."""
    return next(r for r in declared[group].runs() if (r.label, r.seed) == (label, seed))


def _only(declared, group, *labels):
    """``{group: declared[group]}`` with only the methods ``labels``."""
    g = declared[group]
    return {group: dataclasses.replace(g, methods={m: g.methods[m] for m in labels})}


def test_paper_profile_follows_the_paper():
    study = fl.make_study("paper")
    by_table = {t.table: t for t in study.tables}
    assert [t.config.dataset for t in study.tables] == ["cub200", "cars196", "sop"]
    iterations = {name: t.config.steps_per_epoch * t.config.epochs for name, t in by_table.items()}
    assert iterations == {"Table 1": 10_000, "Table 2": 20_000, "Table 3": 20_000}  # Sec. 4.1
    for t in study.tables:
        c = t.config
        assert (c.embedding_dim, c.batch_size, c.optimizer, c.model, c.pretrained) == (
            64,
            128,
            "rmsprop",
            "googlenet",
            True,
        )
        assert c.dataset_options == {"image_size": 227, "resize": 256}  # 256 x 256, cropped at 227
    assert [t.class_ratio for t in study.tables] == [0.25, 0.25, 0.75]  # Sec. 3.5
    assert [t.classes_per_batch for t in study.tables] == [32, 32, 96]
    assert by_table["Table 3"].config.eval_ks == (1, 10, 100)
    assert study.decay_rate == 0.94


def test_paper_profile_build_path_on_fabricated_inputs():
    """The paper profile's sampler (SOP: C/m = 0.75) and backbone work on small fabricated data."""
    study = fl.make_study("paper")
    sop = study.tables[2]
    labels = torch.arange(150).repeat_interleave(torch.tensor([1, 2, 3] * 50))  # 300 images
    sampler = ClassRatioSampler(
        labels, sop.config.batch_size, classes_per_batch=sop.classes_per_batch, seed=0
    )
    batch = next(iter(sampler))
    assert len(batch) == 128 and labels[batch].unique().numel() == 96
    cfg = fl.method_config("clustering", sop.config)
    model = build_model(
        cfg.model, (3, 64, 64), cfg.embedding_dim, normalize=cfg.normalize, pretrained=False
    )
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 64)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(2))


def test_default_profile_keeps_the_class_ratio_and_rmsprop():
    study = fl.make_study("default")
    t = study.tables[0]
    assert t.config.dataset == "omniglot-small" and t.config.optimizer == "rmsprop"
    assert t.config.momentum == 0.0 and t.config.embedding_dim == 64
    assert t.classes_per_batch / t.config.batch_size == pytest.approx(0.25)
    assert len(study.seeds) >= 3


def test_make_study_rejects_bad_design():
    with pytest.raises(ValueError, match="unknown profile"):
        fl.make_study("huge")
    with pytest.raises(KeyError, match="unknown design"):
        fl.make_study("smoke", margin=3)
    with pytest.raises(ValueError, match="tsne_methods"):
        fl.make_study("smoke", tsne_methods=("softmax",))
    with pytest.raises(KeyError):
        fl.make_study("smoke", {"epochz": 3})
    assert fl.make_study("smoke", seeds=[4, 5], gamma=3.0).seeds == (4, 5)
    assert fl.make_study("smoke", gamma=3.0).gamma == 3.0


def test_methods_normalise_as_in_the_paper():
    study = fl.make_study("smoke", gamma=2.5)
    cfg = study.tables[0].config
    assert (
        fl.method_config("triplet", cfg).normalize and fl.method_config("clustering", cfg).normalize
    )
    assert (
        not fl.method_config("lifted", cfg).normalize
        and not fl.method_config("npair", cfg).normalize
    )
    assert isinstance(fl.build_loss("triplet", study), TripletLoss)
    assert (
        isinstance(fl.build_loss("lifted", study), LiftedStructureLoss)
        and not fl.build_loss("lifted", study).normalize
    )
    assert isinstance(fl.build_loss("npair", study), NPairLoss)
    clu = fl.build_loss("clustering", study)
    assert (
        isinstance(clu, FacilityLocationLoss)
        and clu.margin_multiplier == 2.5
        and clu.pam_passes == 5
    )
    with pytest.raises(ValueError, match="unknown method"):
        fl.build_loss("softmax", study)
    with pytest.raises(ValueError, match="unknown method"):
        fl.method_config("softmax", cfg)
    with pytest.raises(ValueError, match="unknown method"):
        fl.loss_description("softmax", study)


def test_the_runs_train_the_papers_forms_and_their_specifications_name_them():
    """Algorithm 2 as listed and N-pairs as Eq. 3 writes it (every positive pair, lambda / m times
    the sum of the unsquared norms) by default; every specification names the forms its loss
    trains, and a variant is another run in its own folder."""
    study = fl.make_study("default")
    assert (study.refinement, study.npair_pairs, study.npair_penalty) == ("paper", "all", "norm")
    assert fl.PAPER_FORMS == {"refinement": "paper", "pairs": "all", "penalty": "norm"}
    clu, npair = fl.build_loss("clustering", study), fl.build_loss("npair", study)
    assert clu.refinement == "paper" and (npair.pairs, npair.penalty) == ("all", "norm")
    declared = fl.groups(study)
    spec = _run(declared, "Table 1", "clustering").spec
    assert spec["refinement"] == "paper" and spec["factory"]["args"]["refinement"] == "paper"
    assert "Algorithm 2 as listed" in fl.loss_description("clustering", study)
    npair_spec = _run(declared, "Table 1", "npair").spec
    assert {k: npair_spec[k] for k in ("pairs", "penalty")} == {"pairs": "all", "penalty": "norm"}
    npair_args = npair_spec["factory"]["args"]
    assert (npair_args["pairs"], npair_args["penalty"]) == ("all", "norm")
    assert "unsquared norms" in fl.loss_description("npair", study)
    assert not {"refinement", "pairs", "penalty"} & set(_run(declared, "Table 1", "triplet").spec)
    full = _run(declared, "refinement full", "clustering")
    assert full.call.build().refinement == "full" and not full.procedure.tsne
    assert full.spec["refinement"] == full.spec["factory"]["args"]["refinement"] == "full"
    variant = fl.make_study("default", refinement="full")
    assert "the variant of Algorithm 2" in fl.loss_description("clustering", variant)
    assert full.name == _run(declared, "Table 1", "clustering").name.replace("g10-", "g10-full-")
    sohn = fl.make_study("default", npair_pairs="first", npair_penalty="squared")
    assert _run(fl.groups(sohn), "Table 1", "npair").name.endswith("npair-first-squared-seed0")
    assert "not Eq. 3" in fl.loss_description("npair", sohn)
    with pytest.raises(ValueError, match="refinement must be one of"):
        fl.make_study("default", refinement="tf")
    with pytest.raises(ValueError, match="npair_pairs must be one of"):
        fl.make_study("default", npair_pairs="every")
    with pytest.raises(ValueError, match="npair_penalty must be one of"):
        fl.make_study("default", npair_penalty="l1")
    with pytest.raises(ValueError, match="refinements .* are not forms of Algorithm 2"):
        fl.make_study("default", refinements=("tf",))


def test_every_profile_builds_its_variants_and_the_smoke_batches_fit_three_classes():
    """The smoke hold-out leaves 3 of digits' 5 training classes: every smoke
    batch has at most 3."""
    smoke = fl.make_study("smoke", validation=True)
    (t1,), paired = smoke.tables, smoke.paired
    assert (t1.config.batch_size, t1.classes_per_batch) == (
        12,
        3,
    ) and t1.config.select_on == "validation"
    assert (paired.config.batch_size, paired.classes_per_batch, paired.class_ratio) == (6, 3, 0.5)
    assert paired.config.select_on == "validation" and smoke.refinements == ("full",)
    default = fl.make_study("default", validation=True)
    assert default.paired.classes_per_batch == 64 and default.paired.config.batch_size == 128
    assert all(
        t.config.steps_per_epoch == 21 for t in (*default.tables, default.paired)
    )  # the hold-out keeps the steps
    assert fl.make_study("paper").paired is None and fl.make_study("paper").refinements == ()


def test_reported_tables_are_the_papers():
    assert fl.REPORTED["Table 1"].loc["Clustering", "NMI"] == 59.23
    assert fl.REPORTED["Table 2"].loc["Triplet semihard", "R@1"] == 51.54
    assert fl.REPORTED["Table 3"].loc["Npairs", "R@100"] == 93.00
    for table in fl.REPORTED.values():
        assert list(table.index) == [fl.ROW_NAMES[m] for m in fl.METHODS]


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_a_clustering_run_logs_inside_the_loss_and_reloads(digits, tmp_path):
    study = fl.make_study(
        "smoke", {"steps_per_epoch": 4, "epochs": 2}, tsne_points=60, diag_every=2
    )

    def train(s):
        runs = fl.train(_only(fl.groups(s), "Table 1", "clustering"), s, tmp_path,
                        splits={"digits": digits})  # fmt: skip
        return runs.run("Table 1", "clustering", 0)

    run = train(study)
    assert run.trained and run.record.data["status"] == "finished"
    log = pd.DataFrame(run.extras["inside"])
    assert log["step"].tolist() == [0.0, 2.0, 4.0, 6.0]  # every 2nd of 8 steps
    # the loss is the hinge of augmented minus oracle score (Eq. 6) ...
    np.testing.assert_allclose(
        log["loss"], np.maximum(log["augmented"] - log["oracle"], 0.0), rtol=1e-5, atol=1e-5
    )
    # ... the augmented score is F(S_PAM) + gamma (1 - NMI) ...
    np.testing.assert_allclose(
        log["augmented"], log["predicted"] + log["gamma"] * (1 - log["nmi"]), rtol=1e-5, atol=1e-5
    )
    # ... gamma decays by 0.94 per epoch of 4 steps, Lemma 1 holds, inference is part of the step
    np.testing.assert_allclose(log["gamma"], study.gamma * 0.94 ** (log["step"] / 4))
    assert (log["refined"] >= log["greedy"] - 1e-9).all()
    assert ((log["inference_s"] > 0) & (log["inference_s"] < log["step_s"])).all()
    # the geometric NMI and the t-SNE map of the test embedding are stored
    assert set(run.metrics) >= {"NMI", "R@1", "R@8"}
    assert run.metrics == run.extras["metrics_geometric"]
    assert len(run.extras["tsne"]["indices"]) == 60 and np.asarray(
        run.extras["tsne"]["xy"]
    ).shape == (60, 2)
    again = train(study)
    assert not again.trained and again.extras["inside"] == run.extras["inside"]
    # another margin multiplier is another run, in its own folder; the first stays reloadable
    other = train(fl.make_study("smoke", {"steps_per_epoch": 4, "epochs": 2}, tsne_points=60,
                                diag_every=2, gamma=2.0))  # fmt: skip
    assert other.trained and other.extras["inside"]["gamma"][0] == 2.0
    assert other.record.path.parent != run.record.path.parent
    assert not train(study).trained
    # a procedure's field enters the fingerprint: another log interval retrains
    assert train(dataclasses.replace(study, diag_every=1)).trained


def test_baseline_runs_see_the_same_batches_and_log_step_times(digits):
    study = fl.make_study("smoke", {"steps_per_epoch": 3, "epochs": 1})
    runs = fl.train(_only(fl.groups(study), "Table 1", "triplet"), study, None,
                    splits={"digits": digits})  # fmt: skip
    run = runs.run("Table 1", "triplet", 0)
    log = run.extras["inside"]
    assert set(log) == {"step", "loss", "step_s"} and len(log["step"]) == 3
    assert "tsne" not in run.extras  # only the clustering loss's first seed is mapped


def test_every_field_of_the_procedure_and_every_method_argument_enter_the_fingerprint():
    """A reader's change to a procedure's field or to a method's argument retrains those runs
    only; the t-SNE map is stored by the first seed's clustering run of each table alone."""
    from dmlnb.records import run_fingerprint

    study = fl.make_study("default", validation=True)
    declared = fl.groups(study)
    run = _run(declared, "Table 1", "clustering")
    base = run.config(study.tables[0].config)
    fingerprint = run_fingerprint(base, run.spec)
    changed = {"table": "Table 9", "class_ratio": 0.5, "classes_per_batch": 7, "gamma": 3.0,
               "decay_rate": 0.9, "decay_steps": 5, "diag_every": 3, "tsne_points": 9,
               "tsne": False}  # fmt: skip
    assert set(changed) == {f.name for f in dataclasses.fields(fl.ClassRatioRuns)}
    for key, value in changed.items():
        other = dataclasses.replace(
            run, procedure=dataclasses.replace(run.procedure, **{key: value})
        )
        assert run_fingerprint(base, other.spec) != fingerprint, key
    edited = fl.groups(study, {"clustering": {"pam_passes": 3}})
    assert run_fingerprint(base, _run(edited, "Table 1", "clustering").spec) != fingerprint
    assert _run(edited, "Table 1", "triplet").spec == _run(declared, "Table 1", "triplet").spec
    with pytest.raises(KeyError, match="unknown method"):
        fl.groups(study, {"softmax": {}})
    mapped = [(g, r.label, r.seed) for g, grp in declared.items() for r in grp.runs()
              if r.procedure.tsne]  # fmt: skip
    assert mapped == [("Table 1", "clustering", 0), ("Table 3", "clustering", 0)]
    assert declared["paired"].changes == {"m_per_class": 2}
    assert run.config(study.tables[0].config).normalize
    assert not _run(declared, "Table 1", "lifted").config(study.tables[0].config).normalize


# --------------------------------------------------------------------------- summaries


def test_inside_loss_summary_against_direct_computation():
    frame = pd.DataFrame(
        {
            "method": ["clustering"] * 5 + ["triplet"] * 5,
            "seed": 0,
            "step": list(range(5)) * 2,
            "loss": [5.0, 4, 3, 2, 1] + [1.0] * 5,
            "step_s": [9.0, 1, 2, 1, 2] + [0.5] * 5,
            "inference_s": [8.0, 0.5, 0.5, 0.25, 0.5] + [math.nan] * 5,
            "greedy": [-10.0, -9, -8, -7, -6] + [math.nan] * 5,
            "refined": [-10.0, -8.5, -8, -7 - 1e-3, -5] + [math.nan] * 5,
            "nmi": [0.1, 0.2, 0.3, 0.4, 0.5] + [math.nan] * 5,
        }
    )
    s = fl.inside_loss_summary(frame).set_index("method")
    c = s.loc["clustering"]
    assert c["inference_share"] == pytest.approx(
        (0.5 + 0.5 + 0.25 + 0.5) / (1 + 2 + 1 + 2)
    )  # step 0 skipped
    assert c["pam_improved"] == pytest.approx(2 / 5)
    assert c["below_greedy"] == 1
    assert c["pam_gain_min"] == pytest.approx(-1e-3)
    assert c["step_s"] == pytest.approx(1.5)
    assert math.isnan(s.loc["triplet", "inference_share"])


# --------------------------------------------------------------------------- Figure 2 toy


def test_toy_layout_splits_class_zero_by_other_classes():
    pts, labels, groups = fl.toy_points(per_group=4, jitter=0.0)
    angles = np.degrees(np.arctan2(pts[:, 1].numpy(), pts[:, 0].numpy())) % 360
    np.testing.assert_allclose(angles, np.repeat([0, 40, 80, 120, 200, 280], 4), atol=1e-9)
    assert labels.tolist() == np.repeat([0, 1, 2, 0, 3, 4], 4).tolist()
    s = fl.toy_summary(pts, labels, groups)
    assert s["gap_degrees"] == pytest.approx(120.0) and s["merged"] == 0.0
    assert s["nn_accuracy"] == 1.0
    with pytest.raises(ValueError, match="exactly two groups"):
        fl.toy_summary(pts, labels, groups, split_class=1)


def test_toy_summary_against_numpy():
    pts, labels, groups = fl.toy_points(seed=3)
    x = pts.numpy() / np.linalg.norm(pts.numpy(), axis=1, keepdims=True)
    a, b = x[groups.numpy() == 0].mean(0), x[groups.numpy() == 3].mean(0)
    expect = np.degrees(np.arccos(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    assert fl.toy_summary(pts, labels, groups)["gap_degrees"] == pytest.approx(expect)


def test_toy_training_is_deterministic_and_the_clustering_loss_merges():
    a = fl.train_toy("clustering", steps=150)
    b = fl.train_toy("clustering", steps=150)
    torch.testing.assert_close(a["after"], b["after"], rtol=0, atol=0)
    assert fl.toy_summary(a["after"], a["labels"], a["groups"])["merged"] == 1.0
    semi = fl.train_toy("triplet semi-hard", steps=50)
    assert fl.toy_summary(semi["after"], semi["labels"], semi["groups"])["merged"] == 0.0
    with pytest.raises(ValueError, match="unknown toy loss"):
        fl.toy_loss("softmax")


def test_nmi_of_one_move_against_sklearn():
    from sklearn.metrics import normalized_mutual_info_score

    y = np.repeat(np.arange(32), 4)
    moved = y.copy()
    moved[0] = 1
    ref = 1.0 - normalized_mutual_info_score(y, moved, average_method="geometric")
    assert fl.nmi_of_one_move(32, 4) == pytest.approx(ref, rel=1e-9)
    assert (
        0 < fl.nmi_of_one_move(32, 4) < fl.nmi_of_one_move(4, 4)
    )  # one move matters less in a larger batch


def test_inside_loss_tables_of_no_runs_keep_their_columns():
    """At the paper profile without a GPU no table runs: the diagnostics cells filter and group
    the empty tables instead of failing."""
    frame = fl.inside_loss_frame([])
    assert frame[frame["method"] == "clustering"].empty
    summary = fl.inside_loss_summary(frame)
    assert summary[summary["method"] == "clustering"].empty


def test_default_tables_have_distinct_run_folders_and_their_seeds():
    """Two tables on the same data must never share a record folder (a class ratio's runs would
    overwrite the other's), and a table may run fewer seeds than the study."""
    study = fl.make_study("default")
    t1, t3 = study.tables
    assert (t1.class_ratio, t3.class_ratio, t3.config.eval_ks) == (0.25, 0.75, (1, 10, 100))
    assert t3.classes_per_batch == 96 and t1.classes_per_batch == 32
    declared = fl.groups(study)
    names = {r.name for t in study.tables for r in declared[t.table].runs()}
    assert len(names) == 2 * len(fl.METHODS) * len(study.seeds)
    # the variants beside the tables have folders of their own
    names |= {r.name for g in declared.values() for r in g.runs()}
    assert len(names) == (
        2 * len(fl.METHODS) + len(study.gamma_ablation) + len(study.refinements) + 1
    ) * len(study.seeds)
    # the rule needs 3 runs per side: both tables, the gamma ablation, the variants and
    # the toy run every seed
    assert (
        study.seeds_for(t1) == study.seeds_for(t3) == study.seeds_for(study.paired) == study.seeds
    )
    assert (
        len(study.seeds) >= 3
        and tuple(declared["gamma 1"].seeds) == study.seeds
        and len(study.toy_seeds) >= 3
    )


def _runs_of(nmi, r1, r8=0.9, spread=(0.0, 0.004, 0.008)):
    """Three fabricated runs (seeds) with NMI / R@1 / R@8 around the given means."""
    from types import SimpleNamespace

    return [
        SimpleNamespace(
            metrics={"NMI": nmi + d, "R@1": r1 + d, "R@2": 0.7, "R@4": 0.8, "R@8": r8 + d}
        )
        for d in spread
    ]


def _toy(gaps, zero=()):
    """A fabricated :func:`fl.toy_frame`: ``gaps`` maps loss -> angle per seed; the losses in
    ``zero`` never have a positive loss."""
    rows = [
        {"loss": "before", "seed": s, "gap_degrees": 120.0, "merged": 0.0, "max_loss": float("nan")}
        for s in range(3)
    ]
    rows += [
        {
            "loss": n,
            "seed": s,
            "gap_degrees": g,
            "merged": float(g < fl.MERGE_DEGREES),
            "nn_accuracy": 1.0,
            "max_loss": 0.0 if n in zero else 1.0,
        }
        for n, gs in gaps.items()
        for s, g in enumerate(gs)
    ]
    return pd.DataFrame(rows)


_TOY_OK = {
    "triplet semi-hard": [118.0, 120.0, 125.0],
    "lifted structure": [1.0, 2.0, 0.5],
    "N-pairs": [90.0, 100.0, 110.0],
    "triplet all": [10.0, 12.0, 15.0],
    "clustering": [5.0, 6.0, 1.0],
}


_TRACED: list[pd.DataFrame] = []


def _claims(runs, toy, profile="default", scaling=None, all_runs=(), traced=None):
    """The chapter's claims declared and judged on fabricated runs ``{table: {method: [runs]}}``
    (the default study's tables), as the chapter shows them."""
    if traced is None:
        if not _TRACED:
            _TRACED.append(fl.lemma1_per_update())
        traced = _TRACED[0]
    runset = RunSet(
        {
            t: {(m, s): r for m, rs in per.items() for s, r in enumerate(rs)}
            for t, per in runs.items()
        }
    )
    specs = fl.claim_specs(fl.make_study(profile), profile, list(runs), toy, scaling, traced)
    return fl.claims_shown(evaluate(specs, runset), runset, list(all_runs), toy)


def _by_claim(out):
    return {c.claim: c.verdict for c in out}


def test_claims_verdicts_follow_the_numbers():
    runs = {
        "Table 1": {
            "triplet": _runs_of(0.75, 0.60),
            "lifted": _runs_of(0.70, 0.60),
            "npair": _runs_of(0.70, 0.60),
            "clustering": _runs_of(0.72, 0.65),
        }
    }
    out = _claims(runs, _toy(_TOY_OK, zero=("triplet semi-hard",)))
    verdicts = [str(c.verdict) for c in out]
    # every metric of the reported Table 1: NMI, R@1, R@2, R@4, R@8
    assert [c.claim.split("higher ")[1].split(" ")[0] for c in out[:5]] == [
        "NMI",
        "R@1",
        "R@2",
        "R@4",
        "R@8",
    ]
    assert verdicts[0] == "does not hold: 2 of 3 comparisons hold"  # NMI: triplet is higher
    assert verdicts[1] == "holds"  # R@1 higher than every baseline
    assert verdicts[2] == verdicts[3] == "inconclusive"  # R@2, R@4 identical everywhere
    assert out[1].verdict.n == (3,) and out[1].verdict.unit == " pts"  # 3 pairs of seeds
    assert out[1].verdict.effect == pytest.approx(0.05)
    assert "(analogue)" in out[0].claim and "3 seeds" in out[0].our_evidence
    untested = [
        c for c in out if c.claim.startswith("Table") and c.verdict == "not tested at this scale"
    ]
    assert [c.claim.split(":")[0] for c in untested] == ["Table 2", "Table 3"]
    assert "+1.2 to +4.2 points" in untested[0].paper_evidence  # from the transcribed Table 2
    v = {k.split(" (")[0]: x for k, x in _by_claim(out).items()}
    # Lemma 1 as the paper states it (per pass, L2-normalised batches) holds; our per-update
    # reading is refuted by the counterexample, with or without runs; the overhead is not tested
    # here; the Figure 2 claim is judged per paper local loss
    assert v["Algorithm 2 monotonically increases the objective A over its passes"] == "holds"
    assert str(
        v[
            "Every single update of Algorithm 2 as listed keeps or raises A, as the proof of "
            "Lemma 1 argues"
        ]
    ).startswith("does not hold: an update of the listing can lower A")
    assert (
        v[
            "The loss-augmented inference does not add much overhead on top of the gradient "
            "computation"
        ]
        == "not tested at this scale"
    )
    fig2 = {
        c.claim.split("-- ")[1].split(" (")[0]: c.verdict
        for c in out
        if c.claim.startswith("Figure 2")
    }
    assert list(fig2) == list(fl.PAPER_LOCAL_TOY_LOSSES)
    assert (
        fig2["triplet semi-hard"] == "not tested at this scale"
        and "0 at every step" in fig2["triplet semi-hard"].note
    )
    assert fig2["lifted structure"] == "does not hold" and fig2["N-pairs"] == "holds"
    fig3 = [c for c in out if c.claim.startswith("Figure 3")][0]
    # lifted structure merges the split class at every seed too: the verdict says the
    # contrast is not shown
    assert fig3.verdict == (
        "holds: lifted structure merges it too, so the toy does not show the contrast with the "
        "local losses"
    )
    assert str(fig3.verdict).split(":")[0] == "holds"
    assert "triplet all (not a loss of the paper)" in fig3.our_evidence
    assert all(
        "(in the toy:" in c.claim for c in out if c.claim.startswith(("Figure 2", "Figure 3"))
    )
    # no paper local loss merges it: Figure 3's verdict stands unqualified (triplet
    # all is not the paper's)
    apart = {**_TOY_OK, "lifted structure": [90.0, 95.0, 100.0]}
    (fig3,) = [c for c in _claims(runs, _toy(apart)) if c.claim.startswith("Figure 3")]
    assert fig3.verdict == "holds"
    # a Recall@K near its ceiling is judged by the rule; C/m: a significant difference refutes
    # "no change"
    runs3 = {
        **runs,
        "Table 3": {
            "triplet": _runs_of(0.7, 0.6),
            "lifted": _runs_of(0.7, 0.6),
            "npair": _runs_of(0.7, 0.6),
            "clustering": _runs_of(0.65, 0.65),
        },
    }
    for per in runs3["Table 3"].values():
        for r in per:
            r.metrics.update({"R@10": 0.9, "R@100": 0.995})
    out = _claims(runs3, _toy({}))
    r100 = [c for c in out if c.claim.startswith("Table 3") and "R@100" in c.claim][0]
    assert r100.verdict == "inconclusive"  # every side alike: the rule finds no difference
    cm = {
        c.claim.split("clustering loss's ")[1]: c.verdict
        for c in out
        if c.claim.startswith("Sec. 3.5: the choice")
    }
    assert (
        cm["NMI"] == "does not hold"
        and cm["R@1"] == "inconclusive"
        and "equivalence" in cm["R@1"].note
    )


def test_claims_scaling_and_the_paper_profile():
    runs = {"Table 1": {m: _runs_of(0.7, 0.6) for m in fl.METHODS}}
    linear = pd.DataFrame(
        [
            {"repeat": r, "batch": v, "clusters": 32, "seconds": 1e-3 * v * (1 + 0.01 * r)}
            for r in range(3)
            for v in (128, 256, 512)
        ]
    )
    quad = linear.assign(
        seconds=lambda f: 1e-6 * f["batch"] ** 2 * (1 + 0.05 * f["repeat"] * (f["batch"] == 512))
    )
    for bench, expect in ((linear, "holds"), (quad, "does not hold")):
        # the timed code computes Algorithm 1 as listed (as the authors' cluster_loss does): the
        # paper's claim is judged on its timing, in the band around order 1
        out = _claims(runs, _toy({}), scaling=bench)
        (c,) = [c for c in out if c.claim.startswith("Algorithm 1")]
        assert c.verdict == expect and "O(|Y| |V|^2)" in c.our_evidence
    two_sizes = linear[linear["batch"] < 512]  # a line through two points: undecided
    (c,) = [
        c for c in _claims(runs, _toy({}), scaling=two_sizes) if c.claim.startswith("Algorithm 1")
    ]
    assert c.verdict == "inconclusive"
    assert fl.scaling_slopes(linear) == pytest.approx([1.0] * 3)
    # the paper profile without a GPU: every claim on runs is not tested; Lemma 1 (per pass and
    # per update) and the convergence of Algorithm 2 are judged on the traced listing, which
    # needs no run
    out = _claims({}, _toy({}), "paper")
    traced = ("(Lemma 1)", "proof of Lemma 1", "converges quickly")
    on_runs = [c for c in out if not any(t in c.claim for t in traced)]
    assert len(on_runs) == len(out) - 3
    assert (
        all(str(c.verdict) == "not tested at this scale" for c in on_runs)
        and "GPU" in out[0].verdict.note
    )


def test_inference_scaling_and_deviations_tables():
    bench = fl.inference_scaling(sizes=(32, 64), clusters=8, repeats=2)
    assert list(bench.columns) == ["repeat", "batch", "clusters", "seconds"] and len(bench) == 4
    assert (bench["seconds"] > 0).all() and len(fl.scaling_slopes(bench)) == 2
    rows = fl.deviations({}, {}, fl.make_study("default"), "default")
    assert all(isinstance(r, Deviation) for r in rows)
    dev = deviations_frame(rows).reset_index()
    assert {
        "PAM refinement (Algorithm 2)",
        "N-pairs loss (Eq. 3)",
        "baselines' batches",
        "Table 2 (Cars196)",
        "margin multiplier gamma",
        "evaluation of unnormalised baselines",
        "backbone (paper profile)",
        "learning rate (paper profile)",
        "seeds (paper profile)",
        "augmentation (paper profile)",
    } <= set(dev["setting"])
    assert list(dev.columns) == ["setting", "paper", "ours", "effect"]
    # without runs nothing is measured: each row says why not and at which scale
    assert all(
        r.why and r.scale for r in rows if r.setting != "training length and model selection"
    )
    assert {r.why for r in rows} <= {
        "needs-paper-data",
        "needs-gpu",
        "structurally-untestable",
        "not-measured",
    }
    here = dev.set_index("setting")["ours"]
    # computed from the batches: C/m = 0.25 is 32 classes x 4, C/m = 0.75 is 32 classes x 2 + 64 x 1
    assert (
        "penalty 'norm'" in here["N-pairs loss (Eq. 3)"]
        and "enter only the penalty" not in here["N-pairs loss (Eq. 3)"]
    )
    sohn = deviations_frame(
        fl.deviations({}, {}, fl.make_study("default", npair_pairs="first"), "default")
    )
    assert (
        "at C/m = 0.25 64 of 128 images enter only the penalty"
        in sohn.loc["N-pairs loss (Eq. 3)", "ours"]
    )
    assert (
        "at C/m = 0.75, 96 classes per batch, 64 of them with one image, leaving the pair losses 32"
        in here["baselines' batches"]
    )
    assert (
        "paired batches as Sohn's loss was made for (64 x 2 images, C/m = 0.5)"
        in here["baselines' batches"]
    )
    assert (
        "Algorithm 2 as listed" in here["PAM refinement (Algorithm 2)"]
        and "refinement 'full'" in here["PAM refinement (Algorithm 2)"]
    )
    assert "an update can lower it" in here["PAM refinement (Algorithm 2)"]
    # the default profile trains without the paper's crops and mirroring
    assert (
        "no augmentation" in here["scale and data"]
        and "mirroring" in dev.set_index("setting").loc["scale and data", "paper"]
    )
    # the paper's batches are random with C in a range; ours have exactly C classes (Sec. 3.5)
    assert "at C/m = 0.75, 96 classes, 32 x 2 and 64 x 1 images" in here["batch sampling"]
    assert "Sec. 3.5" in dev.set_index("setting").loc["batch sampling", "paper"]
    # the paper reports a fixed iteration; "best iteration" is not in it
    assert "best" not in fl.PAPER_TRAINING_LENGTH and "@10k" in fl.PAPER_TRAINING_LENGTH
    # the toy's gamma is explained by the margin per misplaced point, from the two label sets
    assert f"1 - NMI = {fl.labels_one_move(fl.toy_points()[1]):.4f}" in here["Figure 2 / 3 toy"]
    assert "(Eq. 3)" in fl.loss_description("npair", fl.make_study("default"))


def test_comparison_and_gamma_tables_use_the_rule():
    t1 = fl.make_study("default").tables[0]
    runs = {
        "Table 1": {
            "triplet": _runs_of(0.60, 0.50),
            "lifted": _runs_of(0.60, 0.50),
            "npair": _runs_of(0.60, 0.50),
            "clustering": _runs_of(0.70, 0.40),
        }
    }
    pairs = fl.comparison_table(runs, [t1])
    assert len(pairs) == 5 * 3 and list(pairs.columns[:4]) == ["table", "metric", "better", "worse"]
    nmi = pairs[pairs["metric"] == "NMI"]
    assert (nmi["verdict"] == "holds").all() and (nmi["effect"] == "+10 pts").all()
    assert (pairs[pairs["metric"] == "R@1"]["verdict"] == "does not hold").all()
    g = fl.variant_comparison(
        runs["Table 1"]["clustering"], {"gamma 1": _runs_of(0.60, 0.40)}, ["NMI", "R@1"], "gamma 10"
    )
    assert (
        g["verdict"].tolist() == ["holds", "inconclusive"]
        and g["runs per side"].tolist() == ["3 vs 3"] * 2
    )
    assert g["comparison"].tolist() == ["gamma 10 vs gamma 1"] * 2
    text = fl.comparison_text(g)
    assert text.startswith("gamma 10 vs gamma 1, NMI: +10 pts [") and text.endswith(
        "(inconclusive)"
    )
    one = fl.variant_comparison(
        runs["Table 1"]["clustering"][:1], {"gamma 1": _runs_of(0.1, 0.1)[:1]}, ["NMI"], "gamma 10"
    )
    assert one["verdict"].tolist() == ["inconclusive"]  # one seed never decides
    assert fl.variant_comparison(runs["Table 1"]["clustering"], {}, ["NMI"], "gamma 10").empty


def test_reported_margins_from_the_transcribed_tables():
    m = fl.reported_margins().set_index(["table", "metric"])
    assert m.loc[("Table 1", "NMI"), "best baseline"] == "Npairs"
    assert m.loc[("Table 1", "NMI"), "margin"] == pytest.approx(59.23 - 57.24)
    assert m.loc[("Table 3", "NMI"), "margin"] == pytest.approx(89.48 - 89.46)
    assert len(m) == sum(t.shape[1] for t in fl.REPORTED.values())


def test_run_toy_and_its_frame():
    toy = fl.run_toy([0, 1], losses=["triplet semi-hard", "clustering"], steps=3)
    frame = fl.toy_frame(toy)
    assert frame["loss"].tolist() == ["before"] * 2 + ["triplet semi-hard"] * 2 + ["clustering"] * 2
    assert frame["seed"].tolist() == [0, 1] * 3
    # every loss of a seed starts from the same layout; the seeds' layouts differ
    torch.testing.assert_close(
        toy["clustering"][1]["before"], toy["triplet semi-hard"][1]["before"]
    )
    assert not torch.equal(toy["clustering"][0]["before"], toy["clustering"][1]["before"])
    before = frame[frame["loss"] == "before"]
    assert before["gap_degrees"].between(110, 130).all() and before["seconds"].isna().all()


def test_the_toy_runs_the_papers_forms_and_its_one_move_margin():
    # Eq. 3 (every positive pair): with the points ordered by group, the first-pair form would pair
    # class 0 only inside its first group, so nothing would pull its two groups together
    assert (fl.toy_loss("N-pairs").pairs, fl.toy_loss("N-pairs").penalty) == ("all", "norm")
    assert fl.toy_loss("clustering").refinement == "paper"
    assert fl.toy_loss("clustering").margin_multiplier == fl.TOY_GAMMA == 1.0
    labels = fl.toy_points()[1]
    assert fl.labels_one_move(torch.arange(32).repeat_interleave(4)) == pytest.approx(
        fl.nmi_of_one_move(32, 4)
    )
    # about ten times a batch of 128's, so gamma 1 asks the toy what gamma 10 asks a batch
    assert 5 < fl.labels_one_move(labels) / fl.nmi_of_one_move(32, 4) < 20
    with pytest.raises(ValueError, match="two classes"):
        fl.labels_one_move(torch.zeros(4, dtype=torch.long))


def _logged_run(refinement, gains, table="Table 1", seed=0):
    """A fabricated clustering run whose log has refined - greedy = ``gains`` per step."""
    from types import SimpleNamespace

    n = len(gains)
    inside = {
        "step": list(range(n)),
        "loss": [1.0] * n,
        "step_s": [1.0] * n,
        "inference_s": [0.5] * n,
        "greedy": [-10.0] * n,
        "refined": [-10.0 + g for g in gains],
        "nmi": [0.5] * n,
    }
    return SimpleNamespace(
        method="clustering",
        table=table,
        seed=seed,
        extras={"inside": inside},
        spec={"gamma": 10.0, "refinement": refinement},
    )


def test_logged_steps_are_counted_per_form_and_are_not_the_lemma_1_test():
    ok = [_logged_run("paper", [0.0, 0.5, 1.0], seed=s) for s in range(2)]
    full = [_logged_run("full", [0.0, 0.2, 0.0])]
    below = _logged_run("paper", [0.0, -1e-3, 0.5], seed=2)  # one step ends below the greedy start
    within = _logged_run("paper", [-1e-12, 0.0, 0.0])  # float round-off, within PAM_TOLERANCE
    pam = fl.pam_by_table(ok + [below] + full).set_index("refinement")
    assert (
        pam.loc["paper", "ended below greedy"] == 1
        and pam.loc["paper", "runs"] == 3
        and pam.loc["paper", "steps"] == 9
    )
    assert pam.loc["full", "ended below greedy"] == 0 and pam.loc[
        "full", "PAM above greedy"
    ] == pytest.approx(1 / 3)
    assert fl.pam_by_table([within])["ended below greedy"].tolist() == [0]
    assert list(fl.pam_by_table([]).columns)[-1] == "ended below greedy"
    assert not hasattr(fl, "lemma1_holds")  # the logged steps no longer judge Lemma 1
    # our per-update claim: judged on the traced updates; the logs of both forms are quoted,
    # not tested
    runs = {"Table 1": {m: _runs_of(0.7, 0.6) for m in fl.METHODS}}
    traced = pd.DataFrame(
        [
            {
                "batch": "b",
                "points": 8,
                "classes": 2,
                "gamma": 1.0,
                "updates": 4,
                "updates lowering A": 0,
                "largest fall of A": 0.0,
                "passes": 2,
                "passes ending below their start": 0,
                "same medoids as the runs' code": True,
            }
        ]
    )
    (claim,) = [
        c
        for c in _claims(runs, _toy({}), all_runs=ok + [below] + full, traced=traced)
        if "proof of Lemma 1" in c.claim  # our per-update reading, which quotes the logs
    ]
    assert claim.verdict == "holds" and claim.verdict.n == (
        4,
    )  # one step below the greedy start does not decide it
    assert "refinement 'paper': 1 of 9 steps below the greedy start (3 runs)" in claim.our_evidence
    assert "refinement 'full': 0 of 3 steps below the greedy start (1 runs)" in claim.our_evidence
    assert "not a test" in claim.our_evidence and "A falls at 0 of 4 updates" in claim.our_evidence


def test_lemma_1_is_judged_on_every_update_of_the_listing():
    # the loop traces the runs' algorithm: the same medoids as refinement="paper", A at the start of
    # the trace equal to the greedy's, and on the counterexample the third update lowers A
    pts = torch.tensor(fl.LEMMA1_POINTS, dtype=torch.float64)
    dist, labels = torch.cdist(pts, pts), torch.tensor(fl.LEMMA1_LABELS)
    medoids, trace, starts = fl.listing_trace(dist, labels, fl.LEMMA1_GAMMA, passes=2)
    code, stats = loss_augmented_inference(
        dist, labels, fl.LEMMA1_GAMMA, pam_passes=2, refinement="paper"
    )
    assert torch.equal(medoids, code) and starts == [0, 5]
    assert trace[0] == pytest.approx(stats["greedy_objective"], abs=1e-10)
    assert trace[-1] == pytest.approx(stats["refined_objective"], abs=1e-10)
    assert trace[3] < trace[2] - 0.09  # Lemma 1's proof fails at this update
    assert all(
        trace[e] >= trace[a] - 1e-9 for a, e in zip(starts, starts[1:] + [len(trace) - 1])
    )  # per pass it holds
    frame = fl.lemma1_per_update()
    assert frame["same medoids as the runs' code"].all() and len(frame) == len(fl.lemma1_batches())
    assert (
        frame.loc[0, "batch"].startswith("counterexample")
        and frame.loc[0, "updates lowering A"] == 1
    )
    assert frame["passes ending below their start"].sum() == 0
    assert (
        frame["updates"] >= frame["classes"]
    ).all()  # at least one pass of one update per cluster
    table = fl.lemma1_table(frame).set_index("batches")
    assert table["count"].sum() == len(frame) and table["updates"].sum() == frame["updates"].sum()
    assert (
        table.loc["random, L2-normalised", "updates lowering A"] == 0
        and (table["the runs' medoids"] == "yes").all()
    )
    assert table.iloc[0]["updates lowering A"] == 1 and table.iloc[0]["largest fall of A"] > 0.09
    verdict = fl.lemma1_verdict(frame)
    assert (
        verdict
        == "does not hold: an update of the listing can lower A; no pass ends below its start"
    )
    assert verdict.note == f"1 of {int(frame['updates'].sum())} updates fail"
    # without the counterexample, the random batches alone: no update lowers A, and
    # the lemma holds there
    assert fl.lemma1_verdict(frame.iloc[1:]) == "holds"
    assert fl.lemma1_verdict(frame.iloc[:0]) == "not tested at this scale"
    # Lemma 1 as the paper states it: per pass, on the L2-normalised batches only
    passes = fl.lemma1_pass_verdict(frame)
    assert passes == "holds" and passes.n == (int(frame["passes"].iloc[1:].sum()),)
    assert frame["converged within T"].all() and fl.convergence_verdict(frame) == "holds"
    assert fl.convergence_verdict(frame.iloc[:1]) == "not tested at this scale"  # no such batch


def test_paired_npairs_and_the_variant_of_algorithm_2_run_at_the_smoke_profile(tmp_path):
    """The smoke paths of the runs beside the tables, with the smoke hold-out (3
    training classes)."""
    study = fl.make_study(
        "smoke", {"steps_per_epoch": 2, "epochs": 1, "eval_every": 1}, validation=True
    )
    table = study.tables[0]
    splits = load_dataset(table.config.dataset, **table.config.dataset_options)
    assert splits.num_train_classes == 3
    declared = fl.groups(study)
    wanted = {
        **_only(declared, "Table 1", "clustering"),
        **{g: declared[g] for g in ("refinement full", "paired")},
    }
    runs = fl.train(wanted, study, tmp_path, splits={"digits": splits})
    paired = runs.run("paired", "npair", 0)
    assert (
        paired.record.data["spec"]["class_ratio"] == 0.5
        and paired.record.selected_on == "validation"
    )
    full = runs.run("refinement full", "clustering", 0)
    main = runs.run("Table 1", "clustering", 0)
    assert full.trained and main.trained and full.record.path.parent != main.record.path.parent
    assert fl.pam_by_table([full, main])["refinement"].tolist() == ["full", "paper"]
    assert fl.pam_by_table([main])["ended below greedy"].tolist() == [
        0
    ]  # 2 logged steps, none below the start


def test_claims_are_declared_as_data_and_written_to_claims_json(tmp_path):
    """Every claim has its own id and where the paper makes it; what this scale cannot test says
    why with a typed reason; the judged claims are written to claims.json."""
    from dmlnb.chapter import Untestable, write_claims_json

    runs = {"Table 1": {m: _runs_of(0.7, 0.6) for m in fl.METHODS}}
    study = fl.make_study("default")
    specs = fl.claim_specs(study, "default", ["Table 1"], _toy(_TOY_OK), None, pd.DataFrame())
    ids = [c.id for c in specs]
    assert len(set(ids)) == len(ids) and all(c.where for c in specs if c.origin == "paper")
    untestable = {c.id: c.test.reason for c in specs if isinstance(c.test, Untestable)}
    assert untestable == {
        "table-2": "needs-paper-data",
        "table-3": "needs-paper-data",
        "inference-overhead": "needs-paper-data",
        "no-normalisation": "not-run",
        "random-initialisation": "not-run",
    }
    paper = fl.claim_specs(fl.make_study("paper"), "paper", [], _toy({}), None, pd.DataFrame())
    assert {c.test.reason for c in paper if c.id.startswith("table")} == {"needs-gpu"}
    runset = RunSet(
        {"Table 1": {(m, s): r for m, rs in runs["Table 1"].items() for s, r in enumerate(rs)}}
    )
    traced = fl.lemma1_per_update(fl.lemma1_batches(repeats=1)[:2])
    specs = fl.claim_specs(study, "default", ["Table 1"], _toy(_TOY_OK), None, traced)
    path = write_claims_json(
        tmp_path, evaluate(specs, runset), chapter=fl.CHAPTER, profile="default"
    )
    stored = json.loads(path.read_text())
    assert stored["chapter"] == "02_facility_location" and [c["id"] for c in stored["claims"]] == [
        c.id for c in specs
    ]
    assert stored["claims"][0]["category"] == "inconclusive"  # NMI: every side alike


def test_the_chapters_sentences_come_from_its_numbers():
    """The paragraphs whose numbers the notebook once typed are computed from the results."""
    toy = _toy({"triplet semi-hard": [118.0, 120.0, 125.0], "lifted structure": [1.0, 2.0, 0.5]},
               zero=("triplet semi-hard",))  # fmt: skip
    toy["merged"] = toy["merged"].fillna(0.0)
    text = fl.text.toy_paragraph(toy)
    assert text.startswith("In the toy, lifted structure merge the split class at all 3 seeds")
    assert "1.17 ± 0.76°" in text and "121.00 ± 3.61° apart, where it started" in text
    runs = {"Table 1": {m: _runs_of(0.7, 0.6) for m in fl.METHODS}}
    frame = fl.variant_comparison(
        runs["Table 1"]["clustering"], {"gamma 1": _runs_of(0.5, 0.4)}, ["NMI", "R@1"], "g10"
    )
    said = fl.text.versus_sentence(frame, "the margin")
    assert said.startswith("The margin: holds on NMI (+20 pts") and "runs per side 3 vs 3" in said
    pairs = fl.comparison_table(runs, [fl.make_study("default").tables[0]])
    assert fl.text.pairs_paragraph(pairs, "kept epoch").endswith(
        "every other pair is inconclusive."
    )


def test_claims_json_is_rewritten_only_when_its_content_changes(tmp_path):
    """A render that judges what the training pass judged leaves claims.json as it was."""
    runs = {"Table 1": {m: _runs_of(0.7, 0.6) for m in fl.METHODS}}
    runset = RunSet(
        {"Table 1": {(m, s): r for m, rs in runs["Table 1"].items() for s, r in enumerate(rs)}}
    )
    traced = fl.lemma1_per_update(fl.lemma1_batches(repeats=1)[:2])
    specs = fl.claim_specs(fl.make_study("default"), "default", ["Table 1"], _toy({}), None, traced)
    path = fl.save_claims(tmp_path, evaluate(specs, runset), "default")
    stamp = path.stat().st_mtime_ns
    assert fl.save_claims(tmp_path, evaluate(specs, runset), "default").stat().st_mtime_ns == stamp
    assert json.loads(path.read_text())["profile"] == "default"
    fl.save_claims(tmp_path, evaluate(specs, runset), "smoke")
    assert json.loads(path.read_text())["profile"] == "smoke"


def test_comparisons_are_the_vocabularys_paired_and_customs_declare_their_shape(tmp_path):
    """The tables' claims are BeatsEvery paired by seed (a Recall@K set aside at its ceiling),
    the class ratio's NoDifference paired too; the judges of traces, timings and the toy are
    Custom with their shape declared; the verdicts name the methods as the prose does."""
    from dmlnb.chapter import BeatsEvery, Custom, NoDifference, write_claims_json

    study = fl.make_study("default")
    traced = fl.lemma1_per_update(fl.lemma1_batches(repeats=1)[:2])
    linear = pd.DataFrame(
        [
            {"repeat": r, "batch": v, "clusters": 32, "seconds": 1e-3 * v}
            for r in range(3)
            for v in (128, 256, 512)
        ]
    )
    specs = {
        c.id: c
        for c in fl.claim_specs(
            study, "default", ["Table 1", "Table 3"], _toy(_TOY_OK), linear, traced
        )
    }
    t1 = specs["table-1-r-1"].test
    assert isinstance(t1, BeatsEvery) and t1.paired and t1.set_aside is None  # the rule decides
    assert specs["table-1-nmi"].test.set_aside is None
    ratio = specs["class-ratio-nmi"].test
    assert isinstance(ratio, NoDifference) and ratio.paired
    shapes = {
        i: (c.test.shape, c.test.paired) for i, c in specs.items() if isinstance(c.test, Custom)
    }
    assert shapes == {
        "algorithm1-linear": ("band", False),
        "lemma1": ("trace", False),
        "lemma1-per-update": ("trace", False),
        "converges-quickly": ("every", False),
        **{
            f"figure2-{n}": ("threshold", False)
            for n in ("triplet-semi-hard", "lifted-structure", "n-pairs")
        },
        "figure3": ("threshold", False),
    }
    runs = {
        "Table 1": {
            "triplet": _runs_of(0.75, 0.70),
            "lifted": _runs_of(0.70, 0.60),
            "npair": _runs_of(0.70, 0.60),
            "clustering": _runs_of(0.72, 0.65),
        }
    }
    runset = RunSet(
        {"Table 1": {(m, s): r for m, rs in runs["Table 1"].items() for s, r in enumerate(rs)}}
    )
    judged = evaluate(
        fl.claim_specs(study, "default", ["Table 1"], _toy(_TOY_OK), linear, traced), runset
    )
    nmi = judged[0].verdict
    assert str(nmi).startswith("does not hold") and "triplet semi-hard" in nmi.note
    assert "(Table 1)" not in nmi.note  # the reader's name, not the run's key
    stored = json.loads(
        write_claims_json(tmp_path, judged, chapter=fl.CHAPTER, profile="default").read_text()
    )
    rows = {c["id"]: c for c in stored["claims"]}
    assert (rows["table-1-nmi"]["test"], rows["table-1-nmi"]["paired"]) == ("every", True)
    assert rows["table-1-nmi"]["runs_per_side"] == [3] and rows["lemma1"]["test"] == "trace"
    # the reading paragraph, from the judged claims and the paired comparisons behind them
    pairs = fl.comparison_table(runs, [study.tables[0]])
    said = fl.text.synthesis(judged, None, pairs, "kept epoch")
    held = sum(str(j.verdict) == "holds" for j in judged)
    assert said.startswith(f"With every run at its kept epoch, {held} of the {len(judged)} claims")
    assert "Table 1 NMI (triplet semi-hard ahead, effect -3 pts)" in said
    low, ups = int(traced["updates lowering A"].sum()), int(traced["updates"].sum())
    assert f"{low} of the {ups} traced updates" in said and "exponents 1.00-1.00" in said
    assert fl.text.constants(study)["paper_decay"] == "0.94"
    assert fl.text.constants(study)["interval"] == "90%"  # from reporting.CONFIDENCE


def test_the_prose_glues_the_image_size_and_sops_test_set() -> None:
    """The image side comes from the loaded data (else the configuration), SOP's test classes
    from the package's record of the paper (issue #45: no count typed)."""
    study = fl.make_study("default")
    assert fl.text.constants(study)["image_size"] == "28 × 28"  # the configuration's
    table = study.tables[0].table
    images = SimpleNamespace(train=[(torch.zeros(1, 5, 5), 0)])
    assert fl.text.constants(study, {table: images})["image_size"] == "5 × 5"  # the data's
    glued = fl.text.constants(study)
    assert (glued["paper_sop_test_classes"], glued["paper_sop_per_class"]) == ("11,316", "5")


def test_the_logged_claims_are_judged_step_by_step():
    """Sec. 3.4 on the runs' logs: one step where Algorithm 2 ends below the greedy set, or where
    |F| is not above the margin term, refutes the statement."""
    from dmlnb.chapter import RunSet

    logs = pd.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 3,
            "greedy": [-5.0, -4.0, -3.0, -5.0, -4.0, -3.0],
            "refined": [-4.0, -4.0, -2.5, -5.0, -3.9, -3.0],
            "predicted": [-4.5, -4.2, -2.8, -5.1, -4.0, -3.1],
            "margin": [0.5, 0.2, 0.3, 0.1, 0.1, 0.2],
        }
    )
    empty = RunSet({})
    assert fl.OnlyImproves(logs)(empty) == "holds"
    assert fl.FDominates(logs)(empty) == "holds"
    worse = logs.assign(refined=logs["refined"] - [0, 0, 0, 0, 0, 1.0])
    assert str(fl.OnlyImproves(worse)(empty)).startswith("does not hold")
    close = logs.assign(margin=logs["margin"] + [0, 0, 0, 0, 0, 3.0])
    assert str(fl.FDominates(close)(empty)).startswith("does not hold")
