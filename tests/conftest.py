"""Shared pytest configuration.

* Tests marked ``cuda`` run only where a CUDA device is present (skipped elsewhere).
* On a CUDA machine the suite requests deterministic algorithms (cuBLAS needs its workspace
  setting for that, set before the first CUDA call), so the tests that compare two runs
  bit for bit hold on the GPU as on the CPU; ``nondeterministic_cuda`` turns the request off for
  a test that checks the tolerance a run has without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _deterministic_cuda() -> Iterator[None]:
    if torch.cuda.is_available():
        torch.use_deterministic_algorithms(True, warn_only=True)
    yield


@pytest.fixture
def nondeterministic_cuda() -> Iterator[None]:
    """Deterministic algorithms off for one test (back on afterwards, on a CUDA machine)."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before)


# Notebooks under tests/data are inputs the tests execute (papermill), not nbval tests.
collect_ignore_glob = ["data/*"]
