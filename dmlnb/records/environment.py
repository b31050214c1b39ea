"""Where and under which code a run was made: versions, device and git state
(:func:`environment_info`, :func:`git_state`), and whether the package's files had uncommitted
changes (:func:`package_changed`).
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "dmlnb_version",
    "GIT_SCOPE",
    "GIT_CHANGED_LISTED",
    "git_state",
    "package_changed",
    "environment_info",
]


def dmlnb_version() -> str:
    """This package's version string."""
    import dmlnb

    return str(dmlnb.__version__)


#: What a record's git ``dirty`` flag covers (its ``scope``): the package's own files, ``dmlnb/``,
#: tracked and untracked (ignored files aside). Records made before the scope was recorded name
#: none; their flag covered every tracked file of the tree, the committed run records and the
#: rendered notebooks included, which the book's own runs and renders rewrite
#: (:func:`package_changed`).
GIT_SCOPE = "dmlnb"

#: At most this many changed files are listed in a record's git ``changed``.
GIT_CHANGED_LISTED = 50


def git_state(here: Path | None = None) -> dict[str, Any]:
    """The commit of the tree the folder ``here`` (default: the package's) is in, and whether the
    folder's files differ from it: ``{"commit", "dirty", "scope": GIT_SCOPE, "changed": [paths from
    the tree's root, at most GIT_CHANGED_LISTED]}``; ``commit`` and ``dirty`` are ``None`` outside a
    git checkout (an installed package)."""
    here = here or Path(__file__).resolve().parents[1]  # dmlnb/, the package
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        # pathspec "." from the package's folder: dmlnb/ only; paths come from the root
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=normal", "--", "."],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "scope": GIT_SCOPE}
    if not commit:
        return {"commit": None, "dirty": None, "scope": GIT_SCOPE}
    changed = sorted(line[3:] for line in status.splitlines() if line.strip())
    return {
        "commit": commit,
        "dirty": bool(changed),
        "scope": GIT_SCOPE,
        "changed": changed[:GIT_CHANGED_LISTED],
    }


def package_changed(git: dict[str, Any]) -> bool | None:
    """Whether the package's files (:data:`GIT_SCOPE`) differed from the recorded commit when a run
    started, from a record's ``environment["git"]``: its ``dirty`` flag when the record names the
    scope; for a record made before (no ``scope``) ``False`` when its flag is ``False`` (no tracked
    file of the tree was modified) and ``None`` (unknown) when it is ``True``, since that flag also
    counted the tree's run records and notebooks."""
    dirty = git.get("dirty")
    if git.get("scope") == GIT_SCOPE or dirty is None:
        return None if dirty is None else bool(dirty)
    return False if dirty is False else None


def environment_info(device: torch.device) -> dict[str, Any]:
    """Versions, device and git state for a run record."""
    import numpy
    import torchvision

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": str(torch.__version__),  # a str subclass; checkpoints hold plain str
        "torchvision": str(torchvision.__version__),
        "numpy": str(numpy.__version__),
        "dmlnb": dmlnb_version(),
        "platform": platform.platform(),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "git": git_state(),
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info
