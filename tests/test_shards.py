"""Shards of the run layer (``DMLNB_SHARD=i/n``): every run is trained by the process that claims
it first and reloaded by the others, a process done with a long run takes the next unclaimed one,
a timing study is measured by shard 0 alone while the others wait, a
waiting shard stops when a sibling failed or after its timeout; ``python -m dmlnb train``
executes a chapter in shard processes and names a failed one. A run trained by a shard equals
the run trained alone, bit for bit on the CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from fabricated import fake_run_parts, parameters_notebook

import dmlnb.experiments.easy_positive as ep
import dmlnb.runs as runs
from dmlnb.records import RunRecord, write_json_atomic, write_text_atomic
from dmlnb.runs import (
    MEASUREMENT,
    SHARD_ABORT_ENV,
    SHARD_CLAIMS_ENV,
    SHARD_ENV,
    SHARD_SINCE_ENV,
    SHARD_TIMEOUT_ENV,
    Shard,
    ShardError,
    Table,
    current_shard,
    stored_measurement,
    stored_tables,
    train_or_reload,
)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

FOUR_RUNS = """
import sys
from fabricated import fake_run
from pathlib import Path
import dmlnb.runs
dmlnb.runs.shards.POLL_SECONDS = 0.05
for k in range(4):
    run = fake_run(Path(sys.argv[1]), k)
    print(f"RESULT r{k} trained={run.trained} by={run.extras['shard']}")
"""

ONE_LONG_RUN = """
import sys, time
from fabricated import fake_run_parts
from pathlib import Path
import dmlnb.runs
dmlnb.runs.shards.POLL_SECONDS = 0.05
for k in range(5):
    config, spec, train = fake_run_parts(k)

    def slowly(resume, train=train, k=k):
        time.sleep(3.0 if k == 0 else 0.0)
        return train(resume)

    run = dmlnb.runs.train_or_reload(f"r{k}", Path(sys.argv[1]) / f"r{k}", config, spec, slowly)
    print(f"RESULT r{k} trained={run.trained}")
"""

EP_ANALYSES = """
import sys
from pathlib import Path
import dmlnb.runs
import dmlnb.experiments.easy_positive as ep
from dmlnb.chapter import RunGroup
from dmlnb.experiments.easy_positive import stored as ep_stored
dmlnb.runs.shards.POLL_SECONDS = 0.05
computed = []
real = ep_stored.embedding_statistics

def counted(model, splits, batch_size=512):
    computed.append(1)
    return real(model, splits, batch_size)

ep_stored.embedding_statistics = counted
study = ep.make_study("smoke", {"epochs": 1, "steps_per_epoch": 2})
(b,) = ep.declare(study)
g = b.groups["n3"]  # the figures' runs: their methods at the key n = 3, and N-pair
picked = {m: c for m, c in g.methods.items() if m in ep.FIGURE_METHODS}
key = RunGroup(picked, g.seeds, g.changes, g.procedure)
batch = ep.Batch(b.config, {"n3": key, "N-pair": b.groups["N-pair"]})
folder = Path(sys.argv[1]) / "smoke"
runs = ep.train_chapter([batch], folder, retrain=True)
stored = ep.StoredAnalyses(folder, [batch])
for m, rs in ep.analysis_runs(runs, study, stored, 2).items():
    for r in rs:
        summary = sorted(r.record.data["analysis"].items())
        print(f"RESULT {r.name} trained={r.trained} analysis={summary}")
    print(f"RESULT figures {m} {sorted((k, v.tolist()) for k, v in stored.figures(rs[0]).items())}")
print(f"STATISTICS {len(computed)}")
"""

MEASURE = """
import json, os, sys
from pathlib import Path
import pandas as pd
import dmlnb.runs
from dmlnb.runs import stored_measurement
dmlnb.runs.shards.POLL_SECONDS = 0.05
folder = Path(sys.argv[1])
make = lambda: pd.DataFrame(
    {"marker_seen": [(folder / ".waiting-1").exists()], "pid": [os.getpid()]}
)
frame = stored_measurement(folder, make, settings={"sizes": [1, 2]})
print("RESULT " + json.dumps({"rows": frame.to_dict("records"), "pid": os.getpid()}), flush=True)
"""

TABLES = """
import json, os, sys, time
from pathlib import Path
import pandas as pd
import dmlnb.runs
from dmlnb.runs import Table, stored_tables
dmlnb.runs.shards.POLL_SECONDS = 0.05
folder = Path(sys.argv[1])

