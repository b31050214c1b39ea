"""The chapter layer's procedures (:mod:`dmlnb.chapter.procedure`): every field of a group's
procedure enters its runs' fingerprints, its sampler and hooks are the ones the loop uses, its
extras are stored and reloaded; deviations are rows rendered by one function; claims are judged
under both selection protocols."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import toy_chapter as toy

from dmlnb.chapter import (
    Beats,
    ClaimSpec,
    Components,
    Deviation,
    Procedure,
    RunContext,
    RunGroup,
    RunSet,
    Side,
    deviations_frame,
    evaluate,
    evaluate_both_ways,
    run_spec,
    train_runs,
    write_claims_json,
)
from dmlnb.hooks import Hook
from dmlnb.methods import call
from dmlnb.records import run_fingerprint
from dmlnb.samplers import MPerClassSampler


class CountingHook(Hook):
    """Counts the optimisation steps it saw."""

    def __init__(self) -> None:
        self.steps = 0

    def on_step_end(self, state) -> None:  # noqa: ANN001
        self.steps += 1


@dataclass(frozen=True)
class Counted(Procedure):
    """A procedure with a sampler of its own (``m`` images per class), a hook and an extra."""

    m: int = 6
    tag: str = "a"

    def components(self, run: RunContext) -> Components:
        labels = torch.as_tensor(run.splits.train.labels)
        sampler = MPerClassSampler(
            labels,
            self.m,
            run.config.batch_size,
            seed=run.seed,
            num_batches=run.config.steps_per_epoch,
        )
        run.state["hook"] = hook = CountingHook()
        run.state["sampler"] = sampler
        return Components(run.loss, sampler=sampler, hooks=[hook])

    def finish(self, run: RunContext, record) -> dict:  # noqa: ANN001
        return {"steps_seen": run.state["hook"].steps, "m": self.m}


def _config():
    return toy.config("smoke").replace(epochs=1, steps_per_epoch=3, eval_metrics=("recall",))


def test_every_field_of_a_procedure_enters_the_fingerprint() -> None:
    config, c = _config(), call("triplet")
    base = run_fingerprint(config, run_spec(c, Counted(), "t"))
    assert run_fingerprint(config, run_spec(c)) != base  # the default procedure writes nothing
    for f in dataclasses.fields(Counted):
        changed = dataclasses.replace(Counted(), **{f.name: f.default * 2})  # 12, 'aa'
        assert run_fingerprint(config, run_spec(c, changed, "t")) != base, f.name
    assert run_spec(c, Counted(), "t")["procedure"] == {"name": "Counted", "m": 6, "tag": "a"}


def test_a_procedure_trains_with_its_sampler_and_hooks_and_stores_its_extras(
    tmp_path: Path,
) -> None:
    groups = {"g": RunGroup({"triplet": call("triplet")}, seeds=(0,), procedure=Counted(m=8))}
    first = train_runs(groups, _config(), tmp_path, say=lambda _: None)
    run = first.run("g", "triplet", 0)
    assert run.trained and dict(run.extras) == {"steps_seen": 3, "m": 8}
    stored = json.loads((tmp_path / "triplet-seed0" / "record.json").read_text())
    assert stored["spec"]["procedure"]["m"] == 8 and stored["extras"]["steps_seen"] == 3
    again = train_runs(groups, _config(), tmp_path, say=lambda _: None)
    assert again.trained == 0 and dict(again.run("g", "triplet", 0).extras) == dict(run.extras)
    assert len(again.records()) == 1
    said: list[str] = []
    other = {"g": RunGroup({"triplet": call("triplet")}, seeds=(0,), procedure=Counted(m=12))}
    assert train_runs(other, _config(), tmp_path, say=said.append).trained == 1
    assert said and "fingerprint changed" in said[0]


LOADS: list[int] = []


@dataclass(frozen=True)
class PerSeed(Procedure):
    """Data per seed, its own training hook, an entry of its first seed only."""

    first: int = 0

    def seed_entries(self, label, c, seed) -> dict:  # noqa: ANN001
        return {"first": seed == self.first}

    def data_key(self, config):  # noqa: ANN001, ANN201
        return config.seed

    def load_data(self, config, data_root):  # noqa: ANN001, ANN201
        LOADS.append(config.seed)
        return super().load_data(config, data_root)

    def train(self, run, parts, *, resume, name, spec):  # noqa: ANN001, ANN201
        run.state["by"] = f"hook {name}"
        return super().train(run, parts, resume=resume, name=name, spec=spec)

    def finish(self, run: RunContext, record) -> dict:  # noqa: ANN001
        return {"by": run.state["by"]}


def test_a_procedure_loads_data_per_key_trains_by_its_hook_and_adds_seed_entries(
    tmp_path: Path,
) -> None:
    LOADS.clear()
    methods = {"triplet": call("triplet"), "contrastive": call("contrastive")}
    groups = {"g": RunGroup(methods, seeds=(0, 1), procedure=PerSeed())}
    runs = train_runs(groups, _config(), tmp_path, say=lambda _: None)
    assert runs.trained == 4 and sorted(LOADS) == [0, 1]  # one load per seed, shared
    for (label, seed), run in runs.runs["g"].items():
        assert run.record.data["spec"]["first"] == (seed == 0)
        assert dict(run.extras) == {"by": f"hook {label}-seed{seed}"}
    assert "first" not in run_spec(call("triplet"), PerSeed(), "triplet")  # no seed: no entry
    one = {"g": RunGroup({"triplet": call("triplet")}, seeds=(0,), procedure=PerSeed(first=1))}
    assert train_runs(one, _config(), tmp_path, say=lambda _: None).trained == 1  # moved
    toy_splits = PerSeed().load_data(_config(), None)
    LOADS.clear()
    mem = train_runs(one, _config(), None, splits=toy_splits, say=lambda _: None)
    assert not LOADS and mem.trained == 1  # the data it is given is kept


def test_a_procedure_may_not_overwrite_the_method() -> None:
    @dataclass(frozen=True)
    class Bad(Procedure):
        def spec_entries(self, label, c):  # noqa: ANN001, ANN202
            return {"factory": "typed"}

    with pytest.raises(ValueError, match="may not write 'factory'"):
        run_spec(call("triplet"), Bad())


def test_deviations_are_rows_with_an_effect_or_a_typed_reason() -> None:
    rows = [
        Deviation("epochs", "40 (Sec. 5)", "5", effect="-3 R@1 at 5 vs 25 epochs"),
        Deviation("backbone", "GoogLeNet", "convnet", why="needs-gpu", scale="the paper profile"),
    ]
    frame = deviations_frame(rows)
    assert list(frame.columns) == ["paper", "ours", "effect"]
    assert (
        frame.loc["backbone", "effect"]
        == "not measured: it needs a GPU's budget; would be measured at the paper profile"
    )
    assert frame.loc["epochs", "effect"] == "-3 R@1 at 5 vs 25 epochs"
    with pytest.raises(ValueError, match="either the measured effect or why"):
        Deviation("a", "b", "c")
    with pytest.raises(ValueError, match="not both"):
        Deviation("a", "b", "c", effect="x", why="needs-gpu", scale="s")
    with pytest.raises(ValueError, match="why must be one of"):
        Deviation("a", "b", "c", why="lazy", scale="s")
    with pytest.raises(ValueError, match="at which scale"):
        Deviation("a", "b", "c", why="needs-gpu")
    with pytest.raises(ValueError, match="each setting once"):
        deviations_frame(rows + rows[:1])


def test_claims_are_judged_under_both_protocols(tmp_path: Path) -> None:
    config = _config().replace(
        epochs=2, dataset_options={"validation": 0.3}, select_on="validation"
    )
    groups = {"losses": RunGroup(toy.METHODS, seeds=(0, 1))}
    runs = train_runs(groups, config, tmp_path, say=lambda _: None)
    claim = ClaimSpec(
        "c",
        "triplet beats contrastive",
        Beats(Side("losses", "triplet"), Side("losses", "contrastive"), paired=True),
        where="T1",
    )
    frame = evaluate_both_ways([claim], runs)
    assert frame is not None and list(frame["id"]) == ["c"]
    assert str(evaluate([claim], runs)[0].verdict) in set(frame.iloc[0].astype(str))
    no_validation = train_runs(groups, _config(), tmp_path / "nv", say=lambda _: None)
    assert evaluate_both_ways([claim], no_validation) is None


def test_claims_json_is_rewritten_only_when_the_claims_change(tmp_path: Path) -> None:
    runs = train_runs(
        {"losses": RunGroup(toy.METHODS, seeds=(0, 1))}, _config(), None, say=lambda _: None
    )
    path = write_claims_json(tmp_path, evaluate(toy.CLAIMS, runs), chapter="toy", profile="smoke")
    stamp = path.stat().st_mtime_ns
    os.utime(path, ns=(stamp - 10**9, stamp - 10**9))  # an older file, as a render finds it
    write_claims_json(tmp_path, evaluate(toy.CLAIMS, runs), chapter="toy", profile="smoke")
    assert path.stat().st_mtime_ns == stamp - 10**9  # the same claims: left as it is
    write_claims_json(tmp_path, evaluate(toy.CLAIMS[:1], runs), chapter="toy", profile="smoke")
    assert len(json.loads(path.read_text())["claims"]) == 1


def test_a_run_set_names_the_code_that_made_its_runs(tmp_path: Path) -> None:
    groups = {
        "a": RunGroup({"triplet": call("triplet")}, seeds=(0, 1)),
        "b": RunGroup({"triplet": call("triplet")}, seeds=(1,)),  # shares seed 1's run
    }
    runs = train_runs(groups, _config(), tmp_path, say=lambda _: None)
    frame = runs.provenance()
    assert int(frame["runs"].sum()) == 2  # the shared run counts once


def test_run_sets_merge_by_group_and_refuse_a_group_twice() -> None:
    a, b = RunSet({"a": {}}), RunSet({"b": {}})
    assert sorted(RunSet.merged([a, b]).runs) == ["a", "b"]
    with pytest.raises(ValueError, match="two run sets"):
        RunSet.merged([a, RunSet({"a": {}})])
