"""Train, resume or reload one run by its fingerprint (:func:`train_or_reload`; see
:mod:`dmlnb.runs`), and why a stored run cannot be reloaded as it is (:func:`reuse_reason`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from torch import nn

from dmlnb.env import TrainingDisabledError
from dmlnb.records import RunRecord, as_json, run_fingerprint
from dmlnb.runs.run import Run, SiblingRecord
from dmlnb.runs.shards import current_shard, made_by_sibling, retrains

__all__ = ["RECORD", "differences", "reuse_reason", "train_or_reload"]

RECORD = "record.json"


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ between ``old`` and ``new`` (a key one lacks counts), sorted."""
    return sorted(
        k for k in set(old) | set(new) if old.get(k, "<absent>") != new.get(k, "<absent>")
    )


def reuse_reason(
    run_dir: Path, config: Any, spec: Mapping[str, Any]
) -> tuple[str, RunRecord | None]:
    """Why the run in ``run_dir`` cannot be reloaded as it is (``""`` when it can), and its
    record when one exists under the same fingerprint (finished or not: it may be resumed)."""
    path = run_dir / RECORD
    if not path.exists():
        return f"no record at {path}", None
    record = RunRecord.load(path)
    config = config.to_dict() if hasattr(config, "to_dict") else config
    if "spec" not in record.data:
        return f"{path} was written before the run layer (it stores no method specification)", None
    wanted = run_fingerprint(config, spec)
    if run_fingerprint(record.config, record.data["spec"]) != wanted:
        changed = differences(record.config, as_json(config))
        changed_spec = differences(record.data["spec"], as_json(spec))
        return (
            f"its fingerprint changed (configuration keys {changed}, specification entries "
            f"{changed_spec} differ from {path})"
        ), None
    if record.data["status"] != "finished":
        last = record.data["history"][-1]["epoch"] if record.data["history"] else 0
        return f"it was interrupted after epoch {last}: resuming", record
    if "extras" not in record.data:
        return (
            "its record is finished but holds no extras: computing them from its checkpoint",
            record,
        )
    return "", record


def train_or_reload(
    name: str,
    run_dir: str | Path | None,
    config: Any,
    spec: Mapping[str, Any],
    train: Callable[[bool], tuple[RunRecord, nn.Module | None]],
    *,
    finish: Callable[[RunRecord, nn.Module | None], Mapping[str, Any]] | None = None,
    retrain: bool = False,
    say: Callable[[str], None] = print,
) -> Run:
    """Reload, resume or train one run (see the module docstring).

    Args:
        name: the run's name (messages, the record).
        run_dir: its folder (``None``: train in memory, nothing written or reloaded).
        config: its resolved :class:`~dmlnb.profiles.TrainConfig`.
        spec: its method specification (JSON-able; part of the fingerprint).
        train: ``train(resume) -> (record, model)``; must pass ``spec`` to
            :func:`dmlnb.training.train` so the record carries it.
        finish: ``finish(record, model) -> extras`` stored in the record after training.
        retrain: train from scratch even when a finished record matches, unless the record
            was written since the launch this process belongs to started (``DMLNB_SHARD_SINCE``).
        say: where the reason for training goes (the notebook's output by default).

    Under shards (``DMLNB_SHARD``, see the module docstring) a run whose folder another shard
    claimed first is not trained: the call returns at once with a record that is waited for and
    reloaded on first use.

    Raises:
        ShardError: waiting for another shard's run stopped (that shard failed, or the timeout).
    """
    spec = as_json(dict(spec))
    folder = Path(run_dir) if run_dir is not None else None
    shard = current_shard() if folder is not None else None
    if shard is not None and folder is not None:
        owner = shard.claim(str(folder.resolve()))
        if owner != shard.index:
            return Run(
                name,
                SiblingRecord(
                    lambda: made_by_sibling(
                        shard,
                        f"run {name} (shard {owner}/{shard.count} trains it)",
                        folder / RECORD,
                        lambda: reuse_reason(folder, config, spec),
                        retrain,
                        say,
                    ),
                    folder / RECORD,
                ),
            )
    if folder is None:
        reason, known = "no run folder", None
    elif retrains(retrain, folder / RECORD):
        reason, known = "retrain=True", None
    else:
        reason, known = reuse_reason(folder, config, spec)
        if reason == "":
            return Run(name, known)  # type: ignore[arg-type]
    if folder is not None:
        say(f"training {name}: {reason}")
    try:
        record, model = train(known is not None)
    except TrainingDisabledError as err:
        raise TrainingDisabledError(f"{err} [{name}: {reason}]") from None
    if record.data.get("fingerprint") != run_fingerprint(record.config, spec):
        raise ValueError(
            f"the train function of {name!r} did not pass spec= to dmlnb.training.train"
        )
    record.data["extras"] = as_json(dict(finish(record, model))) if finish is not None else {}
    if folder is not None:
        record.save(folder / RECORD)
    return Run(name, record, model, trained=True)