def make(name):
    time.sleep(1.5)  # long enough that the sibling claims the other table meanwhile
    return pd.DataFrame({"name": [name], "pid": [os.getpid()]})

frames = stored_tables(
    {name: Table(folder / name, lambda name=name: make(name), {"table": name}) for name in "ab"}
)
print("RESULT " + json.dumps({k: f.to_dict("records") for k, f in frames.items()}), flush=True)
print(f"PID {os.getpid()}")
"""

REAL_RUNS = """
import sys
from pathlib import Path
import torch
import dmlnb.runs
from dmlnb.data import load_dataset
from dmlnb.losses import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.runs import train_or_reload
from dmlnb.training import fit
dmlnb.runs.shards.POLL_SECONDS = 0.1
root, splits = Path(sys.argv[1]), load_dataset("digits")
for seed in (0, 1):
    config, spec = (
        make_config("smoke", {"epochs": 2, "device": "cpu", "seed": seed}),
        {"loss": "triplet"},
    )

    def train(resume):
        model, record = fit(
            config, TripletLoss(margin=0.2), splits=splits, run_dir=root / f"r{seed}",
            resume=resume, progress=False, spec=spec,
        )
        return record, model

    run = train_or_reload(f"r{seed}", root / f"r{seed}", config, spec, train)
    print(f"RESULT r{seed} trained={run.trained}")
"""


def _env(**extra: str) -> dict[str, str]:
    """This environment with the repository and ``tests/`` first on ``PYTHONPATH`` (the
    subprocesses import this checkout's dmlnb, and ``fabricated``), no shard variables, and
    ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLNB_SHARD")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return {**env, SHARD_TIMEOUT_ENV: "120", **extra}


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(text)
    return path


def _results(out: str) -> list[str]:
    return [line[len("RESULT ") :] for line in out.splitlines() if line.startswith("RESULT ")]


def _run_shards(script: Path, folder: Path, n: int, **extra: str) -> list[str]:
    """``script folder`` in ``n`` processes at once, shard ``i`` in process ``i`` (claims in
    ``folder.parent / "claims"``); their outputs."""
    since = repr(time.time())
    claims = str(folder.parent / "claims")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(
                **{SHARD_ENV: f"{i}/{n}", SHARD_CLAIMS_ENV: claims, SHARD_SINCE_ENV: since, **extra}
            ),
        )
        for i in range(n)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for i, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"shard {i}/{n} failed:\n{out}"
    return outs


@pytest.fixture
def shard(monkeypatch, tmp_path):
    """Sets this process's shard (``shard("1/2", timeout=...)``), polling every 10 ms; the abort
    file is ``tmp_path / "abort"``, the claims folder ``tmp_path / "claims"``."""
    monkeypatch.setattr(runs.shards, "POLL_SECONDS", 0.01)

    def set_shard(value: str, timeout: float = 30.0, since: float | None = None) -> Path:
        monkeypatch.setenv(SHARD_ENV, value)
        monkeypatch.setenv(SHARD_CLAIMS_ENV, str(tmp_path / "claims"))
        monkeypatch.setenv(SHARD_TIMEOUT_ENV, str(timeout))
        monkeypatch.setenv(SHARD_ABORT_ENV, str(tmp_path / "abort"))
        monkeypatch.setenv(SHARD_SINCE_ENV, repr(time.time() if since is None else since))
        return tmp_path / "abort"

    return set_shard


def _never(resume):
    raise AssertionError("a run of another shard was trained here")


def _claimed_by_shard_0(tmp_path: Path, *names: str) -> None:
    """Runs ``tmp_path / name`` claimed by shard 0 of 2 (claims in ``tmp_path / "claims"``)."""
    zero = Shard(0, 2, tmp_path / "claims", since=0.0, timeout=1.0, abort=None)
    for name in names:
        assert zero.claim(str((tmp_path / name).resolve())) == 0


