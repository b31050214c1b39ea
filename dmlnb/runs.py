"""The run layer: every chapter trains, resumes or reloads its runs through :func:`train_or_reload`.

A run is identified by its *fingerprint* (:func:`dmlnb.records.run_fingerprint`): a hash of its
resolved configuration and its method specification ``spec`` (what the configuration does not
say: the loss and its settings, the sampler, the hooks, what the chapter stores after training).
Both, and the fingerprint, are stored in the run's ``record.json``. Then :func:`train_or_reload`

* **reloads** a finished record whose fingerprint equals the one asked for (nothing is trained
  and no weights are read: the record holds everything the chapter's tables, figures and claims
  use, in ``extras``);
* **resumes** an interrupted run of the same fingerprint from its checkpoint (a run whose record
  is finished but whose ``extras`` were never written resumes at its last epoch, which trains
  nothing, and only computes them);
* **trains** from scratch otherwise, and says why (``say``): no record, a changed fingerprint
  (naming the configuration keys and specification entries that differ), a record written
  before the run layer, or ``retrain=True``. A launch (:mod:`dmlnb.launch`) retrains each run
  once: with ``retrain=True`` a record written since the launch started (``DMLNB_SHARD_SINCE``)
  is this launch's and is reloaded, so a run that several sections of a chapter ask for (one
  table's run that is also a step of an ablation) trains once; the same holds for stored
  measurements and tables. With training disabled
  (``DMLNB_NO_TRAINING=1``) that raises :class:`~dmlnb.env.TrainingDisabledError` with the
  same reason.

Measurements that are not training runs (timing studies) are stored the same way:
:func:`stored_measurement` keeps a table with the settings it was measured under and reloads it
while they match, so a re-rendered chapter quotes the stored numbers and its verdicts do not
move with the machine's load. A timing is measured with :data:`TIMING_THREADS` torch threads
whatever the process has (the thread count of the book's runs), so it does not depend on who
made it: a render with two threads and a training process with one measure the same thing, and
a table stored with another thread count is measured again. A render (``DMLNB_NO_TRAINING=1``)
measures a missing or stale table like any process, the few unstored training steps a timing
study times included (:func:`dmlnb.training.measuring`); a run with a folder still never trains
there.

The chapter supplies two functions: ``train(resume) -> (record, model)`` builds the model, loss,
sampler and hooks and calls :func:`dmlnb.training.train` (with ``spec=``), and
``finish(record, model) -> extras`` computes what is stored after training (usually from the
best-epoch weights, which exist at that moment).

**Shards.** Independent runs can train in several processes that execute the same notebook
(``python -m dmlnb train NOTEBOOK --processes N``, :mod:`dmlnb.launch`). Each process is told
its shard by the environment, ``DMLNB_SHARD="i/n"`` (:func:`current_shard`), and the folder the
shards of one launch share, ``DMLNB_SHARD_CLAIMS``. Every call of :func:`train_or_reload` with a
run folder *claims* that folder (:meth:`Shard.claim`): the first shard to ask for a run owns it,
and a run asked for again keeps its owner. So the runs are dealt out as the shards reach them,
not by a fixed rule: a shard that is done with a long run takes the next unclaimed one, and no
shard idles while runs are left that nobody has started. A run this shard owns is reloaded,
resumed or trained as above; a run another shard owns is never trained here: the call returns
at once, and the run's record is waited for on its first use (reading anything of it says so
once, then polls every :data:`POLL_SECONDS`) until it is finished with the fingerprint asked for
and holds its extras (with ``retrain=True``: written since the launch started,
``DMLNB_SHARD_SINCE``), and reloaded. So a shard trains its own runs while its siblings train
theirs, and blocks only where the notebook reads a sibling's result (a chapter that reads a
sibling run's weights reads its record first: the weights are final once the record is). No two
shards wait for each other: a shard trains a run as soon as it claims it, and the notebook reads
a run only after asking for it, so a run read at some point was claimed before that point by a
shard that trains it at once, and that training reads only runs asked for before it. A timing
study must not be measured while another process trains, so under shards
:func:`stored_measurement` measures in shard 0 alone: every other shard leaves a marker
``.waiting-<i>`` in the measurement's folder and waits for the stored table; shard 0 waits for
every marker, measures, stores the table and removes the markers
(a stored table that matches is reloaded by every shard without waiting). Tables that are not
timings (their values do not depend on the machine's load) need no idle machine:
:func:`stored_tables` hands each of a group out like a run, to the shard that claims it first,
and a shard makes the tables it claimed before it waits for those its siblings make. A waiting
shard stops with :class:`ShardError` when a sibling failed (the launcher then writes the file
named by ``DMLNB_SHARD_ABORT``) or after ``DMLNB_SHARD_TIMEOUT`` seconds (default 6 hours). Sharding
changes where a run trains, never what it computes: a run trained by a shard with one thread
equals, bit for bit on the CPU, the run trained alone with one thread.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd
import torch
from torch import nn

from dmlnb.env import TrainingDisabledError
from dmlnb.records import (
    RunRecord,
    as_json,
    read_json,
    run_fingerprint,
    with_added_config_keys,
    write_json_atomic,
)

__all__ = [
    "Run",
    "train_or_reload",
    "reuse_reason",
    "stored_measurement",
    "TIMING_THREADS",
    "EVALUATION_THREADS",
    "Table",
    "stored_tables",
    "MEASUREMENT",
    "Shard",
    "ShardError",
    "current_shard",
    "made_by_sibling",
    "SHARD_ENV",
    "SHARD_CLAIMS_ENV",
    "SHARD_ABORT_ENV",
    "SHARD_SINCE_ENV",
    "SHARD_TIMEOUT_ENV",
    "POLL_SECONDS",
]

MEASUREMENT = "measurement.json"

RECORD = "record.json"

SHARD_ENV = "DMLNB_SHARD"
"""Environment variable ``"i/n"``: this process is shard ``i`` of ``n`` (see the
module docstring)."""
SHARD_CLAIMS_ENV = "DMLNB_SHARD_CLAIMS"
"""Environment variable: the folder the shards of one launch share; a claim (:meth:`Shard.claim`)
is a file there naming the shard that owns a run."""
SHARD_ABORT_ENV = "DMLNB_SHARD_ABORT"
"""Environment variable: a file whose appearance means a sibling shard failed (waiting stops)."""
SHARD_SINCE_ENV = "DMLNB_SHARD_SINCE"
"""Environment variable: when the launch started (Unix seconds; :mod:`dmlnb.launch` sets it in
every process it starts); with ``retrain=True`` a record written since is this launch's, reloaded
rather than trained again, and a waiting shard takes only files written since (default without
it: when this process imported :mod:`dmlnb.runs`)."""
SHARD_TIMEOUT_ENV = "DMLNB_SHARD_TIMEOUT"
"""Environment variable: how many seconds a shard waits for a sibling at most (default 6 hours)."""
POLL_SECONDS = 2.0
"""How often a waiting shard looks at the files it waits for."""

_DEFAULT_TIMEOUT = 6 * 3600.0
_PROCESS_START = time.time()
# A file's time comes from the kernel's coarse clock, up to one tick (<= 10 ms) behind time.time().
_CLOCK_SLACK = 0.1


class ShardError(RuntimeError):
    """A shard stopped waiting for a sibling: the sibling failed, or the wait timed out."""


@dataclass(frozen=True)
class Shard:
    """This process's shard: ``index`` of ``count``; ``claims`` the folder the launch's shards
    share; files written before ``since`` (Unix seconds) are not this launch's; a wait stops after
    ``timeout`` seconds or when ``abort`` exists."""

    index: int
    count: int
    claims: Path
    since: float
    timeout: float
    abort: Path | None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def claim(self, key: str) -> int:
        """The shard that owns ``key`` (a run folder): this one when no shard claimed it before,
        else the one that did. The claim is a file in :attr:`claims` holding the owner's index,
        made whole before it appears (written aside, then hard-linked into place, which fails when
        a sibling's is there), so no shard reads a half-written claim and two cannot both win."""
        self.claims.mkdir(parents=True, exist_ok=True)
        path = self.claims / hashlib.sha1(key.encode()).hexdigest()
        mine = self.claims / f".{path.name}.{self.index}.{os.getpid()}"
        mine.write_text(str(self.index))
        try:
            os.link(mine, path)
        except FileExistsError:
            pass
        finally:
            mine.unlink()
        return int(path.read_text())

    def is_fresh(self, path: Path) -> bool:
        """Whether ``path`` was written since the launch started."""
        return _written_since(path, self.since)

    def wait(self, what: str, pending: Callable[[], str], say: Callable[[str], None]) -> None:
        """Return once ``pending()`` says ``""`` (else why ``what`` is not ready); said once,
        then polled every :data:`POLL_SECONDS`, and how long it waited said at the end (the
        launcher sums it per process).

        Raises:
            ShardError: the abort file appeared (a sibling failed) or ``timeout`` passed.
        """
        reason = pending()
        if reason == "":
            return
        say(f"shard {self} waits for {what}: {reason}")
        start = time.monotonic()
        deadline = start + self.timeout
        while reason != "":
            if self.abort is not None and self.abort.exists():
                raise ShardError(
                    f"shard {self} stopped waiting for {what}: a sibling shard failed "
                    f"({self.abort}: {self.abort.read_text().strip()})"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise ShardError(
                    f"shard {self} waited {self.timeout:g} s for {what} ({reason}); is its shard "
                    f"still running? Raise {SHARD_TIMEOUT_ENV} (seconds) for longer runs, or "
                    f"unset {SHARD_ENV} to run everything in this process"
                )
            time.sleep(min(POLL_SECONDS, left))
            reason = pending()
        say(f"shard {self} waited {time.monotonic() - start:.1f} s for {what}")


def _launch_start() -> float | None:
    """When the launch this process belongs to started (:data:`SHARD_SINCE_ENV`, Unix seconds),
    else ``None`` (a notebook executed outside ``python -m dmlnb train``)."""
    since = os.environ.get(SHARD_SINCE_ENV, "")
    return _positive_seconds(SHARD_SINCE_ENV, since) if since else None


def _written_since(path: Path, since: float) -> bool:
    """Whether the file ``path`` was last written at or after ``since`` (Unix seconds)."""
    return path.stat().st_mtime >= since - _CLOCK_SLACK


def _positive_seconds(name: str, value: str) -> float:
    """The environment variable ``name``'s ``value`` as seconds > 0, or an error naming it."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(
            f"{name}={value!r} is not a number of seconds > 0; set one (e.g. 3600) or unset it"
        )
    return seconds


def current_shard() -> Shard | None:
    """This process's shard, from ``DMLNB_SHARD="i/n"`` (``0 <= i < n``) and the other
    ``DMLNB_SHARD_*`` variables; ``None`` when ``DMLNB_SHARD`` is unset or empty.

    Raises:
        ValueError: a malformed value (the message names it and the fix).
    """
    value = os.environ.get(SHARD_ENV, "")
    if value == "":
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value)
    if match is None or not int(match[1]) < int(match[2]):
        raise ValueError(
            f"{SHARD_ENV}={value!r} is not a shard: set it to 'i/n' with 0 <= i < n (e.g. '0/2' "
            "and '1/2' for two processes), or unset it to train every run in this process"
        )
    claims = os.environ.get(SHARD_CLAIMS_ENV, "")
    if claims == "":
        raise ValueError(
            f"{SHARD_ENV}={value!r} but {SHARD_CLAIMS_ENV} is unset: set it to a folder every "
            "shard of the launch shares (python -m dmlnb train does), where the shards claim the "
            "runs they train"
        )
    since = _launch_start()
    timeout = os.environ.get(SHARD_TIMEOUT_ENV, "")
    abort = os.environ.get(SHARD_ABORT_ENV, "")
    return Shard(
        index=int(match[1]),
        count=int(match[2]),
        claims=Path(claims),
        since=since if since is not None else _PROCESS_START,
        timeout=_positive_seconds(SHARD_TIMEOUT_ENV, timeout) if timeout else _DEFAULT_TIMEOUT,
        abort=Path(abort) if abort else None,
    )


@dataclass
class Run:
    """One run: its name, its record, the model when trained in this session (``None`` when
    reloaded), and whether it was trained now."""

    name: str
    record: RunRecord
    model: nn.Module | None = None
    trained: bool = False

    @property
    def sibling(self) -> bool:
        """Whether another shard trains this run (its record is waited for on first use)."""
        return isinstance(self.record, _SiblingRecord)

    @property
    def extras(self) -> Mapping[str, Any]:
        """What the chapter stored after training (``finish``); for a run another shard trains, a
        read-only view that waits for its record on first use."""
        if isinstance(self.record, _SiblingRecord):
            return _SiblingExtras(self.record)
        return self.record.data.get("extras", {})

    @property
    def metrics(self) -> dict[str, float]:
        """Test metrics of the best epoch."""
        return self.record.best["metrics"]  # type: ignore[index]


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(
        k for k in set(old) | set(new) if old.get(k, "<absent>") != new.get(k, "<absent>")
    )


def reuse_reason(
    run_dir: Path, config: Any, spec: Mapping[str, Any]
) -> tuple[str, RunRecord | None]:
    """Why the run in ``run_dir`` cannot be reloaded as it is (``""`` when it can), and its
    record when one exists under the same fingerprint (finished or not: it may be resumed)."""
    path = run_dir / RECORD
    if not path.exists():
        return f"no record at {path}", None
    record = RunRecord.load(path)
    config = config.to_dict() if hasattr(config, "to_dict") else config
    if "spec" not in record.data:
        return f"{path} was written before the run layer (it stores no method specification)", None
    wanted = run_fingerprint(config, spec)
    if run_fingerprint(record.config, record.data["spec"]) != wanted:
        changed = _differences(record.config, as_json(config))
        changed_spec = _differences(record.data["spec"], as_json(spec))
        return (
            f"its fingerprint changed (configuration keys {changed}, specification entries "
            f"{changed_spec} differ from {path})"
        ), None
    if record.data["status"] != "finished":
        last = record.data["history"][-1]["epoch"] if record.data["history"] else 0
        return f"it was interrupted after epoch {last}: resuming", record
    if "extras" not in record.data:
        return (
            "its record is finished but holds no extras: computing them from its checkpoint",
            record,
        )
    return "", record


def train_or_reload(
    name: str,
    run_dir: str | Path | None,
    config: Any,
    spec: Mapping[str, Any],
    train: Callable[[bool], tuple[RunRecord, nn.Module | None]],
    *,
    finish: Callable[[RunRecord, nn.Module | None], Mapping[str, Any]] | None = None,
    retrain: bool = False,
    say: Callable[[str], None] = print,
) -> Run:
    """Reload, resume or train one run (see the module docstring).

    Args:
        name: the run's name (messages, the record).
        run_dir: its folder (``None``: train in memory, nothing written or reloaded).
        config: its resolved :class:`~dmlnb.profiles.TrainConfig`.
        spec: its method specification (JSON-able; part of the fingerprint).
        train: ``train(resume) -> (record, model)``; must pass ``spec`` to
            :func:`dmlnb.training.train` so the record carries it.
        finish: ``finish(record, model) -> extras`` stored in the record after training.
        retrain: train from scratch even when a finished record matches, unless the record
            was written since the launch this process belongs to started (``DMLNB_SHARD_SINCE``).
        say: where the reason for training goes (the notebook's output by default).

    Under shards (``DMLNB_SHARD``, see the module docstring) a run whose folder another shard
    claimed first is not trained: the call returns at once with a record that is waited for and
    reloaded on first use.

    Raises:
        ShardError: waiting for another shard's run stopped (that shard failed, or the timeout).
    """
    spec = as_json(dict(spec))
    folder = Path(run_dir) if run_dir is not None else None
    shard = current_shard() if folder is not None else None
    if shard is not None and folder is not None:
        owner = shard.claim(str(folder.resolve()))
        if owner != shard.index:
            return Run(
                name,
                _SiblingRecord(
                    lambda: made_by_sibling(
                        shard,
                        f"run {name} (shard {owner}/{shard.count} trains it)",
                        folder / RECORD,
                        lambda: reuse_reason(folder, config, spec),
                        retrain,
                        say,
                    ),
                    folder / RECORD,
                ),
            )
    if folder is None:
        reason, known = "no run folder", None
    elif _retrains(retrain, folder / RECORD):
        reason, known = "retrain=True", None
    else:
        reason, known = reuse_reason(folder, config, spec)
        if reason == "":
            return Run(name, known)  # type: ignore[arg-type]
    if folder is not None:
        say(f"training {name}: {reason}")
    try:
        record, model = train(known is not None)
    except TrainingDisabledError as err:
        raise TrainingDisabledError(f"{err} [{name}: {reason}]") from None
    if record.data.get("fingerprint") != run_fingerprint(record.config, spec):
        raise ValueError(
            f"the train function of {name!r} did not pass spec= to dmlnb.training.train"
        )
    record.data["extras"] = as_json(dict(finish(record, model))) if finish is not None else {}
    if folder is not None:
        record.save(folder / RECORD)
    return Run(name, record, model, trained=True)


def _retrains(retrain: bool, path: Path) -> bool:
    """Whether ``retrain`` makes the record or table at ``path`` again: not when this process's
    launch wrote it already (since it started), so a launch makes each of them once."""
    since = _launch_start()
    return retrain and not (since is not None and path.exists() and _written_since(path, since))


class _SiblingRecord(RunRecord):
    """The record of a run another shard trains, waited for and loaded on its first use (any
    read of :attr:`data`, e.g. ``best`` or ``config``), so that this shard goes on to train its
    own runs meanwhile instead of idling in step with its sibling."""

    def __init__(self, resolve: Callable[[], RunRecord], path: Path) -> None:
        self._resolve: Callable[[], RunRecord] | None = resolve
        self._data: dict[str, Any] | None = None
        self.path = path

    @property  # type: ignore[override]
    def data(self) -> dict[str, Any]:
        if self._resolve is not None:
            self._data, self._resolve = self._resolve().data, None
        return self._data  # type: ignore[return-value]

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data, self._resolve = value, None


class _SiblingExtras(Mapping):
    """The ``extras`` of a :class:`_SiblingRecord`, read (and so waited for) on first use."""

    def __init__(self, record: _SiblingRecord) -> None:
        self._record = record

    def _extras(self) -> dict[str, Any]:
        return self._record.data.get("extras", {})

    def __getitem__(self, key: str) -> Any:
        return self._extras()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._extras())

    def __len__(self) -> int:
        return len(self._extras())


def made_by_sibling(
    shard: Shard,
    what: str,
    path: Path,
    check: Callable[[], tuple[str, Any]],
    retrain: bool,
    say: Callable[[str], None],
) -> Any:
    """What another shard makes at ``path`` (a run's record, a stored table, what a chapter
    stores of a sibling's run): waits (:meth:`Shard.wait`, said as ``what``) until ``check()``
    gives ``("", value)`` (else the reason it is not ready) and, with ``retrain``, ``path`` was
    written since the launch started; returns ``value``.

    Raises:
        ShardError: a sibling failed, or the wait timed out.
    """
    found: list[Any] = []

    def pending() -> str:
        reason, value = check()
        if reason == "" and retrain and not shard.is_fresh(path):
            reason = f"retrain=True and {path} was written before this launch"
        if reason == "":
            found.append(value)
        return reason

    shard.wait(what, pending, say)
    return found[-1]


def _today_keys(settings: Any) -> Any:
    """Stored measurement ``settings`` with each TrainConfig dict among its top-level values
    given the configuration keys added since (:func:`~dmlnb.records.with_added_config_keys`), in
    the form JSON reads back (an added key's tuple value, e.g. ``betas``, as a list)."""
    if not isinstance(settings, dict):
        return settings
    return {k: as_json(with_added_config_keys(v)) for k, v in settings.items()}


def _stored_table(
    file: Path, wanted: Any, threads: int | None = None
) -> tuple[str, dict[str, Any] | None]:
    """``("", stored)`` when ``file`` holds a measurement made with the settings ``wanted`` (and,
    unless ``threads`` is ``None``, with ``threads`` torch threads), else ``(why not, None)``."""
    if not file.exists():
        return f"no measurement at {file}", None
    stored = read_json(file)
    had = _today_keys(stored.get("settings"))
    if had != wanted:
        return (
            f"{file} was measured with other settings ({_differences(had or {}, wanted)} differ)",
            None,
        )
    if threads is not None and stored.get("threads") != threads:
        return f"{file} was measured with {stored.get('threads')} threads, not {threads}", None
    return "", stored


#: Torch intra-op threads a timing study is measured with (:func:`stored_measurement`), whatever
#: the process's own setting: one, as each of the book's training processes has.
TIMING_THREADS = 1

#: Torch intra-op threads (and so faiss's k-means threads) of an evaluation stored as a
#: :class:`Table` that needs no training (a chapter's floors, networks at initialisation): one, as
#: each of the book's training processes evaluates its runs with, whatever the process has.
EVALUATION_THREADS = 1


def stored_measurement(
    folder: str | Path | None,
    make: Callable[[], pd.DataFrame],
    *,
    settings: Mapping[str, Any],
    retrain: bool = False,
    say: Callable[[str], None] = print,
) -> pd.DataFrame:
    """A measured table (a timing study), stored as ``folder/measurement.json`` (``name``,
    ``settings``, when it was ``made``, ``threads``, ``rows``) and reloaded while it was made
    with the same ``settings`` and :data:`TIMING_THREADS` threads (unless ``retrain``, which a
    launch applies once: see the module docstring); otherwise ``make()`` measures it now with
    :data:`TIMING_THREADS` torch threads (restored after; the reason is said) and it is written
    atomically. ``folder=None`` measures the same way without storing.

    A training configuration among the stored settings' values is compared as a record's is:
    the :class:`~dmlnb.profiles.TrainConfig` keys added after it was stored count at the value
    runs made before had (:func:`~dmlnb.records.with_added_config_keys`), so adding a key does
    not make every stored measurement stale.

    Under shards (``DMLNB_SHARD``) a table that is not reloaded is measured by shard 0 alone,
    while the others wait idle (see the module docstring).

    Raises:
        ShardError: waiting for the other shards, or for shard 0's table, stopped.
    """
    file = Path(folder) / MEASUREMENT if folder is not None else None
    wanted = as_json(dict(settings))
    if file is None:
        return _with_threads(TIMING_THREADS, make)[0]
    reason, stored = (
        ("retrain=True", None)
        if _retrains(retrain, file)
        else _stored_table(file, wanted, TIMING_THREADS)
    )
    if stored is not None:
        return pd.DataFrame(stored["rows"])
    shard = current_shard()
    what = f"measurement {file.parent.name}"
    markers = (
        [file.parent / f".waiting-{i}" for i in range(1, shard.count)] if shard is not None else []
    )
    if shard is not None and shard.index != 0:
        write_json_atomic(markers[shard.index - 1], {"shard": str(shard), "waits for": what})
        stored = made_by_sibling(
            shard,
            f"{what} (shard 0/{shard.count} measures it alone)",
            file,
            lambda: _stored_table(file, wanted, TIMING_THREADS),
            retrain,
            say,
        )
        return pd.DataFrame(stored["rows"])
    if shard is not None:

        def others_idle() -> str:
            waiting = [m for m in markers if m.exists() and shard.is_fresh(m)]
            return (
                ""
                if len(waiting) == len(markers)
                else f"{len(waiting)} of the {len(markers)} other shards are idle"
            )

        shard.wait(f"the other shards to be idle before {what}", others_idle, say)
    frame = _measure(file, wanted, make, reason, say, threads=TIMING_THREADS)
    for marker in markers:
        marker.unlink(missing_ok=True)
    return frame


def _with_threads(
    threads: int | None, make: Callable[[], pd.DataFrame]
) -> tuple[pd.DataFrame, int]:
    """``(make(), the threads it ran with)``, run with ``threads`` torch intra-op threads and the
    process's setting restored after (``None``: the process's own), inside
    :func:`dmlnb.training.measuring`: the unstored runs a measured table times train under
    ``DMLNB_NO_TRAINING=1`` too (a render measures a missing or stale table)."""
    from dmlnb.training import measuring

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with measuring():
            return make(), torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def _measure(
    file: Path,
    wanted: Any,
    make: Callable[[], pd.DataFrame],
    reason: str,
    say: Callable[[str], None],
    threads: int | None = None,
) -> pd.DataFrame:
    """``make()`` (with ``threads`` torch threads, restored after; ``None``: the process's),
    said with ``reason`` and written atomically to ``file`` with the settings ``wanted`` and the
    threads it ran with (the form :func:`_stored_table` reads back)."""
    say(f"measuring {file.parent.name}: {reason}")
    frame, ran_with = _with_threads(threads, make)
    write_json_atomic(
        file,
        {
            "name": file.parent.name,
            "settings": wanted,
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "threads": ran_with,
            "rows": frame.to_dict("records"),
        },
    )
    return frame


@dataclass(frozen=True)
class Table:
    """A measured table that is not a timing: ``make()`` computes it (its values do not depend
    on the machine's load), stored in ``folder`` (``None``: not stored) with the ``settings`` it
    is made under. With ``threads``, it is made with that many torch threads whatever the
    process has, and a stored table made with another count is made again: an evaluation's
    k-means rounds differently with another thread count (:func:`dmlnb.evaluation.kmeans`)."""

    folder: str | Path | None
    make: Callable[[], pd.DataFrame]
    settings: Mapping[str, Any]
    threads: int | None = None


K = TypeVar("K")


def stored_tables(
    tables: Mapping[K, Table], *, retrain: bool = False, say: Callable[[str], None] = print
) -> dict[K, pd.DataFrame]:
    """Every table of ``tables``, reloaded or made and stored as :func:`stored_measurement` does
    (the same file, the same settings check), by key.

    Under shards (``DMLNB_SHARD``) these are handed out like runs, not measured by shard 0
    alone: a table that is not reloaded is made by the shard that claims its folder first
    (:meth:`Shard.claim`), at once, and the other shards wait for its stored table only after
    making the tables they claimed. Nobody waits for the others to be idle.

    Raises:
        ShardError: waiting for a sibling's table stopped (that shard failed, or the timeout).
    """
    shard = current_shard()
    frames: dict[K, pd.DataFrame] = {}
    siblings: dict[K, tuple[int, Path, Any]] = {}
    for key, table in tables.items():
        if table.folder is None:
            frames[key] = _with_threads(table.threads, table.make)[0]
            continue
        file, wanted = Path(table.folder) / MEASUREMENT, as_json(dict(table.settings))
        reason, stored = (
            ("retrain=True", None)
            if _retrains(retrain, file)
            else _stored_table(file, wanted, table.threads)
        )
        if stored is not None:
            frames[key] = pd.DataFrame(stored["rows"])
            continue
        owner = shard.claim(str(file.parent.resolve())) if shard is not None else None
        if shard is not None and owner != shard.index:
            siblings[key] = (owner, file, wanted)  # type: ignore[assignment]
        else:
            frames[key] = _measure(file, wanted, table.make, reason, say, threads=table.threads)
    for key, (owner, file, wanted) in siblings.items():
        threads = tables[key].threads
        stored = made_by_sibling(
            shard,
            f"table {file.parent.name} (shard {owner}/{shard.count} makes it)",  # type: ignore[arg-type]
            file,
            lambda file=file, wanted=wanted, threads=threads: _stored_table(file, wanted, threads),
            retrain,
            say,
        )
        frames[key] = pd.DataFrame(stored["rows"])
    return {key: frames[key] for key in tables}
