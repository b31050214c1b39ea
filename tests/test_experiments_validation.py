"""The experiment layer's selection switch (``validation=``, :mod:`dmlnb.experiments.settings`).

On (smoke profile, tiny digits runs, 2 of the 5 training classes held out, batches of at most 3
classes): every chapter's runs evaluate the validation classes and select on them, the record
carries both selections, the tables with both protocols agree with the records, and the protocol
chapter's optimism over the book is >= 0 and equal to the records'. Off: every committed
default-profile record still reloads (its configuration and specification are unchanged); the
discriminative chapter's records reload at its notebook's defaults (validation on), once retrained.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fabricated import selected_record

from dmlnb.chapter import RunGroup, deviations_frame, evaluate, evaluate_both_ways, train_runs
from dmlnb.data import load_dataset
from dmlnb.experiments import (
    discriminative,
    easy_positive,
    facility_location,
    profs,
    protocol,
    ssdml,
)
from dmlnb.experiments.settings import VALIDATION, validation_holdout, with_validation
from dmlnb.profiles import check_parameters, make_config
from dmlnb.records import RunRecord
from dmlnb.reporting import compare
from dmlnb.runs import reuse_reason
from dmlnb.selection import (
    COLUMN_LABELS,
    both_ways_table,
    both_ways_verdicts,
    main_comparison,
    optimism_text,
    protocol_column,
    selected_metrics,
    selected_on,
    selection_optimism,
)
from dmlnb.training import NO_TRAINING_ENV

RESULTS = Path(__file__).resolve().parent.parent / "results"
#: Smoke runs small enough for 3 training classes, evaluated twice so that the protocols can differ.
TINY = {"epochs": 2, "steps_per_epoch": 3, "eval_every": 1}
VAL, TEST = protocol_column("R@1", "validation"), protocol_column("R@1", "test")


def _check_validated(record):
    """A run selected on the validation classes, with both selections and per-epoch
    validation metrics."""
    assert (
        record.config["select_on"] == "validation"
        and record.config["dataset_options"]["validation"] == 2
    )
    assert set(record.selections) == {"validation", "test"}
    assert record.best == record.selections["validation"]
    assert all(row.get("val_metrics") for row in record.evaluations())
    assert record.data["components"]["val_set"].endswith(", 2 classes")


def _validated(runs):
    """``{method: [records]}`` of a chapter's ``{method: [runs]}``, each checked by
    :func:`_check_validated`."""
    records = {method: [r.record for r in rs] for method, rs in runs.items()}
    for rs in records.values():
        for record in rs:
            _check_validated(record)
    return records


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """Every wired chapter's tiny runs with validation on, in a results tree of
    the book's layout."""
    root = tmp_path_factory.mktemp("results")
    seeds, out = (0, 1), {"root": root}
    cfg = protocol.chapter_config("smoke", {**TINY, "batch_size": 24}, validation=True)
    splits = load_dataset(cfg.dataset, **cfg.dataset_options)
    folder = root / "00_protocol" / "smoke"
    runs = train_runs(protocol.softmax_groups(seeds, 0.05), cfg, folder, splits=splits)
    out["protocol"] = {"softmax": [runs.run(protocol.GROUP, protocol.LABEL, s) for s in seeds]}
    study = easy_positive.make_study(
        "smoke",
        {**TINY, "batch_size": 6, "m_per_class": 2},
        validation=True,
        group_sizes=(2,),
        seeds=seeds,
        table1_seeds=seeds,
    )
    (batch,) = easy_positive.declare(study)
    table1 = ("table1", "table1 N-pair", "table1 Proxy-NCA")
    t1 = easy_positive.Batch(batch.config, {g: batch.groups[g] for g in table1})
    done = easy_positive.train_chapter([t1], root / "01_easy_positive" / "smoke")
    (out["easy_positive"],) = easy_positive.table1_runs(done, study).values()
    cfg = discriminative.experiment_config("smoke", {**TINY, "batch_size": 24}, validation=True)
    splits, folder = (
        load_dataset(cfg.dataset, **cfg.dataset_options),
        root / "03_discriminative" / "smoke",
    )
    settings = discriminative.experiment_settings("smoke")
    groups = discriminative.run_groups(cfg, {**settings, "seeds": seeds}, splits.num_train_classes)
    methods = groups["methods"]
    pair = RunGroup(
        {m: methods.methods[m] for m in ("discriminative", "semihard")},
        seeds,
        procedure=methods.procedure,
    )
    disc_runs = train_runs({"methods": pair}, cfg, folder, splits=splits)
    out["discriminative"] = {
        m: [disc_runs.run("methods", m, s) for s in seeds] for m in ("discriminative", "semihard")
    }
    return out