# ------------------------------------------------------------------ DMLNB_SHARD
@pytest.mark.parametrize("value", ["1", "a/b", "2/2", "3/2", "-1/2", "0/0", "1/2/3", "1/2x"])
def test_a_bad_shard_is_refused_naming_the_value_and_the_fix(value, monkeypatch, tmp_path):
    monkeypatch.setenv(SHARD_ENV, value)
    with pytest.raises(
        ValueError, match=rf"DMLNB_SHARD='{value}' is not a shard: set it to 'i/n' with 0 <= i < n"
    ):
        current_shard()
    config, spec, train = fake_run_parts(0)
    with pytest.raises(ValueError, match="is not a shard"):  # train_or_reload reads it
        train_or_reload("r0", tmp_path / "r0", config, spec, train)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_bad_timeout_is_refused(value, monkeypatch):
    monkeypatch.setenv(SHARD_ENV, "0/2")
    monkeypatch.setenv(SHARD_CLAIMS_ENV, "/tmp/claims")
    monkeypatch.setenv(SHARD_TIMEOUT_ENV, value)
    with pytest.raises(
        ValueError, match=rf"DMLNB_SHARD_TIMEOUT='{value}' is not a number of seconds > 0"
    ):
        current_shard()


def test_a_shard_is_read_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(SHARD_ENV, raising=False)
    assert current_shard() is None
    monkeypatch.setenv(SHARD_ENV, " 1 / 3 ")
    monkeypatch.setenv(SHARD_CLAIMS_ENV, str(tmp_path / "claims"))
    monkeypatch.setenv(SHARD_ABORT_ENV, str(tmp_path / "abort"))
    monkeypatch.setenv(SHARD_SINCE_ENV, "1700000000.5")
    monkeypatch.delenv(SHARD_TIMEOUT_ENV, raising=False)
    got = current_shard()
    assert (got.index, got.count, got.since, got.abort, str(got)) == (
        1,
        3,
        1700000000.5,
        tmp_path / "abort",
        "1/3",
    )
    assert got.timeout == 6 * 3600 and got.claims == tmp_path / "claims"


def test_a_shard_without_a_claims_folder_is_refused_naming_the_fix(monkeypatch):
    monkeypatch.setenv(SHARD_ENV, "0/2")
    monkeypatch.delenv(SHARD_CLAIMS_ENV, raising=False)
    with pytest.raises(
        ValueError, match=r"DMLNB_SHARD='0/2' but DMLNB_SHARD_CLAIMS is unset: set it to a folder"
    ):
        current_shard()


def test_the_first_shard_to_claim_a_run_owns_it_and_keeps_it(tmp_path):
    shards = [
        Shard(i, 3, tmp_path / "claims", since=0.0, timeout=1.0, abort=None) for i in range(3)
    ]
    assert shards[2].claim("/runs/a") == 2 and shards[0].claim("/runs/b") == 0
    assert [s.claim("/runs/a") for s in shards] == [2, 2, 2] and [
        s.claim("/runs/b") for s in shards
    ] == [0, 0, 0]
    assert sorted(p.name.startswith(".") for p in (tmp_path / "claims").iterdir()) == [
        False,
        False,
    ]  # no temp files


