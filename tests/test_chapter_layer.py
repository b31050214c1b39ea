"""The chapter layer (:mod:`dmlnb.chapter`): runs declared as data are trained once and then
reloaded, a reader's change to a method retrains only its runs, claims declared as data are
judged by the book's rule and exported to claims.json, and a toy chapter (``toy_chapter.py``,
``data/toy_chapter.ipynb``) goes through all of it as a sixth paper would."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import papermill as pm
import pytest
import toy_chapter as toy

from dmlnb.chapter import (
    AboveThreshold,
    Beats,
    BeatsEvery,
    ClaimSpec,
    Custom,
    InteriorOptimum,
    NoDifference,
    RunGroup,
    RunSet,
    SetAside,
    Side,
    Untestable,
    claims_frame,
    evaluate,
    shape_of,
    train_runs,
    write_claims_json,
)
from dmlnb.methods import call
from dmlnb.reporting import compare

HERE = Path(__file__).resolve().parent


def _runs(values: dict[str, list[float]], group: str = "g") -> RunSet:
    """A run set of fabricated results: ``label -> R@1 per seed``."""
    runs = {
        (label, seed): SimpleNamespace(metrics={"R@1": v}, trained=False, record=None)
        for label, vs in values.items()
        for seed, v in enumerate(vs)
    }
    return RunSet({group: runs})  # type: ignore[dict-item]


def test_beats_paired_and_unpaired_follow_the_rule() -> None:
    runs = _runs({"a": [0.60, 0.62, 0.61, 0.63], "b": [0.50, 0.53, 0.52, 0.51]})
    unpaired, paired, reverse = evaluate(
        [
            ClaimSpec("u", "a beats b", Beats(Side("g", "a"), Side("g", "b")), where="T1"),
            ClaimSpec(
                "p", "a beats b", Beats(Side("g", "a"), Side("g", "b"), paired=True), where="T1"
            ),
            ClaimSpec(
                "r", "b beats a", Beats(Side("g", "b"), Side("g", "a"), paired=True), where="T1"
            ),
        ],
        runs,
    )
    assert (
        str(unpaired.verdict) == str(paired.verdict) == "holds"
        and str(reverse.verdict) == "does not hold"
    )
    assert unpaired.verdict.n == (4, 4) and paired.verdict.n == (4,)
    assert math.isclose(
        unpaired.verdict.effect, compare([0.60, 0.62, 0.61, 0.63], [0.50, 0.53, 0.52, 0.51]).effect
    )
    assert math.isclose(paired.verdict.effect, 0.10)  # mean of 0.10, 0.09, 0.09, 0.12


def test_every_threshold_optimum_untestable_and_custom() -> None:
    runs = _runs(
        {
            "a": [0.6, 0.61, 0.62],
            "b": [0.5, 0.52, 0.51],
            "c": [0.7, 0.71, 0.72],
            "lo": [0.1, 0.11, 0.12],
            "hi": [0.2, 0.21, 0.22],
        }
    )
    judged = evaluate(
        [
            ClaimSpec(
                "every",
                "a beats b and c",
                BeatsEvery(Side("g", "a"), (Side("g", "b"), Side("g", "c"))),
                where="T",
            ),
            ClaimSpec("thr", "a is above 0.55", AboveThreshold(Side("g", "a"), 0.55), where="T"),
            ClaimSpec(
                "opt",
                "the sweep peaks inside",
                InteriorOptimum({1.0: Side("g", "lo"), 2.0: Side("g", "c"), 3.0: Side("g", "hi")}),
                where="F3",
            ),
            ClaimSpec(
                "big",
                "holds on SOP",
                Untestable("needs-gpu", "ResNet-50 for 100 epochs", "an H100"),
                where="S5",
            ),
            ClaimSpec(
                "ours",
                "a beats lo",
                Custom(lambda r: compare(r.values("g", "a", "R@1"), r.values("g", "lo", "R@1"))),
                origin="ours",
            ),
        ],
        runs,
    )
    verdicts = {j.spec.id: str(j.verdict) for j in judged}
    assert verdicts["every"].startswith("does not hold") and verdicts["thr"] == "holds"
    assert verdicts["opt"] == "holds" and verdicts["ours"] == "holds"
    assert verdicts["big"] == "not tested at this scale" and judged[3].reason == "needs-gpu"
    assert "would be tested at an H100" in judged[3].verdict.note
    frame = claims_frame(judged)
    assert list(frame["where"]) == ["T", "T", "F3", "S5", "ours"] and len(frame) == 5


def test_set_aside_no_difference_and_declared_shapes() -> None:
    runs = _runs({"a": [0.60, 0.62, 0.61], "b": [0.50, 0.52, 0.51], "c": [0.99, 0.995, 0.99]})
    runs.runs["g"][("b", 2)].collapsed = True  # one degenerate run on side b
    for key, run in runs.runs["g"].items():
        run.collapsed = getattr(run, "collapsed", False)
    flag = SetAside(degenerate=lambda run: run.collapsed, what="collapsed runs")
    a, b, c = Side("g", "a"), Side("g", "b"), Side("g", "c")
    judged = evaluate(
        [
            ClaimSpec("plain", "a beats b", Beats(a, b), where="T"),
            ClaimSpec("aside", "a beats b", Beats(a, b, set_aside=flag), where="T"),
            ClaimSpec("clean", "c beats a", Beats(c, a, set_aside=flag), where="T"),
            ClaimSpec("top", "c beats a", Beats(c, a, set_aside=SetAside(ceiling=0.5)), where="T"),
            ClaimSpec(
                "every",
                "c beats a and b",
                BeatsEvery(c, (a, b), set_aside=SetAside(ceiling=0.5)),
                where="T",
            ),
            ClaimSpec("same", "a and b do not differ", NoDifference(a, b), where="T"),
            ClaimSpec("close", "a and a do not differ", NoDifference(a, a), where="T"),
            ClaimSpec(
                "trace",
                "the lemma holds at every update",
                Custom(lambda r: compare([1.0, 1.1, 0.9], [0.0, 0.1, 0.0]), shape="trace"),
                where="L1",
            ),
        ],
        runs,
    )
    v = {j.spec.id: j.verdict for j in judged}
    assert str(v["plain"]) == "holds" and str(v["aside"]) == "not tested at this scale"
    assert "collapsed runs: b (g) seed 2" in v["aside"].note
    assert math.isclose(v["aside"].effect, v["plain"].effect)  # the effect kept beside the reason
    assert str(v["clean"]) == "holds"  # no run of a or c is degenerate
    assert str(v["top"]) == str(v["every"]) == "not tested at this scale"
    assert "at its ceiling" in v["top"].note and "50 pts" in v["top"].note
    assert str(v["same"]) == "does not hold" and str(v["close"]) == "inconclusive"
    assert [shape_of(j.spec.test) for j in judged] == [
        "comparison",
        "comparison",
        "comparison",
        "comparison",
        "every",
        "no-difference",
        "no-difference",
        "trace",
    ]
    with pytest.raises(ValueError, match="shape must be one of"):
        Custom(lambda r: compare([1.0], [0.0]), shape="wiggle")
    with pytest.raises(ValueError, match="SetAside needs"):
        SetAside()


def test_bad_declarations_name_the_fix() -> None:
    with pytest.raises(ValueError, match="reason must be one of"):
        Untestable("too-hard", "x", "y")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="say where the paper makes it"):
        ClaimSpec("x", "a claim", Untestable("needs-gpu", "x", "y"))
    with pytest.raises(ValueError, match="seeds must be distinct"):
        RunGroup({"a": call("triplet")}, seeds=(0, 0))
    runs = _runs({"a": [0.6, 0.61, 0.62], "b": [0.5, 0.52]})
    with pytest.raises(ValueError, match="same seeds on both sides"):
        evaluate(
            [
                ClaimSpec(
                    "p", "a beats b", Beats(Side("g", "a"), Side("g", "b"), paired=True), where="T"
                )
            ],
            runs,
        )
    with pytest.raises(ValueError, match="claim ids must be unique"):
        claim = ClaimSpec("p", "a beats b", Beats(Side("g", "a"), Side("g", "b")), where="T")
        evaluate([claim, claim], runs)
    with pytest.raises(KeyError, match="has no method 'z'"):
        runs.values("g", "z", "R@1")


def test_runs_train_once_reload_and_follow_their_methods(tmp_path: Path) -> None:
    config = toy.config("smoke").replace(epochs=1, steps_per_epoch=2, eval_metrics=("recall",))
    shared = {"triplet": toy.METHODS["triplet"], "FaceNet": toy.METHODS["triplet"]}
    groups = {
        "losses": RunGroup(toy.METHODS, seeds=(0, 1)),
        "baseline": RunGroup(shared, seeds=(1,)),
    }
    first = train_runs(groups, config, tmp_path, say=lambda _: None)
    # the baseline's runs are the losses group's triplet seed 1, under its label and another
    assert first.trained == 4 and not (tmp_path / "FaceNet-seed1").exists()
    assert first.runs["baseline"][("triplet", 1)] is first.runs["losses"][("triplet", 1)]
    assert first.runs["baseline"][("FaceNet", 1)] is first.runs["losses"][("triplet", 1)]
    again = train_runs(groups, config, tmp_path, say=lambda _: None)
    assert again.trained == 0 and again.values("losses", "triplet", "R@1") == first.values(
        "losses", "triplet", "R@1"
    )
    record = json.loads((tmp_path / "triplet-seed0" / "record.json").read_text())
    assert record["spec"] == {"factory": toy.METHODS["triplet"].spec}
    said: list[str] = []
    changed = train_runs(
        {
            "losses": RunGroup(
                toy.groups({"triplet": {"margin": 0.1}})["losses"].methods, seeds=(0, 1)
            )
        },
        config,
        tmp_path,
        say=said.append,
    )
    assert changed.trained == 2 and all("fingerprint changed" in s for s in said) and len(said) == 2
    clash = {
        "a": RunGroup({"triplet": call("triplet")}, seeds=(0,)),
        "b": RunGroup({"triplet": call("triplet", margin=0.5)}, seeds=(0,)),
    }
    with pytest.raises(ValueError, match="declared twice"):
        train_runs(clash, config, tmp_path / "clash", say=lambda _: None)
    assert not (tmp_path / "clash").exists()  # refused before anything trained
    with pytest.raises(ValueError, match="needs \\['centroids'\\] from the run"):
        train_runs({"d": RunGroup({"d": call("discriminative")}, seeds=(0,))}, config, None)


def test_claims_json_holds_every_claim_with_its_evidence(tmp_path: Path) -> None:
    runs = _runs({"triplet": [0.6, 0.62, 0.61], "contrastive": [0.5, 0.52, 0.51]}, group="losses")
    path = write_claims_json(tmp_path, evaluate(toy.CLAIMS, runs), chapter="toy", profile="smoke")
    data = json.loads(path.read_text())
    assert data["chapter"] == "toy" and [c["id"] for c in data["claims"]] == [
        c.id for c in toy.CLAIMS
    ]
    first, second = data["claims"]
    assert (
        first["category"] == "holds" and first["runs_per_side"] == [3] and first["reason"] is None
    )
    assert first["interval"][0] > 0 and math.isclose(first["effect"], 0.1)
    assert (
        second["category"] == "not tested at this scale" and second["reason"] == "needs-paper-data"
    )
    assert second["effect"] is None and second["interval"] == [None, None]
    assert (first["scale"], first["unit"], first["paired"]) == (100.0, "pts", True)


def test_direction_and_units_follow_the_metric() -> None:
    runs = _runs({"a": [0.2, 0.21, 0.22], "b": [0.5, 0.52, 0.51], "c": [0.6, 0.61, 0.62]})
    lower = evaluate(
        [
            ClaimSpec(
                "low",
                "a has the lower error of all",
                BeatsEvery(
                    Side("g", "a"), (Side("g", "b"), Side("g", "c")), higher_is_better=False
                ),
                where="T",
            ),
            ClaimSpec(
                "dip",
                "the sweep has its minimum inside",
                InteriorOptimum(
                    {1.0: Side("g", "b"), 2.0: Side("g", "a"), 3.0: Side("g", "c")},
                    higher_is_better=False,
                ),
                where="F",
            ),
        ],
        runs,
    )
    assert [str(j.verdict) for j in lower] == ["holds", "holds"]
    assert lower[0].verdict.effect > 0 and lower[0].verdict.unit == " pts"
    with pytest.raises(ValueError, match="must be in \\[0, 1\\]"):
        AboveThreshold(Side("g", "a"), 50.0, metric="MAP@R")


def test_the_toy_chapter_trains_judges_exports_and_renders(tmp_path: Path) -> None:
    """A sixth paper's chapter: its spec (toy_chapter.py, under 60 lines) and a short notebook."""
    assert len((HERE / "toy_chapter.py").read_text().splitlines()) <= 60
    out = tmp_path / "toy.ipynb"
    params = {"profile": "smoke", "results": str(tmp_path / "results")}
    pm.execute_notebook(
        HERE / "data" / "toy_chapter.ipynb",
        out,
        parameters=params,
        cwd=str(HERE),
        kernel_name="python3",
        progress_bar=False,
    )
    text = out.read_text()
    assert "6 runs trained now" in text and "triplet-beats-contrastive" not in text
    claims = json.loads((tmp_path / "results" / "smoke" / "claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == ["triplet-beats-contrastive", "holds-at-scale"]
    assert claims[0]["runs_per_side"] == [3] and claims[0]["category"] in (
        "holds",
        "does not hold",
        "inconclusive",
    )
    pm.execute_notebook(
        HERE / "data" / "toy_chapter.ipynb",
        out,
        cwd=str(HERE),
        kernel_name="python3",
        parameters={**params, "changes": {"triplet": {"margin": 0.1}}},
        progress_bar=False,
    )
    assert "3 runs trained now" in out.read_text()  # the changed method's runs only


def test_typed_reasons_read_in_words() -> None:
    from dmlnb.chapter import REASON_WORDS, WHY_NOT_WORDS, Deviation, reason_in_words

    assert reason_in_words("needs-gpu", "an H100", REASON_WORDS, "tested") == (
        "it needs a GPU's budget; would be tested at an H100"
    )
    # no run can test it: the scale says why ("none: ..."), no "would be tested at none"
    assert reason_in_words(
        "structurally-untestable", "none: the figure is an illustration", REASON_WORDS, "tested"
    ) == ("no run can test it: the figure is an illustration")
    # this profile's runs are built so that they cannot test it: the scale that would
    assert reason_in_words(
        "structurally-untestable", "D of at least C", REASON_WORDS, "tested"
    ).endswith("would be tested at D of at least C")
    row = Deviation("lr", "0.1", "0.01", why="not-measured", scale="this profile at lr 0.1")
    assert row.measured == (
        f"not measured: {WHY_NOT_WORDS['not-measured']}; would be measured at this profile at "
        "lr 0.1"
    )