def test_the_switch_is_off_by_default_and_holds_out_the_profiles_classes():
    assert (
        validation_holdout("default", None) is None and validation_holdout("default", False) is None
    )
    assert validation_holdout("default", True) == VALIDATION["default"] == 0.2
    assert validation_holdout("smoke", True) == 2 and validation_holdout("smoke", 0.5) == 0.5
    with pytest.raises(TypeError, match=r"validation='yes' \(str\) must be None .*True .*0.2"):
        validation_holdout("default", "yes")
    for value in (None, True, False, 0.2, 20):  # a notebook's validation parameter
        check_parameters({"validation": value})
    config = make_config("default")
    assert with_validation(config, None) is config
    on = with_validation(config, 0.2)
    assert (
        on.dataset_options == {"image_size": 28, "validation": 0.2} and on.select_on == "validation"
    )
    assert config.dataset_options == {"image_size": 28}  # not changed in place
    # every chapter's factory: None is today's configuration, True the profile's hold-out
    assert protocol.chapter_config("default") == make_config("default")
    assert easy_positive.make_study("default", validation=None) == easy_positive.make_study(
        "default"
    )
    assert facility_location.make_study("default", validation=None) == facility_location.make_study(
        "default"
    )
    for chapter in (discriminative, profs):
        assert chapter.experiment_config("default", validation=None) == chapter.experiment_config(
            "default"
        )
        assert chapter.experiment_config("default", validation=True).select_on == "validation"
    study = easy_positive.make_study("paper", validation=True)
    assert all(
        c.dataset_options["validation"] == 0.2 for c in (study.config, *study.table1, *study.table2)
    )
    tables = facility_location.make_study("default", validation=True).tables
    assert all(t.config.select_on == "validation" for t in tables)


def test_protocol_runs_select_on_validation_and_both_ways_agree_with_the_records(book):
    records = _validated(book["protocol"])
    for record in records["softmax"]:
        assert (
            record.data["history"][0]["epoch"] == 0 and record.data["history"][0]["val_metrics"]
        )  # before training
    table = both_ways_table(records)
    assert list(table.columns) == [VAL, TEST, "runs", "evaluations"]
    assert COLUMN_LABELS["test"] == "best epoch on test (papers' protocol, optimistic)"
    values = {
        b: [100 * selected_metrics(r, b)["R@1"] for r in records["softmax"]] for b in COLUMN_LABELS
    }
    assert table.loc["softmax", VAL].startswith(f"{sum(values['validation']) / 2:.1f} ± ")
    assert table.loc["softmax", TEST].startswith(f"{sum(values['test']) / 2:.1f} ± ")
    assert table.loc["softmax", "runs"] == 2 and table.loc["softmax", "evaluations"] == 2
    assert all(
        t >= v for t, v in zip(values["test"], values["validation"])
    )  # test selection is never below


