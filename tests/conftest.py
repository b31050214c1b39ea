"""Shared pytest configuration.

* Tests marked ``cuda`` run only where a CUDA device is present (skipped elsewhere).
* Run in parallel (``pytest -n 2 --dist loadgroup``, as ``make test`` does), a chapter's smoke
  papermill test (``tests/test_notebooks.py``, which hands its records to nbval's results folder)
  and nbval's cells of the same notebook are one group: one worker runs them, in that order.
* On a CUDA machine the suite requests deterministic algorithms (cuBLAS needs its workspace
  setting for that, set before the first CUDA call), so the tests that compare two runs
  bit for bit hold on the GPU as on the CPU; ``nondeterministic_cuda`` turns the request off for
  a test that checks the tolerance a run has without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


NOTEBOOKS = sorted(
    p.stem for p in (Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")
)


def notebook_group(item: pytest.Item) -> str | None:
    """The notebook an item executes at the smoke profile, sharing its results folder: nbval's
    cells of ``notebooks/<name>.ipynb`` and ``test_notebooks.py``'s smoke run of it; else
    ``None``."""
    path = Path(str(item.path))
    if path.suffix == ".ipynb" and path.parent.name == "notebooks":
        return path.stem
    if path.name == "test_notebooks.py" and item.name.startswith("test_notebook_runs_at_smoke"):
        return next((n for n in NOTEBOOKS if f"[{n}.ipynb]" in item.name), None)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = notebook_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
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
