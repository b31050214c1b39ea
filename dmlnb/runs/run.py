"""A run as a chapter gets it (:class:`Run`), and the record of a run another shard trains,
waited for on its first use (:class:`SiblingRecord`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from torch import nn

from dmlnb.records import RunRecord

__all__ = ["Run", "SiblingRecord"]


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
        return isinstance(self.record, SiblingRecord)

    @property
    def extras(self) -> Mapping[str, Any]:
        """What the chapter stored after training (``finish``); for a run another shard trains, a
        read-only view that waits for its record on first use."""
        if isinstance(self.record, SiblingRecord):
            return _SiblingExtras(self.record)
        return self.record.data.get("extras", {})

    @property
    def metrics(self) -> dict[str, float]:
        """Test metrics of the best epoch."""
        return self.record.best["metrics"]  # type: ignore[index]


class SiblingRecord(RunRecord):
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
    """The ``extras`` of a :class:`SiblingRecord`, read (and so waited for) on first use."""

    def __init__(self, record: SiblingRecord) -> None:
        self._record = record

    def _extras(self) -> dict[str, Any]:
        return self._record.data.get("extras", {})

    def __getitem__(self, key: str) -> Any:
        return self._extras()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._extras())

    def __len__(self) -> int:
        return len(self._extras())