def test_easy_positive_main_comparison_both_ways(book):
    records = _validated(book["easy_positive"])
    frame = main_comparison(records, "EPSHN")
    beats_val, beats_test = (
        protocol_column("EPSHN beats it", "validation"),
        protocol_column("EPSHN beats it", "test"),
    )
    assert list(frame.columns) == [
        VAL,
        TEST,
        "runs",
        "evaluations",
        beats_val,
        beats_test,
        "effect",
        "90% interval",
        "verdict changes",
    ]
    assert (
        list(frame.index) == list(easy_positive.TABLE1_METHODS)
        and frame.loc["EPSHN", beats_val] == "—"
    )
    for method in ("triplet", "N-pair", "Proxy-NCA"):
        row = frame.loc[method]
        assert row[beats_val] in (
            "holds",
            "does not hold",
            "inconclusive",
        )  # 2 seeds: inconclusive or better
        assert row["verdict changes"] == (row[beats_val] != row[beats_test])
        mean = sum(selected_metrics(r, "validation")["R@1"] for r in records[method]) / 2
        assert row[VAL].startswith(f"{100 * mean:.1f}")
    with pytest.raises(KeyError, match="'EP' is not among"):
        main_comparison(records, "EP")


#: Chapter 02's tiny study: the smoke profile's Table 1 (B = 12, C/m = 0.25: the 3 training
#: classes left after the hold-out, 4 images each) at TINY, on two seeds.
FL_STUDY = dict(
    profile="smoke", overrides={**TINY, "batch_size": 12}, validation=True, seeds=(0, 1)
)


@pytest.fixture(scope="module")
def fl_tiny(tmp_path_factory):
    """Chapter 02's Table 1 at the TINY smoke size, trained through the chapter layer (the shared
    ``book`` fixture does not train it): the run set and ``{method: [runs by seed]}``."""
    study = facility_location.make_study(**FL_STUDY)
    table = study.tables[0]
    splits = load_dataset(table.config.dataset, **table.config.dataset_options)
    declared = {table.table: facility_location.groups(study)[table.table]}
    folder = tmp_path_factory.mktemp("results") / "02_facility_location" / "smoke"
    runset = facility_location.train(declared, study, folder, splits={"digits": splits})
    runs, *_ = facility_location.by_role(runset, study)
    return runset, runs[table.table]


def test_facility_location_runs_validate_and_their_geometric_metrics_stay_at_the_kept_epoch(
    fl_tiny,
):
    _, runs = fl_tiny
    records = _validated(runs)
    for run in runs["clustering"]:
        assert run.metrics["R@1"] == pytest.approx(
            run.record.best["metrics"]["R@1"]
        )  # the kept (validation) epoch
    frame = main_comparison(records, "clustering", "NMI")
    assert protocol_column("NMI", "validation") in frame and len(frame) == 4
    # the claims read the geometric NMI of the kept weights; shown at another epoch (the test
    # classes' choice), a run's metrics are the record's there, and the kept ones come back after
    record, _ = selected_record(
        [0.5, 0.7, 0.6, 0.8], [0.6, 0.9, 0.7, 0.65], "validation"
    )  # test: 4, validation: 2
    record.data["extras"] = {"metrics_geometric": {"R@1": 0.7}}
    run = facility_location.KeptRun("x", record)
    assert run.metrics == {"R@1": 0.7}
    with selected_on([record], "test"):
        assert run.metrics["R@1"] == pytest.approx(0.8) and run.recorded_metrics["R@1"] == 0.8
    assert run.metrics == {"R@1": 0.7}  # restored


def test_facility_location_claims_and_main_comparison_under_both_protocols(fl_tiny):
    runset, runs = fl_tiny
    every = [r for rs in runs.values() for r in rs]
    study = facility_location.make_study(**FL_STUDY)
    toy = facility_location.toy_frame(
        facility_location.run_toy([0], losses=["clustering"], steps=2)
    )
    traced = facility_location.lemma1_per_update(facility_location.lemma1_batches(repeats=1)[:1])
    specs = facility_location.claim_specs(study, "smoke", ["Table 1"], toy, None, traced)
    recorded = facility_location.recorded(runset)
    both = evaluate_both_ways(specs, recorded)
    on_validation = evaluate(specs, recorded)
    assert both["id"].tolist() == [c.id for c in specs]
    assert both["claim"].tolist() == [j.spec.text for j in on_validation]
    assert both[protocol_column("verdict", "validation")].tolist() == [
        str(j.verdict) for j in on_validation
    ]
    assert both["verdict changes"].tolist() == [
        v != t
        for v, t in zip(
            both[protocol_column("verdict", "validation")], both[protocol_column("verdict", "test")]
        )
    ]
    frames = facility_location.main_comparisons({"Table 1": runs})
    assert list(frames) == [("Table 1", "R@1"), ("Table 1", "NMI")]
    r1 = frames[("Table 1", "R@1")]
    assert list(r1.index) == [facility_location.ROW_NAMES[m] for m in facility_location.METHODS]
    mean = sum(selected_metrics(r.record, "test")["R@1"] for r in runs["triplet"]) / 2
    # this chapter names the test-selected epoch the optimistic protocol of other papers
    fl_test = TEST.replace("(papers' protocol, optimistic)", "(optimistic; other papers' protocol)")
    assert r1.loc["Triplet semihard", fl_test].startswith(f"{100 * mean:.1f}")
    gap = facility_location.nmi_normalisation_gap(every)
    assert 0 <= gap < 0.02  # the two normalisations of one clustering, at the kept epoch