def test_claims_raced_by_many_threads_have_one_owner_each(tmp_path):
    shards = [
        Shard(i, 8, tmp_path / "claims", since=0.0, timeout=1.0, abort=None) for i in range(8)
    ]
    got: dict[int, list[int]] = {}
    barrier = threading.Barrier(8)

    def claim_all(shard: Shard) -> None:
        barrier.wait()
        got[shard.index] = [shard.claim(f"/runs/{k}") for k in range(50)]

    threads = [threading.Thread(target=claim_all, args=(s,)) for s in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    owners = [{got[i][k] for i in range(8)} for k in range(50)]
    assert all(len(o) == 1 for o in owners)  # every shard read the same owner of run k


# ------------------------------------------------------------------ one process, as one shard
def test_a_shard_reloads_a_siblings_finished_run_and_a_run_asked_for_again_keeps_its_shard(
    shard, tmp_path
):
    config, spec, train = fake_run_parts(0)
    train_or_reload("r0", tmp_path / "r0", config, spec, train, say=lambda _: None)
    shard("1/2")
    _claimed_by_shard_0(tmp_path, "r0")
    said: list[str] = []
    for _ in range(2):  # shard 0's both times
        again = train_or_reload("r0", tmp_path / "r0", config, spec, _never, say=said.append)
        assert not again.trained and again.record.config == config
    config1, spec1, train1 = fake_run_parts(1)
    assert train_or_reload("r1", tmp_path / "r1", config1, spec1, train1, say=said.append).trained
    assert said == [
        f"training r1: no record at {tmp_path / 'r1' / 'record.json'}"
    ]  # a finished run: no wait


def test_a_shard_waits_for_a_siblings_run_and_stops_when_the_abort_file_appears(shard, tmp_path):
    abort = shard("1/2")
    _claimed_by_shard_0(tmp_path, "r0")
    threading.Timer(
        0.3, lambda: write_text_atomic(abort, "worker 0 of 2 failed (exit status 1)\n")
    ).start()
    config, spec, _ = fake_run_parts(0)
    said: list[str] = []
    t0 = time.monotonic()
    run = train_or_reload("r0", tmp_path / "r0", config, spec, _never, say=said.append)
    assert (
        not run.trained and said == []
    )  # the call returns at once; the record is waited for on first use
    with pytest.raises(
        ShardError,
        match=r"shard 1/2 stopped waiting for run r0 .*a sibling shard failed "
        r".*worker 0 of 2 failed \(exit status 1\)",
    ):
        run.record.best
    assert time.monotonic() - t0 >= 0.3  # it waited until the file appeared
    assert said == [
        "shard 1/2 waits for run r0 (shard 0/2 trains it): no record at "
        f"{tmp_path / 'r0' / 'record.json'}"
    ]


def test_a_waiting_shard_stops_after_its_timeout(shard, tmp_path):
    shard("1/2", timeout=0.2)
    _claimed_by_shard_0(tmp_path, "r0")
    config, spec, _ = fake_run_parts(0)
    t0 = time.monotonic()
    run = train_or_reload("r0", tmp_path / "r0", config, spec, _never, say=lambda _: None)
    with pytest.raises(
        ShardError,
        match=r"shard 1/2 waited 0.2 s for run r0 .*no record at.*Raise DMLNB_SHARD_TIMEOUT",
    ):
        run.extras["shard"]
    assert 0.2 <= time.monotonic() - t0 < 5


def test_with_retrain_a_shard_waits_for_a_record_written_since_the_launch(shard, tmp_path):
    config, spec, train = fake_run_parts(0)
    train_or_reload(
        "r0", tmp_path / "r0", config, spec, train, say=lambda _: None
    )  # an earlier launch's
    old = json.loads((tmp_path / "r0" / "record.json").read_text())
    shard("1/2", since=time.time() + 0.5)  # the record predates this launch
    _claimed_by_shard_0(tmp_path, "r0")
    retrained = {**old, "extras": {"again": True}}
    threading.Timer(
        0.8, lambda: write_json_atomic(tmp_path / "r0" / "record.json", retrained)
    ).start()
    said: list[str] = []
    run = train_or_reload(
        "r0", tmp_path / "r0", config, spec, _never, retrain=True, say=said.append
    )
    assert run.extras == {"again": True} and not run.trained
    assert "retrain=True and" in said[0] and "was written before this launch" in said[0]
    assert (
        re.fullmatch(r"shard 1/2 waited [0-9.]+ s for run r0 \(shard 0/2 trains it\)", said[1])
        and len(said) == 2
    )


def test_a_shard_trains_its_own_runs_while_a_sibling_trains_its_and_reads_the_siblings_on_first_use(
    shard, tmp_path
):
    # the notebook asks for r0 (shard 0's) then r1 (ours): r1 trains before r0 exists, so the
    # two shards train side by side; reading r0 then waits for shard 0's record
    shard("1/2")
    _claimed_by_shard_0(tmp_path, "r0")
    said: list[str] = []
    config0, spec0, train0 = fake_run_parts(0)
    r0 = train_or_reload("r0", tmp_path / "r0", config0, spec0, _never, say=said.append)
    config1, spec1, train1 = fake_run_parts(1)
    r1 = train_or_reload(
        "r1", tmp_path / "r1", config1, spec1, train1, finish=lambda r, m: {"k": 1}, say=said.append
    )
    assert r1.trained and not (tmp_path / "r0" / "record.json").exists()
    assert said == [f"training r1: no record at {tmp_path / 'r1' / 'record.json'}"]
    made, _ = train0(False)  # what shard 0 writes, a moment later
    made.data["extras"] = {"k": 0}
    threading.Timer(0.3, lambda: made.save(tmp_path / "r0" / "record.json")).start()
    assert (
        dict(r0.extras) == {"k": 0}
        and r0.record.config == config0
        and r0.metrics == made.best["metrics"]
    )
    assert said[1].startswith("shard 1/2 waits for run r0 (shard 0/2 trains it): no record at")
    assert said[2].startswith("shard 1/2 waited ") and len(said) == 3  # said once, on first use


def test_a_stored_measurement_is_reloaded_by_every_shard_without_waiting(shard, tmp_path):
    stored_measurement(
        tmp_path / "m", lambda: pd.DataFrame({"s": [1.0]}), settings={"n": 1}, say=lambda _: None
    )
    for value in ("0/2", "1/2"):
        shard(value, timeout=0.05)  # a wait would time out
        frame = stored_measurement(
            tmp_path / "m", lambda: pd.DataFrame({"s": [2.0]}), settings={"n": 1}
        )
        assert frame["s"].tolist() == [1.0]
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [MEASUREMENT]  # no marker written


# ------------------------------------------------------------------ real processes
def _trainers(outs: list[str], runs: int) -> list[int]:
    """Which shard trained each of ``runs`` runs, from the shards' ``RESULT r<k> trained=<bool>``
    lines; fails unless exactly one shard trained each."""
    trained = [
        [i for i, out in enumerate(outs) if f"RESULT r{k} trained=True" in out] for k in range(runs)
    ]
    assert all(len(t) == 1 for t in trained), outs
    return [t[0] for t in trained]


def test_two_shards_train_every_run_once_and_both_end_with_every_record(tmp_path):
    outs = _run_shards(_script(tmp_path, FOUR_RUNS), tmp_path / "runs", 2)
    by = _trainers(outs, 4)
    for i, out in enumerate(outs):  # each trained the runs it claimed and reloaded the other's
        assert _results(out) == [f"r{k} trained={by[k] == i} by={by[k]}/2" for k in range(4)], out
    for k in range(4):
        record = RunRecord.load(tmp_path / "runs" / f"r{k}" / "record.json")
        assert (
            record.data["extras"] == {"shard": f"{by[k]}/2"} and record.data["status"] == "finished"
        )


def test_a_shard_busy_with_a_long_run_leaves_the_next_runs_to_its_sibling(tmp_path):
    # run 0 takes 3 s, runs 1-4 a moment: the shard that claims run 0 trains only
    # it, the other the rest
    outs = _run_shards(_script(tmp_path, ONE_LONG_RUN), tmp_path / "runs", 2)
    by = _trainers(outs, 5)
    assert by[1:] == [1 - by[0]] * 4, outs


def test_two_shards_analyse_each_run_once_and_read_the_same_analyses(tmp_path):
    # easy positive's figure runs: a shard computes the statistics and figures of the runs it
    # trained and reads those its sibling computed of the others (before, both computed all)
    outs = _run_shards(_script(tmp_path, EP_ANALYSES), tmp_path / "runs", 2)
    runs = 2 * len(ep.FIGURE_METHODS)  # two seeds at smoke
    assert sum(int(re.search(r"^STATISTICS (\d+)$", out, re.M)[1]) for out in outs) == runs, outs
    a, b = ([re.sub(r" trained=\w+", "", line) for line in _results(out)] for out in outs)
    assert a == b and len(a) == runs + len(
        ep.FIGURE_METHODS
    )  # the same records and figures in both
    assert sum(" trained=True" in line for out in outs for line in _results(out)) == runs


def test_shard_0_measures_only_once_the_other_shard_waits_and_the_other_reloads_it(tmp_path):
    script, folder = _script(tmp_path, MEASURE), tmp_path / "m"
    since = repr(time.time())
    env = {SHARD_SINCE_ENV: since, SHARD_CLAIMS_ENV: str(tmp_path / "claims")}
    first = subprocess.Popen(
        [sys.executable, str(script), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(**{SHARD_ENV: "0/2", **env}),
    )
    lines = []
    for line in first.stdout:  # shard 0 says it waits before it measures
        lines.append(line)
        if "waits for the other shards to be idle" in line:
            break
    assert (
        lines
        and "shard 0/2 waits for the other shards to be idle before measurement m" in lines[-1]
    ), "".join(lines)
    assert not (folder / MEASUREMENT).exists()
    second = subprocess.run(
        [sys.executable, str(script), str(folder)],
        capture_output=True,
        text=True,
        env=_env(**{SHARD_ENV: "1/2", **env}),
        timeout=300,
    )
    rest = first.communicate(timeout=300)[0]
    assert first.returncode == 0 and second.returncode == 0, rest + second.stdout + second.stderr
    (made,), (reloaded,) = _results(rest), _results(second.stdout)
    made, reloaded = json.loads(made), json.loads(reloaded)
    assert made["rows"] == [
        {"marker_seen": True, "pid": made["pid"]}
    ]  # measured while shard 1 was idle
    assert reloaded["rows"] == made["rows"]  # shard 1 reloaded shard 0's table
    assert "measuring m: no measurement at" in rest and "measuring" not in second.stdout
    assert sorted(p.name for p in folder.iterdir()) == [MEASUREMENT]  # markers removed


def test_two_shards_make_one_table_each_and_read_the_same_tables(tmp_path):
    # tables that are not timings are handed out like runs: no shard waits for the other to be
    # idle, each makes the table it claimed first and reads the other's
    outs = _run_shards(_script(tmp_path, TABLES), tmp_path / "t", 2)
    (a,), (b,) = (_results(out) for out in outs)
    assert a == b, outs  # the same tables in both processes
    makers = {row["name"]: row["pid"] for rows in json.loads(a).values() for row in rows}
    pids = {int(re.search(r"^PID (\d+)$", out, re.M)[1]) for out in outs}
    assert set(makers.values()) == pids, outs  # one table made by each process
    assert all(out.count("measuring ") == 1 and "idle" not in out for out in outs), outs


def test_stored_tables_are_made_once_then_reloaded_and_remade_on_retrain(tmp_path):
    made = []

    def tables(value):
        return {
            k: Table(
                tmp_path / k, lambda k=k: made.append(k) or pd.DataFrame({"v": [value]}), {"k": k}
            )
            for k in ("a", "b")
        }

    quiet = {"say": lambda _: None}
    first = stored_tables(tables(1.0), **quiet)
    again = stored_tables(tables(2.0), **quiet)
    assert made == ["a", "b"] and all(again[k].equals(first[k]) for k in "ab")  # reloaded, not made
    redone = stored_tables(tables(3.0), retrain=True, **quiet)
    assert made == ["a", "b", "a", "b"] and redone["a"]["v"].tolist() == [3.0]
    assert list(stored_tables({"x": Table(None, lambda: pd.DataFrame({"v": [4.0]}), {})})) == [
        "x"
    ]  # not stored


def test_a_table_with_threads_is_made_with_them_and_remade_when_stored_with_others(tmp_path):
    """``Table.threads``: made with that many torch threads whatever the process has (restored
    after), the count stored; a stored table made with another count is made again, and the
    process's count is kept where ``threads`` is ``None``."""
    seen = []

    def make():
        seen.append(torch.get_num_threads())
        return pd.DataFrame({"v": [1.0]})

    quiet = {"say": lambda _: None}
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        stored_tables(
            {"t": Table(tmp_path / "t", make, {"k": 1})}, **quiet
        )  # the process's 2 threads
        stored_tables(
            {"t": Table(tmp_path / "t", make, {"k": 1}, threads=1)}, **quiet
        )  # stored with 2: made again
        stored_tables(
            {"t": Table(tmp_path / "t", make, {"k": 1}, threads=1)}, **quiet
        )  # stored with 1: reloaded
        stored_tables(
            {"t": Table(None, make, {"k": 1}, threads=1)}, **quiet
        )  # not stored, still one thread
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 1, 1]
    assert json.loads((tmp_path / "t" / "measurement.json").read_text())["threads"] == 1


def _timeless(entry: dict) -> dict:
    """``entry`` without its timings (keys naming seconds), at every depth."""
    return {
        k: _timeless(v) if isinstance(v, dict) else v
        for k, v in entry.items()
        if "seconds" not in k
    }


def test_a_run_trained_by_a_shard_equals_the_run_trained_alone(tmp_path):
    script = _script(tmp_path, REAL_RUNS)
    alone = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "alone")],
        capture_output=True,
        text=True,
        env=_env(OMP_NUM_THREADS="1"),
        timeout=300,
    )
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert _results(alone.stdout) == ["r0 trained=True", "r1 trained=True"]
    outs = _run_shards(script, tmp_path / "shards", 2, OMP_NUM_THREADS="1")
    _trainers(outs, 2)  # each run trained by one shard's process
    for name in ("r0", "r1"):
        a = RunRecord.load(tmp_path / "alone" / name / "record.json")
        b = RunRecord.load(tmp_path / "shards" / name / "record.json")
        assert a.data["environment"]["threads"] == b.data["environment"]["threads"] == 1
        assert a.outcome() == b.outcome()  # configuration, losses and metrics of every epoch
        assert [h["loss"] for h in a.data["history"]] == [h["loss"] for h in b.data["history"]]

        assert _timeless(a.best) == _timeless(b.best) and _timeless(a.best)["metrics"]["R@1"] > 0


