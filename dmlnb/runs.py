"""The run layer: every chapter trains, resumes or reloads its runs through :func:`train_or_reload`.

A run is identified by its *fingerprint* (:func:`dmlnb.records.run_fingerprint`): a hash of its
resolved configuration and its method specification ``spec`` (what the configuration does not
say: the loss and its settings, the sampler, the hooks, what the chapter stores after training).
Both, and the fingerprint, are stored in the run's ``record.json``. Then :func:`train_or_reload`

* **reloads** a finished record whose fingerprint equals the one asked for (nothing is trained
  and no weights are read: the record holds everything the chapter's tables, figures and claims
  use, in ``extras``);
* **resumes** an interrupted run of the same fingerprint from its checkpoint (a run whose record
  is finished but whose ``extras`` were never written resumes at its last epoch, which trains
  nothing, and only computes them);
* **trains** from scratch otherwise, and says why (``say``): no record, a changed fingerprint
  (naming the configuration keys and specification entries that differ), a record written
  before the run layer, or ``retrain=True``. With training disabled
  (``DMLNB_NO_TRAINING=1``) that raises :class:`~dmlnb.training.TrainingDisabledError` with the
  same reason.

Measurements that are not training runs (timing studies) are stored the same way:
:func:`stored_measurement` keeps a table with the settings it was measured under and reloads it
while they match, so a re-rendered chapter quotes the stored numbers and its verdicts do not
move with the machine's load.

The chapter supplies two functions: ``train(resume) -> (record, model)`` builds the model, loss,
sampler and hooks and calls :func:`dmlnb.training.train` (with ``spec=``), and
``finish(record, model) -> extras`` computes what is stored after training (usually from the
best-epoch weights, which exist at that moment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd
import torch
from torch import nn

from dmlnb.records import RunRecord, as_json, read_json, run_fingerprint, with_added_config_keys, write_json_atomic

__all__ = ["Run", "train_or_reload", "reuse_reason", "stored_measurement", "MEASUREMENT"]

MEASUREMENT = "measurement.json"

RECORD = "record.json"


@dataclass
class Run:
    """One run: its name, its record, the model when trained in this session (``None`` when
    reloaded), and whether it was trained now."""

    name: str
    record: RunRecord
    model: nn.Module | None = None
    trained: bool = False

    @property
    def extras(self) -> dict[str, Any]:
        """What the chapter stored after training (``finish``)."""
        return self.record.data.get("extras", {})

    @property
    def metrics(self) -> dict[str, float]:
        """Test metrics of the best epoch."""
        return self.record.best["metrics"]  # type: ignore[index]


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k, "<absent>") != new.get(k, "<absent>"))


def reuse_reason(run_dir: Path, config: Any, spec: Mapping[str, Any]) -> tuple[str, RunRecord | None]:
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
        changed = _differences(record.config, as_json(config))
        changed_spec = _differences(record.data["spec"], as_json(spec))
        return (f"its fingerprint changed (configuration keys {changed}, specification entries "
                f"{changed_spec} differ from {path})"), None
    if record.data["status"] != "finished":
        last = record.data["history"][-1]["epoch"] if record.data["history"] else 0
        return f"it was interrupted after epoch {last}: resuming", record
    if "extras" not in record.data:
        return "its record is finished but holds no extras: computing them from its checkpoint", record
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
        retrain: train from scratch even when a finished record matches.
        say: where the reason for training goes (the notebook's output by default).
    """
    from dmlnb.training import TrainingDisabledError

    spec = as_json(dict(spec))
    folder = Path(run_dir) if run_dir is not None else None
    if folder is None:
        reason, known = "no run folder", None
    elif retrain:
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
        raise ValueError(f"the train function of {name!r} did not pass spec= to dmlnb.training.train")
    record.data["extras"] = as_json(dict(finish(record, model))) if finish is not None else {}
    if folder is not None:
        record.save(folder / RECORD)
    return Run(name, record, model, trained=True)


def _today_keys(settings: Any) -> Any:
    """Stored measurement ``settings`` with each TrainConfig dict among its top-level values
    given the configuration keys added since (:func:`~dmlnb.records.with_added_config_keys`), in
    the form JSON reads back (an added key's tuple value, e.g. ``betas``, as a list)."""
    if not isinstance(settings, dict):
        return settings
    return {k: as_json(with_added_config_keys(v)) for k, v in settings.items()}


def stored_measurement(
    folder: str | Path | None,
    make: Callable[[], pd.DataFrame],
    *,
    settings: Mapping[str, Any],
    retrain: bool = False,
    say: Callable[[str], None] = print,
) -> pd.DataFrame:
    """A measured table (a timing study), stored as ``folder/measurement.json`` (``name``,
    ``settings``, when it was ``made``, ``threads``, ``rows``) and reloaded while it was made
    with the same ``settings`` (unless ``retrain``); otherwise ``make()`` measures it now (the
    reason is said) and it is written atomically. ``folder=None`` measures without storing.

    A training configuration among the stored settings' values is compared as a record's is:
    the :class:`~dmlnb.profiles.TrainConfig` keys added after it was stored count at the value
    runs made before had (:func:`~dmlnb.records.with_added_config_keys`), so adding a key does
    not make every stored measurement stale."""
    file = Path(folder) / MEASUREMENT if folder is not None else None
    wanted = as_json(dict(settings))
    if file is None:
        return make()
    if retrain:
        reason = "retrain=True"
    elif not file.exists():
        reason = f"no measurement at {file}"
    else:
        stored = read_json(file)
        had = _today_keys(stored.get("settings"))
        if had == wanted:
            return pd.DataFrame(stored["rows"])
        reason = f"{file} was measured with other settings ({_differences(had or {}, wanted)} differ)"
    say(f"measuring {file.parent.name}: {reason}")
    frame = make()
    write_json_atomic(file, {"name": file.parent.name, "settings": wanted,
                             "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "threads": torch.get_num_threads(), "rows": frame.to_dict("records")})
    return frame