def test_discriminative_and_claims_recomputed_under_each_protocol(book):
    runs = book["discriminative"]
    records = _validated(runs)
    every = [r for rs in records.values() for r in rs]

    def judge():
        r1 = {m: [r.record.best["metrics"]["R@1"] for r in rs] for m, rs in runs.items()}
        return {"discriminative beats semi-hard": compare(r1["discriminative"], r1["semihard"])}

    table = both_ways_verdicts(every, judge)
    assert list(table.columns[:4]) == [
        "claim",
        protocol_column("verdict", "validation"),
        protocol_column("verdict", "test"),
        "verdict changes",
    ]
    row = main_comparison(records, "discriminative").loc["semihard"]
    for basis in ("validation", "test"):
        assert (
            table.loc[0, protocol_column("verdict", basis)]
            == row[protocol_column("discriminative beats it", basis)]
        )
    assert all(r.best == r.selections["validation"] for r in every)  # restored after each block
    # Table 2's last layer was scored at the kept epoch: its pairs stay there under either protocol
    disc = runs["discriminative"]
    for run in disc:
        assert run.extras["last_layer"] and run.record.best == run.record.selections["validation"]


def test_profs_runs_validate_and_the_best_variant_is_chosen_on_validation(tmp_path):
    """Chapter 04's Table 1 variants on Contrastive-Hard at the smoke profile, trained tiny through
    the chapter layer (:func:`dmlnb.experiments.profs.groups`, :func:`train_runs`): every run
    selects on the validation classes, and the best variant is chosen on them."""
    cfg = profs.experiment_config("smoke", {**TINY, "batch_size": 6}, validation=True)
    settings = profs.experiment_settings("smoke", seeds=(0, 1))
    splits = load_dataset(cfg.dataset, **cfg.dataset_options)
    groups = profs.groups(cfg, settings, splits.num_train_classes)
    table1 = {
        name: replace(g, methods={"Contrastive-Hard": g.methods["Contrastive-Hard"]})
        for name, g in groups.items()
        if name.startswith("table1/")
    }
    runs = train_runs(table1, cfg, tmp_path / "04_profs" / "smoke", splits=splits)
    sides = profs.table_sides(runs, 1)
    by_variant = {v: rs for (row, v), rs in sides.items() if row == "Contrastive-Hard"}
    assert set(by_variant) == set(profs.VARIANTS) and all(
        len(rs) == 2 for rs in by_variant.values()
    )
    _validated(by_variant)
    gains = profs.gain_frame(sides)
    val_r1 = {
        v: sum(r.record.selections["validation"]["val_metrics"]["R@1"] for r in rs)
        for v, rs in by_variant.items()
    }
    assert gains.loc["Contrastive-Hard", "best variant"] == max(val_r1, key=val_r1.get)
    # a timing run does not evaluate, so it selects nothing, also in a chapter that validates
    times = profs.step_times("contrastive-hard", cfg, splits, rho=6.0, lam=1e-3, steps=2, repeats=1)
    assert set(times["variant"]) == set(profs.VARIANTS)


