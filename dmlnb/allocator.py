"""Freed CPU memory kept for the next step: glibc's ``malloc`` told not to hand large blocks back.

A training step allocates and frees the same large activations every step: the default
profile's first block alone holds ``128 x 64 x 28 x 28`` float32 values (26 MB) several times
over (convolution output, batch norm, ReLU, max-pool indices, and their gradients). glibc serves
blocks that large from fresh ``mmap`` pages, or trims them off the top of its heap when they are
freed, so each step asks the kernel for the same memory again and page-faults every 4 KiB of it
back in: on a 2-core AVX2 CPU the bare channels_last loop of ``python benchmarks/book.py
--measure`` stepped 1,105 img/s with glibc's defaults and 1,383 with freed memory kept (two
threads, medians of 3 rounds, ``benchmarks/results/book_cpu.txt``; 952 and 1,369 when this module
was written). Raising glibc's two thresholds with ``mallopt``,

    M_MMAP_THRESHOLD = limit    # blocks below it come from the heap, not from their own mmap
    M_TRIM_THRESHOLD = limit    # up to this much free memory stays at the heap's top

keeps freed blocks in the process for reuse, which is what preloading jemalloc or tcmalloc does
(PyTorch's CPU performance guide), without a preload. The arithmetic does not change (the same
kernels on the same 64-byte-aligned buffers): a run trains bit for bit as before. The cost is
memory the process keeps after its peak, at most ``limit`` above what it uses.

Process-wide and idempotent; :func:`dmlnb.training.train` and
:func:`dmlnb.evaluation.compute_embeddings` call it when they run on the CPU. Elsewhere than
Linux with glibc (macOS, musl) it does nothing and says so by returning ``False``.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["KEPT_BYTES", "keep_freed_memory"]

#: The default limit: blocks up to 1 GiB come from the heap and up to 1 GiB of freed memory stays.
KEPT_BYTES = 1 << 30

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, <malloc.h>
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1  # mallopt takes a C int


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc, else ``None`` (looked up once)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"; undefined outside glibc
    except (ValueError, OSError, AttributeError):
        return None
    if not version or not version.startswith("glibc"):
        return None
    libc = ctypes.CDLL(None)  # the symbols the process already has, glibc's among them
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def keep_freed_memory(limit: int = KEPT_BYTES) -> bool:
    """Keep freed blocks below ``limit`` bytes in the process (glibc's mmap and trim thresholds).

    Returns ``True`` when glibc accepted both thresholds, ``False`` where the C library is not
    glibc (nothing is changed there).

    Raises:
        ValueError: ``limit`` is not an int in ``[1, 2**31 - 1]`` (``mallopt`` takes a C int).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _INT_MAX:
        raise ValueError(
            f"limit must be an int of bytes in [1, {_INT_MAX}] (mallopt takes a C int), got "
            f"{limit!r}; the default is {KEPT_BYTES} (1 GiB)"
        )
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, limit)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, limit)
    )
