"""Stored measurements that are not training runs: a timing study (:func:`stored_measurement`)
and tables that need no idle machine (:class:`Table`, :func:`stored_tables`), each reloaded while
it was made with the same settings and thread count (see :mod:`dmlnb.runs`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd
import torch

from dmlnb.records import as_json, read_json, with_added_config_keys, write_json_atomic
from dmlnb.runs.reload import differences
from dmlnb.runs.shards import current_shard, made_by_sibling, retrains

__all__ = [
    "MEASUREMENT",
    "TIMING_THREADS",
    "EVALUATION_THREADS",
    "stored_measurement",
    "Table",
    "stored_tables",
]

MEASUREMENT = "measurement.json"


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
            f"{file} was measured with other settings ({differences(had or {}, wanted)} differ)",
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
        if retrains(retrain, file)
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
            if retrains(retrain, file)
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