def test_ssdml_holds_out_before_the_labelled_draw_and_keeps_test_selection_on_same_class_data(
    tmp_path,
):
    smoke = ssdml.settings_for("smoke", validation=True)
    assert (
        smoke["digits"].validation is None
    )  # digits with split="samples": no class-disjoint validation
    assert smoke["digits"].train_config("smoke", 0).select_on == "test"
    default = ssdml.settings_for("default", validation=True)
    assert default["digits"].validation is None and default["omniglot"].validation == 0.2
    assert default["omniglot"].train_config("default", 0).select_on == "validation"
    assert (
        ssdml.settings_for("default")["omniglot"] == ssdml.PROFILE_SETTINGS["default"]["omniglot"]
    )
    # a class-disjoint digits setting: the validation classes are in neither the labelled
    # nor the unlabelled part
    setting = replace(
        smoke["digits"],
        validation=2,
        methods=("ours",),
        max_units=300,
        config={**smoke["digits"].config, "dataset_options": {"split": "classes"}, "epochs": 2},
    )
    config = setting.train_config("smoke", 0)
    splits = ssdml.load_splits(setting, config, 0)
    names = splits.class_names
    assert len(names["validation"]) == 2 and not set(names["validation"]) & set(names["train"])
    assert (
        splits.unlabelled_targets.max() < 3 and splits.train.labels.max() < 3
    )  # 3 training classes remain
    group = RunGroup(
        {"ours": ssdml.objective_method("ours", setting)},
        (0,),
        procedure=ssdml.SSDMLProcedure(setting),
    )
    runs = train_runs({"d": group}, config, tmp_path, splits=splits, say=lambda _: None)
    run = runs.run("d", "ours", 0)
    _check_validated(run.record)
    assert run.record.data["history"][0]["val_metrics"]  # the Initial row is evaluated on both


@pytest.mark.skipif(
    not (os.environ.get("DMLNB_DATA") and (Path(os.environ["DMLNB_DATA"]) / "omniglot").exists()),
    reason="needs Omniglot under DMLNB_DATA",
)
def test_ssdml_floors_are_found_for_a_validated_setting():
    key, floors = ssdml.protocol_floors(ssdml.settings_for("default", validation=True), "default")
    assert key == "omniglot" and set(floors) == {"raw pixels", "untrained network"}


def test_the_books_optimism_is_the_records_and_never_negative(book):
    runs, summary = protocol.book_optimism(book["root"], profile="smoke")
    assert list(runs.columns) == protocol.BOOK_OPTIMISM_COLUMNS
    assert runs["validation split"].all() and (runs["optimism"] >= 0).all()
    assert set(runs["chapter"]) == {"00_protocol", "01_easy_positive", "03_discriminative"}
    softmax = runs[runs["chapter"] == "00_protocol"]
    assert set(softmax["method"]) == {"softmax"}
    expected = selection_optimism(r.record for r in book["protocol"]["softmax"])
    assert softmax["optimism"].tolist() == expected["optimism"].tolist()
    assert summary.index.names == ["chapter", "method"]
    row = summary.loc[("00_protocol", "softmax")]
    assert row["runs"] == 2 and row["mean"] == pytest.approx(expected["optimism"].mean())
    assert (summary["mean"] >= 0).all() and summary["runs"].sum() == len(runs)
    assert math.isnan(row["low"]) or row["low"] <= row["mean"] <= row["high"]
    assert (runs["records"] == 1).all() and (runs["evaluations"] > 0).all()


