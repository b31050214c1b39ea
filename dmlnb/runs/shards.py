"""Shards: independent runs trained by several processes that execute the same notebook (see
:mod:`dmlnb.runs` for how they deal the runs out and wait for each other): this process's shard
from the environment, the claims, the waits, and what a launch makes once."""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = [
    "POLL_SECONDS",
    "SHARD_ABORT_ENV",
    "SHARD_CLAIMS_ENV",
    "SHARD_ENV",
    "SHARD_SINCE_ENV",
    "SHARD_TIMEOUT_ENV",
    "Shard",
    "ShardError",
    "current_shard",
    "made_by_sibling",
    "retrains",
]

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
it: when this process imported this module)."""
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


def retrains(retrain: bool, path: Path) -> bool:
    """Whether ``retrain`` makes the record or table at ``path`` again: not when this process's
    launch wrote it already (since it started), so a launch makes each of them once."""
    since = _launch_start()
    return retrain and not (since is not None and path.exists() and _written_since(path, since))


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
