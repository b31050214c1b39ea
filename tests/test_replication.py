"""Verdicts that replicate: a chapter's claims on another set of seeds compared claim by claim
with the book's (:mod:`dmlnb.chapter.replication`), the seeds shifted by the chapter layer, and
``python -m dmlnb replicate`` (:mod:`dmlnb.replicate`) that trains, renders and compares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import toy_chapter as toy

from dmlnb import cli
from dmlnb import replicate as replication_command
from dmlnb.chapter import (
    RunGroup,
    compare_claims,
    evaluate,
    replication_summary,
    train_runs,
    write_claims_json,
)
from dmlnb.records import read_json

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _claim(id_: str, verdict: str, category: str, effect: float | None) -> dict:
    return {
        "id": id_,
        "claim": f"claim {id_}",
        "verdict": verdict,
        "category": category,
        "effect": effect,
        "scale": 100.0,
        "unit": "pts",
    }


def _write(folder: Path, claims: list[dict], chapter: str = "toy") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "claims.json").write_text(
        json.dumps({"chapter": chapter, "profile": "smoke", "claims": claims})
    )
    return folder


def test_claims_agree_when_their_verdicts_fall_in_one_category(tmp_path: Path) -> None:
    book = _write(
        tmp_path / "book",
        [
            _claim("a", "holds", "holds", 0.05),
            _claim("b", "does not hold: 1 of 3 pairs hold", "does not hold", -0.02),
            _claim("c", "inconclusive", "inconclusive", 0.001),
            _claim("d", "not tested at this scale", "not tested at this scale", None),
        ],
    )
    replica = _write(
        tmp_path / "replica",
        [
            _claim("a", "holds", "holds", 0.04),
            _claim("b", "does not hold", "does not hold", -0.03),
            _claim("c", "holds", "holds", 0.02),
            _claim("d", "not tested at this scale", "not tested at this scale", None),
        ],
    )
    frame = compare_claims(book, replica / "claims.json")
    assert list(frame["agrees"]) == [True, True, False, None]
    assert frame.loc[0, "book effect"] == pytest.approx(5.0)
    assert frame.loc[2, "replica effect"] == pytest.approx(2.0)
    assert replication_summary(frame) == {
        "claims": 4,
        "tested": 3,
        "agreeing": 2,
        "disagreeing": 1,
        "agreement": 2 / 3,
    }


def test_only_a_chapters_own_replica_compares(tmp_path: Path) -> None:
    book = _write(tmp_path / "book", [_claim("a", "holds", "holds", 0.05)])
    other = _write(tmp_path / "other", [_claim("a", "holds", "holds", 0.05)], chapter="ssdml")
    with pytest.raises(ValueError, match="compare a chapter with its own replica"):
        compare_claims(book, other)
    fewer = _write(tmp_path / "fewer", [_claim("b", "holds", "holds", 0.05)])
    with pytest.raises(ValueError, match=r"other claims \(\['a', 'b'\]\)"):
        compare_claims(book, fewer)
    with pytest.raises(FileNotFoundError, match="render the chapter"):
        compare_claims(book, tmp_path / "nowhere")


def test_the_layer_shifts_every_seed(tmp_path: Path) -> None:
    config = toy.config("smoke").replace(epochs=1, steps_per_epoch=2, eval_metrics=("recall",))
    groups = {"losses": RunGroup(toy.METHODS, seeds=(0, 1))}
    runs = train_runs(groups, config, tmp_path, seed_offset=100, say=lambda _: None)
    assert runs.seeds("losses", "triplet") == [100, 101]
    record = runs.run("losses", "triplet", 101).record
    assert record.config["seed"] == 101 and (tmp_path / "triplet-seed101").is_dir()
    judged = evaluate(toy.CLAIMS, runs)  # claims read whatever seeds the runs have
    assert judged[0].verdict.n == (2,)


def _fake_chapter(tmp_path: Path, verdict: str) -> tuple[list, object, object]:
    """A train and a render that record their calls; the render writes claims.json."""
    calls: list = []

    def train(notebook, processes, profile, **kw):  # noqa: ANN001, ANN202
        calls.append(("train", notebook.name, processes, profile, kw["parameters"]))

    def render(notebook, runs, profile, output, **kw):  # noqa: ANN001, ANN202
        calls.append(("render", Path(runs), profile, kw["parameters"]))
        category = verdict.split(":")[0]
        _write(Path(runs) / profile, [_claim("a", verdict, category, 0.01)], chapter="00")

    return calls, train, render


def test_replicate_trains_renders_and_compares(tmp_path: Path, monkeypatch, capsys) -> None:
    book = _write(tmp_path / "book", [_claim("a", "holds", "holds", 0.02)], chapter="00")
    calls, train, render = _fake_chapter(tmp_path, "inconclusive")
    monkeypatch.setattr(replication_command, "train_notebook", train)
    monkeypatch.setattr(replication_command, "render", render)
    argv = ["replicate", str(NOTEBOOKS / "00_protocol.ipynb"), "--seed-offset", "100"]
    argv += ["--runs", str(tmp_path / "replica"), "--profile", "smoke", "--book", str(book)]
    assert cli.main(argv) == 0
    runs = str((tmp_path / "replica").resolve())
    assert calls[0] == (
        "train",
        "00_protocol.ipynb",
        2,
        "smoke",
        [("results_dir", runs), ("seed_offset", "100")],
    )
    assert calls[1] == ("render", Path(runs), "smoke", {"seed_offset": 100})
    out = capsys.readouterr().out
    assert "0 of 1 tested claims agree, 1 disagree" in out
    stored = read_json(tmp_path / "replica" / "smoke" / "replication.json")
    assert stored["summary"]["disagreeing"] == 1 and stored["seed_offset"] == 100
    assert stored["claims"][0]["book"] == "holds" and stored["claims"][0]["agrees"] is False


def test_replicate_refuses_what_it_cannot_replicate(tmp_path: Path, capsys) -> None:
    nb = json.loads((NOTEBOOKS / "00_protocol.ipynb").read_text())
    for cell in nb["cells"]:  # the same chapter without the parameter
        cell["source"] = [line for line in cell["source"] if not line.startswith("seed_offset")]
    old = tmp_path / "old.ipynb"
    old.write_text(json.dumps(nb))
    argv = ["replicate", str(old), "--seed-offset", "100", "--runs", str(tmp_path / "r")]
    assert cli.main(argv) == 2
    assert "no ['seed_offset'] parameter" in capsys.readouterr().err
    argv = ["replicate", str(NOTEBOOKS / "00_protocol.ipynb"), "--seed-offset", "0"]
    assert cli.main([*argv, "--runs", str(tmp_path / "r")]) == 2
    assert "the book's own seeds" in capsys.readouterr().err


def test_the_books_claims_are_where_the_notebook_writes_them() -> None:
    folder = replication_command.book_claims_folder(NOTEBOOKS / "00_protocol.ipynb", "default")
    assert folder == (NOTEBOOKS.parent / "results" / "00_protocol" / "default").resolve()
    assert (folder / "claims.json").is_file()
    assert read_json(folder / "claims.json")["chapter"] == "00_protocol"


def test_write_then_compare_a_chapter_with_itself(tmp_path: Path) -> None:
    config = toy.config("smoke").replace(epochs=1, steps_per_epoch=2, eval_metrics=("recall",))
    runs = train_runs({"losses": RunGroup(toy.METHODS, seeds=(0, 1))}, config, None)
    path = write_claims_json(tmp_path, evaluate(toy.CLAIMS, runs), chapter="toy", profile="smoke")
    frame = compare_claims(path, path)
    assert frame["agrees"].dropna().all() and replication_summary(frame)["disagreeing"] == 0