# ------------------------------------------------------------------ python -m dmlnb train
def _notebook(path: Path, body: str) -> Path:
    return parameters_notebook(
        path,
        f'profile = "default"\nretrain = False\nroot = {str(path.parent / "runs")!r}',
        "import os\nfrom fabricated import fake_run",
        body,
    )


LAUNCHED = """
import torch
from pathlib import Path
import dmlnb.runs
dmlnb.runs.shards.POLL_SECONDS = 0.05
env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "DMLNB_PROGRESS", "DMLNB_PROFILE")}
for k in range(4):
    fake_run(
        Path(root), k, retrain=retrain,
        extras={"profile": profile, "threads": torch.get_num_threads(), **env},
    )
"""


def test_the_launcher_trains_each_run_in_one_process_and_retrains_on_request(tmp_path, monkeypatch):
    from dmlnb.launch import train_notebook

    for key, value in _env(OMP_NUM_THREADS="2", DMLNB_PROFILE="default").items():
        monkeypatch.setenv(key, value)
    nb = _notebook(tmp_path / "chapter.ipynb", LAUNCHED)
    said: list[str] = []
    trained = train_notebook(nb, 2, "smoke", say=said.append)
    assert sorted(trained[0] + trained[1]) == ["r0", "r1", "r2", "r3"]  # each run by one process
    line = next(x for x in said if x.startswith("trained chapter.ipynb (profile smoke) in "))
    assert re.search(
        rf" s with 2 processes of 1 thread\(s\) each; runs trained: {len(trained[0])} by worker "
        rf"0, {len(trained[1])} by worker 1; waited for siblings: \d+ s by worker 0, \d+ s by "
        r"worker 1$",
        line,
    )
    assert [x.split(":")[0] for x in said[-2:]] == [
        "worker 0's slowest cells",
        "worker 1's slowest cells",
    ]
    assert re.fullmatch(r"worker 0's slowest cells: \d+ \(\d+ s\)(, \d+ \(\d+ s\))*", said[-2]), (
        said[-2]
    )
    first = {k: RunRecord.load(tmp_path / "runs" / f"r{k}" / "record.json") for k in range(4)}
    for k, record in first.items():
        by = next(i for i in (0, 1) if f"r{k}" in trained[i])
        assert record.data["extras"] == {
            "shard": f"{by}/2",
            "profile": "smoke",
            "threads": 1,
            "OMP_NUM_THREADS": "1",
            "DMLNB_PROGRESS": "0",
            "DMLNB_PROFILE": "smoke",
        }
    again_trained = train_notebook(nb, 2, "smoke", retrain=True, say=said.append)
    assert sorted(again_trained[0] + again_trained[1]) == ["r0", "r1", "r2", "r3"]
    for k in range(4):
        again = RunRecord.load(tmp_path / "runs" / f"r{k}" / "record.json")
        assert again.data["started"] >= first[k].data["started"]
        assert {**again.data["extras"], "shard": None} == {**first[k].data["extras"], "shard": None}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_launch_with_retrain_trains_a_run_asked_for_twice_once(tmp_path, monkeypatch, processes):
    from dmlnb.launch import train_notebook

    for key, value in _env(OMP_NUM_THREADS="2").items():
        monkeypatch.setenv(key, value)
    # r1 and r2 asked for again later in the notebook, as a chapter's ablation
    # asks for a table's run
    nb = _notebook(
        tmp_path / "chapter.ipynb",
        LAUNCHED + "for k in (1, 2):\n    fake_run(Path(root), k, retrain=retrain, "
        "extras={'profile': profile, 'threads': torch.get_num_threads(), **env})\n",
    )
    train_notebook(nb, processes, "smoke", say=lambda _: None)
    before = {k: (tmp_path / "runs" / f"r{k}" / "record.json").stat().st_mtime_ns for k in range(4)}
    trained = train_notebook(nb, processes, "smoke", retrain=True, say=lambda _: None)
    assert sorted(sum(trained, [])) == ["r0", "r1", "r2", "r3"]  # each once, none twice
    assert all(
        (tmp_path / "runs" / f"r{k}" / "record.json").stat().st_mtime_ns > before[k]
        for k in range(4)
    )


