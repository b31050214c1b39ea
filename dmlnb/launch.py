"""Train chapters' runs in several processes: ``python -m dmlnb train NOTEBOOK [NOTEBOOK ...] --processes N``.

Each of ``N`` processes executes the notebooks one after another with papermill, process ``i``
being shard ``i`` of the run layer (:mod:`dmlnb.runs`: ``DMLNB_SHARD=i/N``) in every notebook,
so every run is trained by the process that reaches it first and reloaded by the others, and a
timing study is measured by shard 0 while the others wait. A process done with a notebook goes
on to the next at once: the processes meet only where a notebook reads a sibling's result or
measures a timing, never at the end of a notebook, so the last run of a chapter and the first
of the next train side by side. (Nothing a timing depends on changes: shard 0 measures only once
every other shard waits at the same timing cell, which no shard passes before the table is
stored; and a shard that leaves a notebook has finished every run and table it claimed there,
so a sibling still in that notebook never waits on anything unfinished.) The launcher says, per
notebook, each process's seconds in it, runs and idle seconds, and its slowest cells, then the
launch's total. Each process gets ``max(1, T // N)`` threads (``OMP_NUM_THREADS``; ``T`` is the
current ``OMP_NUM_THREADS``, else the CPU count), no progress bars, and the profile asked for. The
executed notebooks are discarded: what remains is the run records, and the chapters are then
rendered as usual (papermill in place, every run reloaded). What two 1-thread processes step
against one 2-thread run is measured by ``benchmarks/book.py --measure``
(``benchmarks/results/book_cpu.txt``).

When a process fails, the launcher writes the abort file the others watch
(``DMLNB_SHARD_ABORT``: a waiting shard stops), terminates them and names the failed process and
notebook with the end of its log. ``N = 1`` executes each notebook once, without shards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from dmlnb.profiles import PROFILE_ENV
from dmlnb.records import write_text_atomic
from dmlnb.render import existing_notebook, notebook_parameters
from dmlnb.runs import SHARD_ABORT_ENV, SHARD_CLAIMS_ENV, SHARD_ENV, SHARD_SINCE_ENV
from dmlnb.training import PROGRESS_ENV

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "LaunchError", "WorkerFailed", "worker_threads", "worker_env", "trained_runs", "waited_seconds", "slowest_cells",
    "train_notebooks",
]

#: How often the launcher looks at its processes (seconds).
POLL_SECONDS = 0.5

_TRAINING_LINE = re.compile(r"^training (.+?): ", re.MULTILINE)  # said by dmlnb.runs.train_or_reload
_WAITED_LINE = re.compile(r"^shard \d+/\d+ waited ([0-9.]+) s for ", re.MULTILINE)  # said by dmlnb.runs.Shard.wait
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TAIL_LINES = 15


class LaunchError(ValueError):
    """The launch cannot start (a missing notebook, a bad number of processes)."""


class WorkerFailed(RuntimeError):
    """One process of the launch failed; the message names it and ends with its log's last lines."""


