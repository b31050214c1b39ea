"""When and under which code the chapter's runs were trained: the commits their records name,
what git finds changed between them in the chapter's code, the run sets by folder."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from dmlnb.reporting import provenance_frame, provenance_groups, provenance_text
from dmlnb.runs import Run

__all__ = ["CHAPTER_CODE", "code_changes", "code_version_text", "run_label", "run_provenance"]


#: The code a run of this chapter executes to train and be evaluated (relative to the repository
#: root): the losses, the chapter's networks and baselines, the training loop, the evaluation, the
#: sampler and the Omniglot loader with its validation split (:func:`code_changes`).
CHAPTER_CODE = (
    "dmlnb/losses",
    "dmlnb/experiments/discriminative",
    "dmlnb/experiments/baseline_losses.py",
    "dmlnb/training.py",  # a module until the split into a package of that name
    "dmlnb/training",
    "dmlnb/evaluation.py",  # a module until the split into a package of that name
    "dmlnb/evaluation",
    "dmlnb/models.py",
    "dmlnb/samplers.py",
    "dmlnb/pairs.py",
    "dmlnb/data/omniglot.py",
    "dmlnb/data/validation.py",
    "dmlnb/data/base.py",
    "dmlnb/data/registry.py",
)


def code_changes(commits: Sequence[str], paths: Sequence[str] = CHAPTER_CODE) -> list[str] | None:
    """The files under ``paths`` (relative to the repository root) that differ between the first of
    ``commits`` and any other (``git diff --name-only``), sorted; ``[]`` when none does (or fewer
    than two commits), ``None`` when git, the repository or one of the commits is not available."""
    import subprocess

    commits = list(dict.fromkeys(c for c in commits if c))
    root = Path(__file__).resolve().parents[3]
    changed: set[str] = set()
    try:
        for other in commits[1:]:
            out = subprocess.run(
                ["git", "diff", "--name-only", commits[0], other, "--", *paths],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=20,
            )
            if out.returncode != 0:
                return None
            changed.update(out.stdout.split())
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted(changed)


def code_version_text(provenance: pd.DataFrame) -> str:
    """The deviations table's code-version row from :func:`~dmlnb.reporting.provenance_frame` rows:
    the commits the records name and whether the package had uncommitted changes
    (:func:`~dmlnb.reporting.provenance_text`), the days they finished, and what git finds changed
    between those commits in :data:`CHAPTER_CODE` (``dmlnb/losses`` named apart) and elsewhere in
    ``dmlnb``."""
    commits = [c for c in dict.fromkeys(provenance["commit"]) if c]
    if not commits:
        return "the records name no commit"
    finished = sorted(str(f)[:16].replace("T", " ") for f in provenance.get("finished", []) if f)
    when = f"; they finished between {finished[0]} and {finished[-1]} UTC" if finished else ""
    text = provenance_text(provenance) + when
    if len(commits) > 1:
        own, losses, anywhere = (
            code_changes(commits),
            code_changes(commits, ("dmlnb/losses",)),
            code_changes(commits, ("dmlnb",)),
        )
        if own is None or losses is None or anywhere is None:
            text += (
                "; what changed between the commits is not checked here (no git history of them)"
            )
        else:
            rest = [f for f in own if f not in losses]
            others = [f for f in anywhere if f not in own]
            text += (
                "; between these commits (git diff): "
                + (
                    f"dmlnb/losses changed ({', '.join(losses)})"
                    if losses
                    else "dmlnb/losses is unchanged"
                )
                + (
                    f"; of the chapter's other training and evaluation code, {', '.join(rest)} "
                    "changed"
                    if rest
                    else ", and so is the chapter's other training and evaluation code ("
                    + ", ".join(
                        p
                        for p in CHAPTER_CODE
                        if p not in ("dmlnb/losses", "dmlnb/evaluation.py", "dmlnb/training.py")
                    )
                    + ")"
                )
                + (
                    f"; elsewhere in dmlnb {len(others)} file{'s' if len(others) > 1 else ''} "
                    f"changed ({', '.join(others)})"
                    if others
                    else "; nothing else in dmlnb changed"
                )
            )
    return (
        text
        + "; a record is reloaded when its configuration and method specification match, whatever "
        "its commit"
    )


def run_label(run: Run) -> str:
    """The name a run is listed under: its record's folder (``discriminative-D256-seed0``), so that
    every run set (a variant, a gamma) is told apart whatever name the record stores (records
    trained before runs were named by their folder store ``discriminative-onehot-seed0`` for the
    one-hot runs and their variants alike); the stored name when the record has no file."""
    path = run.record.path
    return Path(path).parent.name if path is not None else str(run.record.data["name"])


def run_provenance(runs: Sequence[Run]) -> pd.DataFrame:
    """When and under which code every reloaded run was trained (its record's environment):
    :func:`~dmlnb.reporting.provenance_groups` with the run sets (the run's folder,
    :func:`run_label`, without its seed)."""
    return provenance_groups(
        provenance_frame(r.record for r in runs),
        sets=[run_label(r).rsplit("-seed", 1)[0] for r in runs],
    )
