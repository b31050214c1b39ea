"""The launcher's worker handling (:mod:`dmlnb.launch`): a failed worker stops the launch with
the end of its log and an abort file for the others, and the others are stopped and reaped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dmlnb import launch


def _worker(index: int, code: str, tmp_path: Path) -> launch._Worker:
    log = tmp_path / f"worker-{index}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=sink, stderr=subprocess.STDOUT
        )
    return launch._Worker(index, process, tmp_path / f"worker-{index}.ipynb", log)


def test_a_failed_worker_stops_the_launch_and_the_others(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(launch, "POLL_SECONDS", 0.05)
    failing = _worker(0, "print('cell 3 failed'); raise SystemExit(3)", tmp_path)
    sleeping = _worker(1, "import time; time.sleep(60)", tmp_path)
    abort = tmp_path / "abort"
    with pytest.raises(launch.WorkerFailed, match=r"worker 0 of 2 \(ch, profile smoke\).*status 3"):
        try:
            launch._wait([failing, sleeping], abort, "ch, profile smoke")
        finally:
            launch._stop([failing, sleeping])
    assert "exit status 3" in abort.read_text()
    assert sleeping.process.returncode is not None  # terminated and reaped
    assert "cell 3 failed" in failing.tail()


def test_workers_that_succeed_are_waited_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(launch, "POLL_SECONDS", 0.05)
    workers = [_worker(i, "pass", tmp_path) for i in range(2)]
    launch._wait(workers, tmp_path / "abort", "ch")
    assert all(w.process.returncode == 0 for w in workers)
    assert not (tmp_path / "abort").exists()