def test_the_launcher_stops_every_worker_when_one_fails_and_names_it(tmp_path, monkeypatch, capsys):
    from dmlnb.cli import main

    for key, value in _env(OMP_NUM_THREADS="2").items():
        monkeypatch.setenv(key, value)
    nb = _notebook(
        tmp_path / "chapter.ipynb",
        """
import dmlnb.runs
from pathlib import Path
dmlnb.runs.shards.POLL_SECONDS = 0.05
import time
from dmlnb.runs import current_shard
if os.environ["DMLNB_SHARD"] == "1/2":  # claims r1, then fails
    current_shard().claim(str((Path(root) / "r1").resolve()))
    (Path(root) / "r1-claimed").parent.mkdir(parents=True, exist_ok=True)
    (Path(root) / "r1-claimed").touch()
    raise ValueError("boom in the second worker")
while not (Path(root) / "r1-claimed").exists():
    time.sleep(0.05)
for k in range(2):  # shard 0 trains r0, then waits for r1, which shard 1 never makes
    fake_run(Path(root), k).record.best
""",
    )
    t0 = time.monotonic()
    assert main(["train", str(nb), "--processes", "2", "--profile", "smoke"]) == 1
    assert (
        time.monotonic() - t0 < 100
    )  # not the 120 s timeout: the failure stopped the waiting worker
    err = capsys.readouterr().err
    assert "worker 1 of 2 (chapter.ipynb, profile smoke) failed with exit status 1" in err
    assert "ValueError: boom in the second worker" in err
    assert (tmp_path / "runs" / "r0" / "record.json").exists() and not (
        tmp_path / "runs" / "r1"
    ).exists()