def test_a_run_stored_under_two_names_counts_once_under_the_method_with_most_folders(
    book, tmp_path
):
    """A search's chosen value at seed 0 is the method's own seed-0 run (same configuration and
    method): the book's optimism counts it once."""
    for path in Path(book["root"]).glob("*/smoke/**/record.json"):
        target = tmp_path / path.relative_to(book["root"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    before, _ = protocol.book_optimism(tmp_path, profile="smoke")
    first = next(tmp_path.glob("00_protocol/smoke/softmax-seed0"))
    shutil.copytree(first, first.parent / "softmax-t0.5-seed0")  # the same run, a search's name
    runs, summary = protocol.book_optimism(tmp_path, profile="smoke")
    assert len(runs) == len(before) and runs["records"].sum() == len(before) + 1
    row = runs[runs["run"] == RunRecord.load(first / "record.json").data["name"]]
    assert row["method"].tolist() == ["softmax"] and row["records"].tolist() == [2]
    assert (
        summary.loc[("00_protocol", "softmax"), "runs"] == 2
        and ("00_protocol", "softmax-t0.5") not in summary.index
    )


# ----------------------------------------------------------------------------------------------
# Off: the committed default-profile records reload unchanged
# ----------------------------------------------------------------------------------------------

_HAS_DATA = (
    bool(os.environ.get("DMLNB_DATA"))
    and (Path(os.environ.get("DMLNB_DATA", ".")) / "omniglot").exists()
)
needs_records = pytest.mark.skipif(
    not (_HAS_DATA and RESULTS.exists()),
    reason="needs the committed results/ and Omniglot under DMLNB_DATA",
)


@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setenv(NO_TRAINING_ENV, "1")


def _default_chapter(chapter, folder: str):
    """A chapter's default configuration (switch off), settings, splits and committed run folder."""
    config = chapter.experiment_config("default")
    return (
        config,
        chapter.experiment_settings("default"),
        load_dataset(config.dataset, **config.dataset_options),
        RESULTS / folder / "default",
    )


def _reloaded(runs) -> int:
    """How many runs were reloaded (training is disabled: a run that would train raises)."""
    runs = list(runs)
    assert runs and not any(
        getattr(r, "trained", getattr(r, "model", None) is not None) for r in runs
    )
    return len(runs)


@needs_records
def test_protocol_records_reload_with_the_chapters_validation_split(no_training):
    config = protocol.chapter_config("default", validation=True)  # the notebook's default
    folder = RESULTS / "00_protocol" / "default"
    groups = protocol.softmax_groups((0, 1, 2), 0.05)
    for spec in groups[protocol.GROUP].runs():
        assert reuse_reason(folder / spec.name, spec.config(config), spec.spec)[0] == ""
    assert train_runs(groups, config, folder).trained == 0


def _easy_positive_notebook_runs():
    """Every distinct run of notebooks/01_easy_positive.ipynb at its defaults (validation=True,
    the strict semi-hard rule, the inclusive one beside it), as declared:
    ``{folder name: (RunSpec, resolved config)}``."""
    study = easy_positive.make_study("default", validation=True)
    return {
        s.name: (s, s.config(b.config))
        for b in easy_positive.declare(study)
        for g in b.groups.values()
        for s in g.runs()
    }


def test_easy_positive_notebook_runs_select_on_validation_and_name_the_semihard_rule():
    """The chapter's default-profile design: 75 runs, each holding out the profile's validation
    classes, evaluated every epoch and selecting on them; EPSHN's specification names its rule."""
    runs = _easy_positive_notebook_runs()
    assert len(runs) == 75
    for spec, config in runs.values():
        assert (
            config.select_on == "validation"
            and config.dataset_options["validation"] == VALIDATION["default"]
        )
        assert (config.eval_every, config.epochs) == (1, 5)
        method = spec.spec["method"]
        assert ("semihard" in spec.spec) == (method == "EPSHN")
    rules = {s.spec["semihard"] for s, _ in runs.values() if s.spec["method"] == "EPSHN"}
    assert rules == {"strict", "inclusive"}
    assert sum(n.endswith("-semihard-inclusive") for n in runs) == 3


@needs_records
def test_easy_positive_records_reload_at_the_notebook_defaults(no_training):
    """The committed records are the notebook's runs at its defaults: this holds once
    results/01_easy_positive/default is retrained with validation=True and the strict rule."""
    study = easy_positive.make_study("default", validation=True)
    done = easy_positive.train_chapter(
        easy_positive.declare(study), RESULTS / "01_easy_positive" / "default"
    )
    assert _reloaded(r for g in done.runs.values() for r in g.values()) and not done.trained
    assert len(done.records()) == len(
        list((RESULTS / "01_easy_positive" / "default").glob("*/record.json"))
    )


def test_the_discriminative_notebook_selects_on_validation_with_the_searched_clustering_baseline():
    """What the discriminative chapter's records are made with at its notebook's defaults
    (``validation=True``, the clustering baseline's Algorithm 2 and searched gamma); passes before
    the records are retrained, unlike the reload below."""
    import json

    cells = json.loads((RESULTS.parent / "notebooks" / "03_discriminative.ipynb").read_text())[
        "cells"
    ]
    parameters = "".join(
        next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["source"]
    )
    assert "\nvalidation = True  #" in parameters
    config = discriminative.experiment_config("default", validation=True)
    assert config.select_on == "validation" and config.dataset_options["validation"] == 0.2
    settings = discriminative.experiment_settings("default")
    assert (
        settings["clustering_gammas"] == (1.0, 10.0)
        and settings["clustering_refinement"] == "paper"
    )
    clustering = discriminative.run_groups(config, settings, 109)["clustering"]
    specs = {r.label: r.spec["factory"]["args"] for r in clustering.runs() if r.seed == 0}
    assert {g: (a["margin_multiplier"], a["refinement"]) for g, a in specs.items()} == {
        "clustering-g1": (1.0, "paper"),
        "clustering-g10": (10.0, "paper"),
    }
    # 109 of Omniglot-small's 136 training classes remain: the one-image-per-class
    # variant is left out
    assert discriminative.variant_unfit("1 image per class", config, 109).endswith(
        "109 remain after the validation classes are held out"
    )


@needs_records
def test_discriminative_records_reload_at_the_notebooks_defaults(no_training):
    """Fails until the chapter is retrained at its notebook's defaults (validation classes, the
    searched gamma, Algorithm 2): the committed records were made before."""
    config = discriminative.experiment_config("default", validation=True)
    settings = discriminative.experiment_settings("default")
    splits, folder = (
        load_dataset(config.dataset, **config.dataset_options),
        RESULTS / "03_discriminative" / "default",
    )
    groups = discriminative.run_groups(config, settings, splits.num_train_classes)
    runs = train_runs(groups, config, folder, splits=splits)  # training disabled: it would raise
    assert runs.trained == 0
    assert len(runs.records()) == len(list(folder.glob("*/record.json"))) == 33


def test_the_deviation_tables_say_where_the_runs_select_and_what_test_selection_would_add(book):
    disc = book["discriminative"]
    every = [r for rs in disc.values() for r in rs]
    config = discriminative.experiment_config("smoke", {**TINY, "batch_size": 24}, validation=True)
    rows = discriminative.deviation_rows(
        disc["discriminative"],
        {},
        every,
        config=config,
        profile="smoke",
        num_classes=3,
        validation_classes=2,
    )
    by_setting = {row.setting: row for row in rows}
    row = by_setting["model selection"]
    assert row.ours.startswith(
        "2 of the 5 training classes held out as validation classes (training on the other 3)"
    )
    batches = by_setting["batches"]
    assert (batches.effect, batches.why) == ("", "not-measured")
    assert batches.scale == (
        "a batch of 24 images, 1 per class, needs 24 training classes "
        "and 3 remain after the validation classes are held out"
    )
    expected = optimism_text(r.record for r in every)
    assert (
        expected.startswith("; choosing on the test classes instead would add +")
        and "R@1 (4 runs)" in expected
    )
    assert row.effect.endswith(expected)  # the measured effect, where the runs select
    table = discriminative.deviations_table(
        disc["discriminative"], {}, every, config=config, profile="smoke", num_classes=3
    )
    assert table.loc["model selection", "effect"] == row.effect  # rendered by deviations_frame


def test_the_facility_location_deviations_say_where_the_runs_select(fl_tiny):
    _, runs = fl_tiny
    study = facility_location.make_study(**FL_STUDY)
    rows = facility_location.deviations({"Table 1": runs}, {}, study, "smoke")
    row = deviations_frame(rows).loc["training length and model selection"]
    assert "on validation classes held out of training" in row["ours"]
    assert row["effect"].endswith(optimism_text(r.record for rs in runs.values() for r in rs))
