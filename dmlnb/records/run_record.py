"""The JSON record of one training run (:class:`RunRecord`): created, resumed, filled epoch by
epoch with the selected epochs, saved atomically and reloaded validated.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dmlnb.profiles import SELECT_ON
from dmlnb.records.files import as_json, jsonable, read_json, write_json_atomic
from dmlnb.records.fingerprint import run_fingerprint
from dmlnb.records.schema import (
    CONFIG_KEYS_ADDED,
    SCHEMA_VERSION,
    RecordError,
    migrate_record,
    validate_record,
)

__all__ = ["utc_now", "RunRecord"]


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (record timestamps)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


#: Configuration keys :meth:`RunRecord.outcome` leaves out at these values: added after analyses
#: were first tied to outcomes, so the outcomes of the runs made before stay what they were.
_OUTCOME_OMITS: dict[str, Any] = {
    k: v for k, v in CONFIG_KEYS_ADDED.items() if k != "compile"
}  # compile predates them


class RunRecord:
    """The JSON record of one training run (``data``), saved atomically to ``path``.

    ``data`` keys: see the module docstring (schema version :data:`SCHEMA_VERSION`); history rows
    of :func:`dmlnb.training.train` also hold ``images_per_second`` and ``lr``.
    """

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.data = data
        self.path = path

    @classmethod
    def new(
        cls,
        name: str,
        config: dict[str, Any],
        components: dict[str, Any],
        environment: dict[str, Any],
        spec: dict[str, Any] | None = None,
    ) -> "RunRecord":
        """A running record; with ``spec`` (the method specification, see :func:`run_fingerprint`)
        it also stores ``spec`` and ``fingerprint``."""
        started = utc_now()
        identity = (
            {}
            if spec is None
            else {"spec": as_json(spec), "fingerprint": run_fingerprint(config, spec)}
        )
        return cls(
            {
                "schema_version": SCHEMA_VERSION,
                "name": name,
                "status": "running",
                "config": config,
                **identity,
                "components": components,
                "environment": environment,
                "history": [],
                "best": None,
                "started": started,
                "finished": None,
                "segments": [_segment(environment, 0, started)],
                "device_changed": False,
            }
        )

    @classmethod
    def load(cls, path: str | Path) -> "RunRecord":
        """The record at ``path``, migrated to the current schema and validated.

        Raises:
            FileNotFoundError: no file at ``path``.
            RecordError: not JSON, a newer schema version, or a field the book reads is missing
                or of the wrong type (the message names ``path`` and the field).
        """
        path = Path(path)
        try:
            raw = read_json(path)
        except json.JSONDecodeError as err:
            raise RecordError(
                f"run record {path} is not valid JSON ({err}); copy it again or delete it to "
                "retrain"
            ) from None
        return cls.from_data(raw, str(path), path)

    @classmethod
    def from_data(cls, data: Any, source: str, path: Path | None = None) -> "RunRecord":
        """A record from already-parsed ``data`` (e.g. a checkpoint's), migrated and validated;
        ``source`` names it in error messages."""
        data = migrate_record(data, source)
        validate_record(data, source)
        return cls(data, path)

    def resume(self, environment: dict[str, Any], from_epoch: int) -> None:
        """Note that a new process continues the run after epoch ``from_epoch`` with
        ``environment`` (:func:`environment_info`): a new segment, ``resumed`` + 1, and, when
        the device differs from the previous segment's (type or model), ``device_changed`` and a
        sentence in ``device_notes``."""
        segments = self.data["segments"]
        previous = segments[-1]
        segment = _segment(environment, from_epoch, utc_now())
        segments.append(segment)
        self.data["resumed"] = self.data.get("resumed", 0) + 1
        if _device_key(previous) != _device_key(segment):
            self.data["device_changed"] = True
            self.data.setdefault("device_notes", []).append(
                f"epochs {previous['from_epoch'] + 1}-{from_epoch} ran on {previous['device']} "
                f"({previous.get('device_name')}), the run resumed after epoch {from_epoch} on "
                f"{segment['device']} ({segment['device_name']}): results are not bit-identical "
                "to an uninterrupted run on one device"
            )

    def save_if_stale(self) -> bool:
        """Rewrite the file at ``path`` unless it already holds this record's run state (status,
        history, best, segments); returns whether it was written. Repairs the file after a
        process died between writing a checkpoint and writing the record."""
        if self.path is None:
            raise ValueError("RunRecord has no path; set record.path first")
        try:
            on_disk = read_json(self.path)
        except (OSError, ValueError):
            on_disk = None
        mine = as_json(self.data)
        keys = ("status", "history", "best", "selections", "finished", "segments")
        if isinstance(on_disk, dict) and all(on_disk.get(k) == mine.get(k) for k in keys):
            return False
        self.save()
        return True

    def add_epoch(self, row: dict[str, Any], select_metric: str, select_on: str = "test") -> bool:
        """Append an epoch row; returns ``True`` when it is the new best epoch, the one with the
        highest ``select_metric`` on the ``select_on`` split (``"test"``: the row's ``metrics``,
        the papers' protocol; ``"validation"``: its ``val_metrics``). Ties keep the earlier epoch.

        ``best`` then holds that epoch's test ``metrics`` and ``value`` (and, when the row has
        validation metrics, ``val_metrics`` and ``val_value``) with ``selected_on``. A row with
        ``val_metrics`` also updates ``selections``, the epoch each protocol selects, so that a
        run made one way tells what the other way would have reported. The evaluation before
        training (``epoch == 0``) is recorded but never selected.

        Raises:
            ValueError: ``select_on`` is not one of :data:`dmlnb.profiles.SELECT_ON`; a row with
                ``val_metrics`` but no test ``metrics``; ``select_on="validation"`` and an
                evaluated row without ``val_metrics``.
            KeyError: ``select_metric`` was not computed.
        """
        if select_on not in SELECT_ON:
            raise ValueError(f"select_on {select_on!r} is not one of {list(SELECT_ON)}")
        metrics, val_metrics = row.get("metrics"), row.get("val_metrics")
        if val_metrics and not metrics:
            raise ValueError(
                f"epoch {row['epoch']} has validation metrics but no test metrics; a run with a "
                "validation split evaluates both (pass an eval_set with the val_set)"
            )
        if metrics and not val_metrics and select_on == "validation":
            raise ValueError(
                f"epoch {row['epoch']} has no validation metrics to select on "
                "(select_on='validation'); evaluate a validation split (val_set=) or select on "
                "'test'"
            )
        self.data["history"].append(row)
        if self.data.get("segments"):
            self.data["segments"][-1]["to_epoch"] = row["epoch"]
        if not metrics or row["epoch"] == 0:
            return False
        for values in (metrics, val_metrics or {}):
            if values and select_metric not in values:
                raise KeyError(
                    f"select_metric {select_metric!r} not among computed metrics {sorted(values)}"
                )
        seconds = sum(r["train_seconds"] for r in self.data["history"])
        chosen = {
            "epoch": row["epoch"],
            "metric": select_metric,
            "value": metrics[select_metric],
            "metrics": metrics,
            "seconds_to_best": seconds,
        }
        if val_metrics:
            chosen.update(val_value=val_metrics[select_metric], val_metrics=val_metrics)
            selections = self.data.setdefault("selections", {})
            for basis in SELECT_ON:
                if _beats(chosen, selections.get(basis), basis):
                    selections[basis] = {**chosen, "selected_on": basis}
        if not _beats(chosen, self.data["best"], select_on):
            return False
        self.data["best"] = {**chosen, "selected_on": select_on}
        return True

    def finish(self, when: str) -> None:
        self.data["status"] = "finished"
        self.data["finished"] = when
        self.data["total_train_seconds"] = sum(r["train_seconds"] for r in self.data["history"])

    def save(self, path: str | Path | None = None) -> None:
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("RunRecord has no path; pass one to save()")
        write_json_atomic(target, self.data)
        self.path = target

    def outcome(self) -> str:
        """16 hex digits identifying what the run learned: a hash of its configuration and, per
        epoch, its loss, test metrics and (when evaluated) validation metrics (timings, i.e.
        ``*_seconds`` entries, dates and the environment left out; the keys added to the
        configuration after outcomes were first stored, ``select_on``, ``betas`` and
        ``head_lr_scale``, left out at their defaults, so runs made before them keep their outcome).
        Two trainings of one configuration share it when they reproduce each other exactly; an
        analysis of the weights stored next to the record (:mod:`dmlnb.run_analysis`) is tied to it,
        so a run trained again to other numbers is analysed again. (What the run *is*, before
        training, is :func:`run_fingerprint`.)"""

        def timeless(values: dict[str, Any] | None) -> dict[str, Any]:
            return {k: v for k, v in (values or {}).items() if not k.endswith("_seconds")}

        rows = [
            [row["epoch"], row["loss"], timeless(row.get("metrics"))]
            + ([timeless(row["val_metrics"])] if row.get("val_metrics") is not None else [])
            for row in self.data["history"]
        ]
        config = {
            k: v
            for k, v in self.data["config"].items()
            if k not in _OUTCOME_OMITS or as_json(v) != as_json(_OUTCOME_OMITS[k])
        }
        payload = json.dumps({"config": config, "history": rows}, sort_keys=True, default=jsonable)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def best(self) -> dict[str, Any] | None:
        """The selected epoch (see the module docstring): its test ``metrics``, and where it was
        selected (:attr:`selected_on`)."""
        return self.data["best"]

    @property
    def selected_on(self) -> str:
        """Where the best epoch was chosen: ``"validation"``, or ``"test"`` (the papers'
        protocol; every record made before the choice existed)."""
        return self.data["config"].get("select_on", "test")

    @property
    def selections(self) -> dict[str, dict[str, Any]]:
        """The epoch each protocol selects (``{"validation": ..., "test": ...}``, each shaped like
        :attr:`best`), for a run evaluated on a validation split; ``{}`` otherwise."""
        return self.data.get("selections", {})

    @property
    def config(self) -> dict[str, Any]:
        return self.data["config"]

    def evaluations(self) -> list[dict[str, Any]]:
        """The history rows with test metrics after training began (``epoch > 0``), in epoch
        order: the evaluations the best epoch is chosen from."""
        return [row for row in self.data["history"] if row["epoch"] > 0 and row.get("metrics")]

    def training_losses(self) -> list[float]:
        """The mean training loss of every epoch, in order (the evaluation before training, epoch 0,
        has none)."""
        return [float(row["loss"]) for row in self.data["history"] if row["epoch"] > 0]

    def evaluations_since_best(self) -> int:
        """How many evaluations came after the selected epoch (0 while the last one is the best,
        or when nothing is selected yet): a run whose ``patience`` this reaches has converged."""
        if self.best is None:
            return 0
        return sum(row["epoch"] > self.best["epoch"] for row in self.evaluations())

    @property
    def stopped_early(self) -> bool:
        """Whether the run stopped before its last epoch because its selection metric stopped
        improving (``TrainConfig.patience``)."""
        return "stopped" in self.data

    @property
    def best_is_last(self) -> bool:
        """Whether the best epoch is the last evaluated one (the selection metric was still
        rising, or flat, when training stopped)."""
        evaluated = self.evaluations()
        return (
            bool(evaluated)
            and self.best is not None
            and self.best["epoch"] == evaluated[-1]["epoch"]
        )

    def history_frame(self) -> "Any":
        """Per-epoch history as a pandas DataFrame (test metrics flattened into columns, the
        validation metrics into ``"val <name>"`` columns)."""
        import pandas as pd

        rows = []
        for row in self.data["history"]:
            flat = {k: v for k, v in row.items() if k not in ("metrics", "val_metrics")}
            flat.update(row.get("metrics") or {})
            flat.update({f"val {k}": v for k, v in (row.get("val_metrics") or {}).items()})
            rows.append(flat)
        return pd.DataFrame(rows).set_index("epoch")

    def __repr__(self) -> str:
        best = self.best
        summary = (
            f"best {best['metric']}={best['value']:.4f} @ epoch {best['epoch']} (selected on "
            f"{best.get('selected_on', 'test')})"
            if best
            else "no evaluation"
        )
        return f"RunRecord({self.data['name']!r}, {self.data['status']}, {summary})"


def _beats(candidate: dict[str, Any], current: dict[str, Any] | None, basis: str) -> bool:
    """Whether ``candidate`` (an epoch's selection entry) beats ``current`` on ``basis``
    (``"test"``: ``value``; ``"validation"``: ``val_value``); ties keep ``current``."""
    key = "val_value" if basis == "validation" else "value"
    return current is None or candidate[key] > current[key]


def _segment(environment: dict[str, Any], from_epoch: int, started: str | None) -> dict[str, Any]:
    return {
        "device": str(environment.get("device")),
        "device_name": environment.get("device_name"),
        "from_epoch": int(from_epoch),
        "to_epoch": int(from_epoch),
        "started": started,
    }


def _device_key(segment: dict[str, Any]) -> tuple[str, Any]:
    """What must match for a continuation to be bit-identical: device type and model."""
    return str(segment["device"]).split(":")[0], segment.get("device_name")