def test_the_launcher_refuses_a_missing_notebook_and_no_processes(tmp_path, capsys):
    from dmlnb.cli import main

    assert main(["train", str(tmp_path / "none.ipynb")]) == 2
    assert "no notebook at" in capsys.readouterr().err
    nb = _notebook(tmp_path / "chapter.ipynb", "")
    assert main(["train", str(nb), "--processes", "0"]) == 2
    assert "--processes 0: pass 1 or more" in capsys.readouterr().err


def test_worker_threads_and_environment():
    from dmlnb.launch import worker_env, worker_threads

    assert (
        worker_threads(2, {"OMP_NUM_THREADS": "2"}) == 1
        and worker_threads(3, {"OMP_NUM_THREADS": "2"}) == 1
    )
    assert worker_threads(2, {"OMP_NUM_THREADS": "8"}) == 4 and worker_threads(1, {}) == (
        os.cpu_count() or 1
    )
    env = worker_env(
        1,
        2,
        "smoke",
        Path("/tmp/abort"),
        Path("/tmp/claims"),
        12.5,
        {"OMP_NUM_THREADS": "4", "DMLNB_PROFILE": "default", "X": "y"},
    )
    assert env == {
        "OMP_NUM_THREADS": "2",
        "DMLNB_PROGRESS": "0",
        "DMLNB_PROFILE": "smoke",
        "X": "y",
        SHARD_ENV: "1/2",
        SHARD_ABORT_ENV: "/tmp/abort",
        SHARD_CLAIMS_ENV: "/tmp/claims",
        SHARD_SINCE_ENV: "12.5",
    }
    alone = worker_env(
        0,
        1,
        "smoke",
        Path("/tmp/abort"),
        Path("/tmp/claims"),
        12.5,
        {"OMP_NUM_THREADS": "4", SHARD_ENV: "0/2", SHARD_CLAIMS_ENV: "/x"},
    )
    assert alone == {
        "OMP_NUM_THREADS": "4",
        "DMLNB_PROGRESS": "0",
        "DMLNB_PROFILE": "smoke",
        SHARD_SINCE_ENV: "12.5",
    }  # no shard; the launch's start (retrain: each run once)
