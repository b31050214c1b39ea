"""dmlnb.allocator: freed blocks stay in the process once glibc's thresholds are raised."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dmlnb.allocator import KEPT_BYTES, keep_freed_memory

GLIBC = (
    (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    if hasattr(os, "confstr")
    else False
)

# Bytes glibc holds in blocks mmapped one by one (mallinfo2's hblkhd) grow with a 300 MB tensor
# unless the thresholds keep such blocks in the heap; printed as "<accepted> <growth in bytes>".
MMAPPED_GROWTH = """
import ctypes, sys, torch
from dmlnb.allocator import keep_freed_memory
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost",
    )]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
accepted = keep_freed_memory() if sys.argv[1] == "keep" else None
before = libc.mallinfo2().hblkhd
x = torch.ones(75_000_000)  # 300 MB
print(accepted, libc.mallinfo2().hblkhd - before)
"""


def _mmapped_growth(mode: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", MMAPPED_GROWTH, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    accepted, growth = out.stdout.split()
    return accepted, int(growth)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt/mallinfo2")
def test_large_blocks_come_from_the_heap_once_freed_memory_is_kept() -> None:
    assert _mmapped_growth("default")[1] >= 300_000_000  # glibc's default: a block of its own
    accepted, growth = _mmapped_growth("keep")
    assert accepted == "True" and growth == 0


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_keeping_freed_memory_is_idempotent() -> None:
    assert keep_freed_memory() and keep_freed_memory(KEPT_BYTES)


@pytest.mark.parametrize("limit", [0, -1, 2**31, 1.5, True, "1G"])
def test_a_limit_mallopt_cannot_take_is_refused_with_the_range(limit: object) -> None:
    with pytest.raises(
        ValueError, match=r"limit must be an int of bytes in \[1, 2147483647\].*got"
    ):
        keep_freed_memory(limit)  # type: ignore[arg-type]