def worker_threads(processes: int, environ: Mapping[str, str] = os.environ) -> int:
    """Threads of each of ``processes`` processes: ``max(1, T // processes)``, ``T`` being
    ``OMP_NUM_THREADS`` of ``environ`` when it is a positive integer, else the CPU count."""
    value = environ.get("OMP_NUM_THREADS", "")
    total = int(value) if value.isdigit() and int(value) > 0 else (os.cpu_count() or 1)
    return max(1, total // processes)


def worker_env(index: int, processes: int, profile: str, abort: Path, claims: Path, since: float,
               environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of process ``index`` of ``processes``: ``environ`` with the launch's start
    time (with ``retrain`` a record written since is this launch's: :func:`dmlnb.runs.train_or_reload`
    reloads it), its shard, the abort file and the claims folder the shards share (none of the three
    when ``processes == 1``), its threads
    (:func:`worker_threads`), no progress bars and ``DMLNB_PROFILE=profile`` (a
    ``DMLNB_PROFILE`` left in the shell would otherwise override the notebook's parameter)."""
    env = {k: v for k, v in environ.items() if k not in (SHARD_ENV, SHARD_ABORT_ENV, SHARD_CLAIMS_ENV, SHARD_SINCE_ENV)}
    env.update({"OMP_NUM_THREADS": str(worker_threads(processes, environ)), PROGRESS_ENV: "0",
                PROFILE_ENV: profile, SHARD_SINCE_ENV: repr(since)})
    if processes > 1:
        env.update({SHARD_ENV: f"{index}/{processes}", SHARD_ABORT_ENV: str(abort), SHARD_CLAIMS_ENV: str(claims)})
    return env


def _printed(executed: NotebookNode) -> str:
    """What an executed notebook printed (its stream outputs), in order."""
    return "".join(out.get("text", "") for cell in executed.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream")


def trained_runs(executed: NotebookNode) -> list[str]:
    """The runs an executed notebook (as ``nbformat.read`` returns it) trained: the names in its
    ``training <name>: <reason>`` lines (:func:`dmlnb.runs.train_or_reload`), in order."""
    return _TRAINING_LINE.findall(_printed(executed))


def waited_seconds(executed: NotebookNode) -> float:
    """How long an executed shard sat idle waiting for its siblings: the sum of its ``shard i/n
    waited S s for ...`` lines (:meth:`dmlnb.runs.Shard.wait`)."""
    return sum(float(s) for s in _WAITED_LINE.findall(_printed(executed)))


def slowest_cells(executed: NotebookNode, count: int = 3) -> list[tuple[int, float]]:
    """The ``count`` code cells an executed notebook spent longest in, as ``(cell index,
    seconds)``, longest first (papermill's per-cell ``duration``; cells without one are skipped)."""
    timed = [(i, float(c.metadata.get("papermill", {}).get("duration") or 0.0)) for i, c in enumerate(executed.cells)
             if c.cell_type == "code"]
    return sorted((t for t in timed if t[1] > 0), key=lambda t: -t[1])[:count]


@dataclass
class _Worker:
    """One process's lane: the notebooks it executes in order, the papermill process of the
    current one, and where each one's executed notebook, log and seconds went."""

    index: int
    todo: list[Path]
    folder: Path
    process: subprocess.Popen | None = None
    started: float = 0.0
    done: float | None = None
    outputs: list[Path] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def output(self, k: int) -> Path:
        return self.folder / f"worker-{self.index}-{k}.ipynb"

    def log(self, k: int) -> Path:
        return self.folder / f"worker-{self.index}-{k}.log"

    def tail(self) -> str:
        lines = _ANSI.sub("", self.log(len(self.outputs)).read_text(errors="replace")).rstrip().splitlines()
        return "\n".join(lines[-_TAIL_LINES:])


def _papermill_arguments(notebook: Path, profile: str, retrain: bool, parameters: Sequence[tuple[str, str]],
                         say: Callable[[str], None]) -> list[str]:
    """papermill's ``-p`` arguments for ``notebook``: the profile, ``retrain=True`` when asked and
    the notebook has that parameter, and ``parameters``."""
    arguments = ["-p", "profile", profile]
    if retrain and "retrain" in notebook_parameters(notebook):
        arguments += ["-p", "retrain", "True"]
    elif retrain:
        say(f"{notebook.name} has no `retrain` parameter: its runs are reloaded where their records match")
    for name, value in parameters:
        arguments += ["-p", name, value]
    return arguments


def train_notebooks(
    notebooks: Sequence[str | Path],
    processes: int = 2,
    profile: str = "default",
    *,
    retrain: bool = False,
    parameters: Sequence[tuple[str, str]] = (),
    kernel: str = "python3",
    say: Callable[[str], None] = print,
) -> dict[str, list[list[str]]]:
    """Execute ``notebooks`` in ``processes`` processes, each process the notebooks one after
    another as shard ``i`` of every one (see the module docstring), with the parameters
    ``profile``, ``retrain=True`` when ``retrain`` and a notebook has that parameter, and
    ``parameters`` (name, value as papermill's ``-p`` reads it). Says, per notebook, each
    process's seconds, runs trained and idle seconds, and its slowest cells, then the launch's
    wall time, runs and each process's idle seconds at the end; returns ``{notebook name: the
    runs each process trained in it}``.

    Raises:
        LaunchError: no notebook at one of ``notebooks``, none given, two with one file name, or
            ``processes < 1``.
        WorkerFailed: a process failed (the others were stopped).
    """
    paths = [existing_notebook(nb, LaunchError) for nb in notebooks]
    if not paths:
        raise LaunchError("no notebook given: name one or more, e.g. notebooks/02_facility_location.ipynb")
    if len({p.name for p in paths}) < len(paths):
        raise LaunchError(f"a notebook name appears twice in {[str(p) for p in paths]}: name each notebook once "
                          "(the launch reports by file name)")
    if processes < 1:
        raise LaunchError(f"--processes {processes}: pass 1 or more (1 executes each notebook once, without shards)")
    arguments = {p: _papermill_arguments(p, profile, retrain, parameters, say) for p in paths}
    since = time.time()
    with tempfile.TemporaryDirectory(prefix="dmlnb-train-") as tmp:
        folder = Path(tmp)
        abort = folder / "abort"
        workers = [_Worker(i, list(paths), folder) for i in range(processes)]

        def start(worker: _Worker) -> None:
            notebook, k = worker.todo[0], len(worker.outputs)
            command = [sys.executable, "-m", "papermill", str(notebook), str(worker.output(k)), "-k", kernel,
                       "--cwd", str(notebook.parent), "--no-progress-bar", *arguments[notebook]]
            with open(worker.log(k), "wb") as sink:
                worker.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                                  env=worker_env(worker.index, processes, profile, abort,
                                                                 folder / "claims", since))
            worker.started = time.time()

        try:
            for worker in workers:
                start(worker)
            while any(w.done is None for w in workers):
                time.sleep(POLL_SECONDS)
                for worker in workers:
                    code = None if worker.done is not None or worker.process is None else worker.process.poll()
                    if code is None:
                        continue
                    notebook = worker.todo[0]
                    if code != 0:
                        write_text_atomic(abort, f"worker {worker.index} of {processes} failed (exit status {code})\n")
                        raise WorkerFailed(
                            f"worker {worker.index} of {processes} ({notebook.name}, profile {profile}) failed "
                            f"with exit status {code}; the others were stopped. The end of its log:\n{worker.tail()}"
                        )
                    worker.seconds.append(time.time() - worker.started)
                    worker.outputs.append(worker.output(len(worker.outputs)))
                    worker.todo.pop(0)
                    if worker.todo:
                        start(worker)
                    else:
                        worker.done = time.time()
            end = time.time()
        finally:
            for worker in workers:
                if worker.process is not None and worker.process.poll() is None:
                    worker.process.terminate()
            for worker in workers:
                if worker.process is None:
                    continue
                try:
                    worker.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.process.kill()
                    worker.process.wait()
        import nbformat

        executed = [[nbformat.read(out, as_version=4) for out in w.outputs] for w in workers]
    trained: dict[str, list[list[str]]] = {}
    for k, notebook in enumerate(paths):
        runs = [trained_runs(nbs[k]) for nbs in executed]
        trained[notebook.name] = runs
        lanes = "; ".join(f"worker {w.index} {w.seconds[k]:.0f} s, {len(runs[w.index])} runs, waited "
                          f"{waited_seconds(executed[w.index][k]):.0f} s" for w in workers)
        say(f"trained {notebook.name} (profile {profile}): {lanes}")
        for w in workers:
            say(f"  worker {w.index}'s slowest cells: "
                + ", ".join(f"{c} ({t:.0f} s)" for c, t in slowest_cells(executed[w.index][k])))
    counts = ", ".join(f"{sum(len(r[w.index]) for r in trained.values())} by worker {w.index}" for w in workers)
    idle = ", ".join(f"{end - w.done:.0f} s by worker {w.index}" for w in workers if w.done is not None)
    say(f"trained {len(paths)} notebook(s) (profile {profile}) in {end - since:.0f} s with {processes} processes of "
        f"{worker_threads(processes)} thread(s) each; runs trained: {counts}; idle after its last notebook: {idle}")
    return trained
