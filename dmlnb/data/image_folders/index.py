"""The benchmarks' text index files: rows of whitespace-separated fields that say where they are
in their errors (:class:`Row`, :func:`read_table`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Row", "read_table"]


@dataclass(frozen=True)
class Row:
    """One row of a text index file: its whitespace-separated ``fields`` and ``where`` it is
    (``"path:line"``, for error messages)."""

    fields: list[str]
    where: str

    def __getitem__(self, column: int) -> str:
        return self.fields[column]

    def integer(self, column: int, what: str) -> int:
        """Field ``column`` as an int; a ``ValueError`` naming the file, the line and
        the value if not."""
        try:
            return int(self.fields[column])
        except ValueError:
            raise ValueError(
                f"{self.where}: {what} {self.fields[column]!r} is not an integer; "
                f"fix the line or download the index file again"
            ) from None


def read_table(path: Path, columns: int, skip: int = 0) -> list[Row]:
    """The non-blank rows of a whitespace-separated index file after ``skip`` header lines; each
    must have at least ``columns`` fields (a ``ValueError`` names the file and line if not)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines()[skip:], start=skip + 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < columns:
            raise ValueError(
                f"{path}:{number}: expected {columns} whitespace-separated fields, got "
                f"{len(fields)} in {line!r}; the file is truncated or corrupt, download it again"
            )
        rows.append(Row(fields, f"{path}:{number}"))
    return rows
