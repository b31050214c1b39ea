"""Train a chapter's runs in several processes: ``python -m dmlnb train NOTEBOOK --processes N``.

The notebook is executed ``N`` times at once with papermill, each execution a shard of the run
layer (:mod:`dmlnb.runs`: ``DMLNB_SHARD=i/N``), so every run is trained by the process that
reaches it first and reloaded by the others, and a timing study is measured by shard 0 while the
others wait. The launcher says each process's runs, idle seconds and slowest cells. Each
process gets ``max(1, T // N)`` threads (``OMP_NUM_THREADS``; ``T`` is the current
``OMP_NUM_THREADS``, else the CPU count), no progress bars, and the profile asked for. The
executed notebooks are discarded: what remains is the run records, and the chapter is then
rendered as usual (papermill in place, every run reloaded). What two 1-thread processes step
against one 2-thread run is measured by ``benchmarks/book.py --measure``
(``benchmarks/results/book_cpu.txt``).

When a process fails, the launcher writes the abort file the others watch
(``DMLNB_SHARD_ABORT``: a waiting shard stops), terminates them and names the failed process
with the end of its log. ``N = 1`` executes the notebook once, without shards.

A training pass executes a copy of the notebook without its cells tagged
:data:`SKIPPED_IN_TRAINING` (:func:`training_copy`): cells that only read runs already asked
for, to draw a figure or judge a claim (a t-SNE map, a toy example, the claims table). Their
work would be discarded with the executed notebooks, and the render after the pass executes them
anyway. A tagged cell must not ask for a run, a stored analysis, a stored table or a measurement,
nor define a name an untagged cell reads (``tests/test_training_copy.py`` reads every chapter for
such names, and ``tests/test_notebooks.py`` renders each chapter, with training disabled, from
what its copy made and checks that the render wrote nothing).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from dmlnb.env import PROGRESS_ENV
from dmlnb.profiles import PROFILE_ENV
from dmlnb.records import write_text_atomic
from dmlnb.render import existing_notebook, notebook_parameters
from dmlnb.runs import SHARD_ABORT_ENV, SHARD_CLAIMS_ENV, SHARD_ENV, SHARD_SINCE_ENV

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "LaunchError",
    "WorkerFailed",
    "SKIPPED_IN_TRAINING",
    "training_copy",
    "worker_threads",
    "worker_env",
    "trained_runs",
    "waited_seconds",
    "slowest_cells",
    "train_notebook",
]

#: How often the launcher looks at its processes (seconds).
POLL_SECONDS = 0.5

_TRAINING_LINE = re.compile(
    r"^training (.+?): ", re.MULTILINE
)  # said by dmlnb.runs.train_or_reload
_WAITED_LINE = re.compile(
    r"^shard \d+/\d+ waited ([0-9.]+) s for ", re.MULTILINE
)  # said by dmlnb.runs.Shard.wait
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TAIL_LINES = 15

SKIPPED_IN_TRAINING = "skip-in-training"
"""Tag of a notebook cell that a training pass does not execute (see the module docstring)."""
# a copy's cell metadata: the cell's index in the notebook it was copied from
_SOURCE_CELL = "dmlnb_source_cell"


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


def worker_env(
    index: int,
    processes: int,
    profile: str,
    abort: Path,
    claims: Path,
    since: float,
    environ: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """The environment of process ``index`` of ``processes``: ``environ`` with the launch's start
    time (with ``retrain`` a record written since is this launch's:
    :func:`dmlnb.runs.train_or_reload` reloads it), its shard, the abort file and the claims folder
    the shards share (none of the three when ``processes == 1``), its threads
    (:func:`worker_threads`), no progress bars and ``DMLNB_PROFILE=profile`` (a
    ``DMLNB_PROFILE`` left in the shell would otherwise override the notebook's parameter)."""
    env = {
        k: v
        for k, v in environ.items()
        if k not in (SHARD_ENV, SHARD_ABORT_ENV, SHARD_CLAIMS_ENV, SHARD_SINCE_ENV)
    }
    env.update(
        {
            "OMP_NUM_THREADS": str(worker_threads(processes, environ)),
            PROGRESS_ENV: "0",
            PROFILE_ENV: profile,
            SHARD_SINCE_ENV: repr(since),
        }
    )
    if processes > 1:
        env.update(
            {
                SHARD_ENV: f"{index}/{processes}",
                SHARD_ABORT_ENV: str(abort),
                SHARD_CLAIMS_ENV: str(claims),
            }
        )
    return env


def _printed(executed: NotebookNode) -> str:
    """What an executed notebook printed (its stream outputs), in order."""
    return "".join(
        out.get("text", "")
        for cell in executed.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


def trained_runs(executed: NotebookNode) -> list[str]:
    """The runs an executed notebook (as ``nbformat.read`` returns it) trained: the names in its
    ``training <name>: <reason>`` lines (:func:`dmlnb.runs.train_or_reload`), in order."""
    return _TRAINING_LINE.findall(_printed(executed))


def waited_seconds(executed: NotebookNode) -> float:
    """How long an executed shard sat idle waiting for its siblings: the sum of its ``shard i/n
    waited S s for ...`` lines (:meth:`dmlnb.runs.Shard.wait`)."""
    return sum(float(s) for s in _WAITED_LINE.findall(_printed(executed)))


def training_copy(notebook: Path, folder: Path) -> Path:
    """Write ``notebook`` without its cells tagged :data:`SKIPPED_IN_TRAINING` to
    ``folder/<name>`` (``folder`` is made if missing); each kept cell records its index in
    ``notebook``, which :func:`slowest_cells` reports (papermill's injected parameters cell,
    new in the executed copy, keeps its index there: no cell before it is ever tagged). Returns
    the copy's path."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    kept = []
    for i, cell in enumerate(nb.cells):
        if SKIPPED_IN_TRAINING in cell.metadata.get("tags", []):
            continue
        cell.metadata[_SOURCE_CELL] = i
        kept.append(cell)
    nb.cells = kept
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / notebook.name
    nbformat.write(nb, copy)
    return copy


def slowest_cells(executed: NotebookNode, count: int = 3) -> list[tuple[int, float]]:
    """The ``count`` code cells an executed notebook spent longest in, as ``(cell index,
    seconds)``, longest first (papermill's per-cell ``duration``; cells without one are skipped).
    A cell of a :func:`training_copy` is named by its index in the notebook it was copied from."""
    timed = [
        (
            int(c.metadata.get(_SOURCE_CELL, i)),
            float(c.metadata.get("papermill", {}).get("duration") or 0.0),
        )
        for i, c in enumerate(executed.cells)
        if c.cell_type == "code"
    ]
    return sorted((t for t in timed if t[1] > 0), key=lambda t: -t[1])[:count]


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen
    output: Path
    log: Path

    def tail(self) -> str:
        lines = _ANSI.sub("", self.log.read_text(errors="replace")).rstrip().splitlines()
        return "\n".join(lines[-_TAIL_LINES:])


def _wait(workers: list[_Worker], abort: Path, what: str) -> None:
    """Wait for every worker; when one fails, write ``abort`` (the others stop at their next
    run) and raise :class:`WorkerFailed` with the end of its log."""
    running, total = list(workers), len(workers)
    while running:
        time.sleep(POLL_SECONDS)
        for worker in list(running):
            code = worker.process.poll()
            if code is None:
                continue
            running.remove(worker)
            if code != 0:
                write_text_atomic(
                    abort, f"worker {worker.index} of {total} failed (exit status {code})\n"
                )
                raise WorkerFailed(
                    f"worker {worker.index} of {total} ({what}) failed with exit status "
                    f"{code}; the others were stopped. The end of its log:\n{worker.tail()}"
                )


def _stop(workers: list[_Worker]) -> None:
    """Terminate the workers still running (killed after 30 s) and reap them all."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.terminate()
    for worker in workers:
        try:
            worker.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()


def _start(index: int, arguments: list[str], folder: Path, env: Mapping[str, str]) -> _Worker:
    """Worker ``index``: ``papermill`` on ``arguments`` (the notebook first), its executed
    notebook and its log in ``folder``, with the environment ``env``."""
    output, log = folder / f"worker-{index}.ipynb", folder / f"worker-{index}.log"
    notebook, *rest = arguments
    command = [sys.executable, "-m", "papermill", notebook, str(output), "--no-progress-bar", *rest]
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    return _Worker(index, process, output, log)


def train_notebook(
    notebook: str | Path,
    processes: int = 2,
    profile: str = "default",
    *,
    retrain: bool = False,
    parameters: Sequence[tuple[str, str]] = (),
    kernel: str = "python3",
    say: Callable[[str], None] = print,
) -> list[list[str]]:
    """Execute ``notebook`` (its :func:`training_copy`) in ``processes`` processes at once, shard
    ``i`` in process ``i`` (see the module docstring), with the parameters ``profile``,
    ``retrain=True`` when ``retrain`` and the notebook has that parameter, and ``parameters``
    (name, value as papermill's ``-p`` reads it). Says the wall time and the runs each process
    trained; returns those runs.

    Raises:
        LaunchError: no notebook at ``notebook``, or ``processes < 1``.
        WorkerFailed: a process failed (the others were stopped).
    """
    notebook = existing_notebook(notebook, LaunchError)
    if processes < 1:
        raise LaunchError(
            f"--processes {processes}: pass 1 or more (1 executes the notebook once, without "
            "shards)"
        )
    arguments = ["-p", "profile", profile]
    if retrain and "retrain" in notebook_parameters(notebook):
        arguments += ["-p", "retrain", "True"]
    elif retrain:
        say(
            f"{notebook.name} has no `retrain` parameter: its runs are reloaded where their "
            "records match"
        )
    for name, value in parameters:
        arguments += ["-p", name, value]
    since = time.time()
    with tempfile.TemporaryDirectory(prefix="dmlnb-train-") as tmp:
        folder = Path(tmp)
        abort = folder / "abort"
        copy = training_copy(
            notebook, folder / "copy"
        )  # beside the workers' outputs, whatever its name
        workers = []
        try:
            for i in range(processes):
                command = [str(copy), "-k", kernel, "--cwd", str(notebook.parent), *arguments]
                env = worker_env(i, processes, profile, abort, folder / "claims", since)
                workers.append(_start(i, command, folder, env))
            _wait(workers, abort, f"{notebook.name}, profile {profile}")
        finally:
            _stop(workers)
        import nbformat

        executed = [nbformat.read(w.output, as_version=4) for w in workers]
        trained = [trained_runs(nb) for nb in executed]
        waited = [waited_seconds(nb) for nb in executed]
        slowest = [slowest_cells(nb) for nb in executed]
    wall = time.time() - since
    counts = ", ".join(f"{len(names)} by worker {i}" for i, names in enumerate(trained))
    idle = ", ".join(f"{s:.0f} s by worker {i}" for i, s in enumerate(waited))
    say(
        f"trained {notebook.name} (profile {profile}) in {wall:.0f} s with {processes} processes "
        f"of {worker_threads(processes)} thread(s) each; runs trained: {counts}; waited for "
        f"siblings: {idle}"
    )
    for i, cells in enumerate(slowest):
        say(f"worker {i}'s slowest cells: " + ", ".join(f"{k} ({t:.0f} s)" for k, t in cells))
    return trained
