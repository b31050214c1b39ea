"""Run records: what a training run did, saved as JSON that is never half-written.

A record holds the resolved configuration, per-epoch metrics, timings, library versions, the
device and the git commit, so a table in the book can always be traced back to the run behind it.

Records carry a schema version (:data:`SCHEMA_VERSION`). :meth:`RunRecord.load` validates every
field the book's tables and claims read and names the file and the field when one is missing or
of the wrong type; records written before versioning (version 0, e.g. the committed ones under
``results/``) are migrated in memory on load (the file is not rewritten); records of a newer
version are refused.

Schema version 1 (adds ``schema_version`` and ``segments`` to version 0)::

    schema_version  1
    name            str
    status          "running" | "finished"
    config          dict (the resolved configuration; the reload key)
    components      dict
    environment     dict with "device" (str): where the run started, and "git": {commit,
                    dirty, scope, changed} (:func:`package_changed`; records made before
                    ``scope`` hold commit and dirty only)
    history         list of rows: epoch (int), loss (number | null), train_seconds (number),
                    metrics (dict of numbers | null: the test metrics), val_metrics (optional,
                    dict of numbers | null: the validation metrics of a run with a validation
                    split), ...; rows trained on the CPU also hold step_seconds
                    ({phase: seconds}, :class:`dmlnb.training.PhaseClock`)
    best            null | {epoch (int), metric (str), value (number), metrics (dict),
                    seconds_to_best (number), selected_on (optional: "validation" | "test";
                    absent in records made before it, which selected on "test"), val_value
                    (number) and val_metrics (dict), optional: with a validation split}:
                    the epoch selected by ``config["select_on"]``; ``value`` and ``metrics``
                    are always the test classes' at that epoch
    selections      optional, with a validation split: {"validation": selection, "test":
                    selection}, each shaped like ``best`` (selected_on, val_value and
                    val_metrics included): the epoch each protocol selects, whichever
                    ``select_on`` chose; ``best`` equals ``selections[select_on]``
    started         str | null
    finished        str | null (str when finished)
    total_train_seconds  number (when finished)
    segments        list of {device (str), device_name (str | null), from_epoch (int),
                    to_epoch (int), started (str | null)}: the stretches of epochs each process
                    ran (one per start or resume), epochs from_epoch + 1 .. to_epoch
    device_changed  bool: a resume ran on another device (type or model) than the segment
                    before it, so the run is not bit-identical to an uninterrupted one;
                    ``device_notes`` (list of str) says where and when
    resumed         int, optional: how many times the run was resumed
    spec            dict, optional: the method specification of a run made through
                    :mod:`dmlnb.runs` (what the configuration does not say)
    fingerprint     str, optional: :func:`run_fingerprint` of ``config`` and ``spec``
    extras          dict, optional: what the chapter stored after training (analysis
                    statistics, t-SNE coordinates, per-step diagnostics, timings)

Version 0 -> 1 migration: ``schema_version`` is set, ``segments`` becomes one segment on the
``environment`` device covering every epoch of ``history``, ``device_changed`` is ``False``,
``environment`` values that are ``str`` subclasses become ``str``, and ``migrated_from``
records the version read.

Configuration keys added to :class:`dmlnb.profiles.TrainConfig` after records were first written
are listed in :data:`CONFIG_KEYS_ADDED` with the value every older run used; loading fills a
record's ``config`` with them (in memory), and a stored ``fingerprint`` that was computed
without them is recomputed with them, so an old record (or checkpoint) still matches the
configuration that reproduces it and is neither retrained nor refused on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from dmlnb.profiles import SELECT_ON

__all__ = [
    "utc_now",
    "SCHEMA_VERSION",
    "RecordError",
    "RunRecord",
    "run_fingerprint",
    "migrate_record",
    "CONFIG_KEYS_ADDED",
    "with_added_config_keys",
    "validate_record",
    "GIT_SCOPE",
    "git_state",
    "package_changed",
    "write_json_atomic",
    "read_json",
    "as_json",
    "environment_info",
    "atomic_torch_save",
]


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (record timestamps)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


SCHEMA_VERSION = 1

#: TrainConfig keys added after records were first written -> the value runs made before had.
CONFIG_KEYS_ADDED: dict[str, Any] = {
    "compile": False,
    "select_on": "test",
    "betas": (0.9, 0.999),
    "head_lr_scale": 1.0,
}

#: Configuration keys :meth:`RunRecord.outcome` leaves out at these values: added after analyses
#: were first tied to outcomes, so the outcomes of the runs made before stay what they were.
_OUTCOME_OMITS: dict[str, Any] = {
    k: v for k, v in CONFIG_KEYS_ADDED.items() if k != "compile"
}  # compile predates them


class RecordError(ValueError):
    """A run record that cannot be used: unreadable, of a newer schema, or missing a field."""


def _atomic_write(path: Path, write: Any) -> None:
    """Write through ``write(file_object)`` to a temp file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | Path, data: dict[str, Any], compact: bool = False) -> None:
    """Write ``data`` as indented JSON (``compact``: on one line, no spaces, for files that are
    mostly long lists of numbers); readers see the old file or the new one, never a mix."""
    layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 1}
    payload = (json.dumps(data, sort_keys=False, default=_jsonable, **layout) + "\n").encode()
    _atomic_write(Path(path), lambda fh: fh.write(payload))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) so that a reader polling for the file sees it whole or not at all."""
    payload = text.encode()
    _atomic_write(Path(path), lambda fh: fh.write(payload))


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` through a temp file + rename (a checkpoint is never left truncated)."""
    _atomic_write(Path(path), lambda fh: torch.save(obj, fh))


def read_json(path: str | Path) -> dict[str, Any]:
    """The JSON document at ``path``."""
    with open(path) as fh:
        return json.load(fh)


def as_json(obj: Any) -> Any:
    """``obj`` as it reads back from a JSON file written by :func:`write_json_atomic` (tuples
    become lists, tensors and numpy values plain numbers and lists): the form saved values are
    compared in."""
    return json.loads(json.dumps(obj, default=_jsonable))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(
    ok: bool, source: str, field: str, wanted: str, value: Any, missing: bool = False
) -> None:
    if ok:
        return
    if missing:
        problem = "is missing"
    else:
        shown = repr(value)
        problem = f"is {shown[:60] + '...' if len(shown) > 60 else shown} ({type(value).__name__})"
    raise RecordError(
        f"run record {source}: field {field!r} {problem}, expected {wanted}; the file is damaged "
        "or was not written by dmlnb's training loop: copy it again from the machine that made "
        "it, or delete it to retrain the run"
    )


def _check_fields(
    obj: dict[str, Any], spec: dict[str, tuple[Any, str]], source: str, prefix: str
) -> None:
    for key, (test, wanted) in spec.items():
        _check(key in obj, source, prefix + key, wanted, None, missing=True)
        _check(test(obj[key]), source, prefix + key, wanted, obj[key])


_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool), "an int")
_NUMBER = (_is_number, "a number")
_STR = (lambda v: isinstance(v, str), "a string")
_DICT = (lambda v: isinstance(v, dict), "an object (dict)")
_RECORD_FIELDS: dict[str, tuple[Any, str]] = {
    "name": _STR,
    "status": (lambda v: v in ("running", "finished"), '"running" or "finished"'),
    "config": _DICT,
    "components": _DICT,
    "environment": _DICT,
    "history": (lambda v: isinstance(v, list), "a list of epoch rows"),
    "best": (lambda v: v is None or isinstance(v, dict), "null or an object"),
    "started": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "finished": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "segments": (lambda v: isinstance(v, list) and len(v) > 0, "a non-empty list of segments"),
    "device_changed": (lambda v: isinstance(v, bool), "true or false"),
}
_METRICS = (
    lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
    "an object of numbers",
)
_OPTIONAL_METRICS = (lambda v: v is None or _METRICS[0](v), "null or an object of numbers")
_ROW_FIELDS: dict[str, tuple[Any, str]] = {
    "epoch": _INT,
    "loss": (lambda v: v is None or _is_number(v), "null or a number"),
    "train_seconds": _NUMBER,
    "metrics": _OPTIONAL_METRICS,
}
_ROW_OPTIONAL: dict[str, tuple[Any, str]] = {"val_metrics": _OPTIONAL_METRICS}
_BEST_FIELDS: dict[str, tuple[Any, str]] = {
    "epoch": _INT,
    "metric": _STR,
    "value": _NUMBER,
    "metrics": _METRICS,
    "seconds_to_best": _NUMBER,
}
_BEST_OPTIONAL: dict[str, tuple[Any, str]] = {
    "selected_on": (lambda v: v in SELECT_ON, " or ".join(f'"{s}"' for s in SELECT_ON)),
    "val_value": _NUMBER,
    "val_metrics": _METRICS,
}
_SEGMENT_FIELDS: dict[str, tuple[Any, str]] = {"device": _STR, "from_epoch": _INT, "to_epoch": _INT}


def _check_selection(selection: Any, source: str, field: str) -> None:
    _check(isinstance(selection, dict), source, field, "an object", selection)
    _check_fields(selection, _BEST_FIELDS, source, field + ".")
    _check_fields(
        selection, {k: v for k, v in _BEST_OPTIONAL.items() if k in selection}, source, field + "."
    )


def validate_record(data: Any, source: str = "<record>") -> None:
    """Raise :class:`RecordError` naming ``source`` and the field unless ``data`` is a valid
    current-version record: every field the book's tables and claims read is checked (and the
    selections agree: ``best`` is the selection ``config["select_on"]`` names)."""
    _check(isinstance(data, dict), source, "<top level>", "a JSON object", data)
    _check(
        data.get("schema_version") == SCHEMA_VERSION,
        source,
        "schema_version",
        str(SCHEMA_VERSION),
        data.get("schema_version"),
        missing="schema_version" not in data,
    )
    _check_fields(data, _RECORD_FIELDS, source, "")
    _check_fields(data["environment"], {"device": _STR}, source, "environment.")
    for i, row in enumerate(data["history"]):
        _check(isinstance(row, dict), source, f"history[{i}]", "an object", row)
        _check_fields(row, _ROW_FIELDS, source, f"history[{i}].")
        _check_fields(
            row, {k: v for k, v in _ROW_OPTIONAL.items() if k in row}, source, f"history[{i}]."
        )
    best = data["best"]
    if best is not None:
        _check_selection(best, source, "best")
        wanted = data["config"].get("select_on", "test")
        _check(
            best.get("selected_on", "test") == wanted,
            source,
            "best.selected_on",
            f'"{wanted}" (the configuration\'s select_on)',
            best.get("selected_on", "test"),
        )
    if "selections" in data:
        selections = data["selections"]
        _check(
            isinstance(selections, dict) and set(selections) <= set(SELECT_ON),
            source,
            "selections",
            f"an object with keys among {list(SELECT_ON)}",
            selections,
        )
        for basis, selection in selections.items():
            _check_selection(selection, source, f"selections.{basis}")
            _check(
                selection.get("selected_on") == basis,
                source,
                f"selections.{basis}.selected_on",
                f'"{basis}"',
                selection.get("selected_on"),
                missing="selected_on" not in selection,
            )
        if best is not None and best.get("selected_on", "test") in selections:
            _check(
                best == selections[best.get("selected_on", "test")],
                source,
                "best",
                f"equal to selections.{best.get('selected_on', 'test')}",
                best,
            )
    for i, segment in enumerate(data["segments"]):
        _check(isinstance(segment, dict), source, f"segments[{i}]", "an object", segment)
        _check_fields(segment, _SEGMENT_FIELDS, source, f"segments[{i}].")
    if data["status"] == "finished":
        _check_fields(data, {"finished": _STR, "total_train_seconds": _NUMBER}, source, "")


def migrate_record(data: Any, source: str = "<record>") -> dict[str, Any]:
    """``data`` brought to :data:`SCHEMA_VERSION` (a new dict; ``data`` is not changed).

    Raises:
        RecordError: ``data`` is not a JSON object, or its ``schema_version`` is newer than this
            dmlnb understands (or not an int).
    """
    _check(isinstance(data, dict), source, "<top level>", "a JSON object", data)
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        _check(False, source, "schema_version", "a non-negative int", version)
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"run record {source} has schema_version {version}, newer than this dmlnb "
            f"({_dmlnb_version()}) reads (up to {SCHEMA_VERSION}): update dmlnb on this machine "
            "to load records written by a newer one"
        )
    out = dict(data)
    if version == 0:
        environment = out.get("environment") if isinstance(out.get("environment"), dict) else {}
        history = out.get("history") if isinstance(out.get("history"), list) else []
        epochs = [row.get("epoch") for row in history if isinstance(row, dict)]
        last = max((e for e in epochs if isinstance(e, int) and not isinstance(e, bool)), default=0)
        out["schema_version"] = 1
        out["migrated_from"] = 0
        if isinstance(
            out.get("environment"), dict
        ):  # v0 checkpoints kept torch.__version__ (a str subclass)
            out["environment"] = {
                k: str(v) if isinstance(v, str) else v for k, v in environment.items()
            }
        out.setdefault(
            "segments",
            [
                {
                    "device": environment.get("device"),
                    "device_name": environment.get("device_name"),
                    "from_epoch": 0,
                    "to_epoch": last,
                    "started": out.get("started"),
                }
            ],
        )
        out.setdefault("device_changed", False)
    config = out.get("config")
    filled = with_added_config_keys(config)
    if filled is not config:
        out["config"] = filled
        spec = out.get("spec")
        if isinstance(spec, dict) and out.get("fingerprint") == run_fingerprint(config, spec):
            out["fingerprint"] = run_fingerprint(filled, spec)  # the same run, keys filled
    return out


def with_added_config_keys(config: Any) -> Any:
    """``config`` with the keys of :data:`CONFIG_KEYS_ADDED` it lacks filled in, when it is a
    :class:`~dmlnb.profiles.TrainConfig`'s dict (it has ``dataset`` and ``seed``); anything else
    is returned as it is. What an older record or stored measurement ran with, in today's keys."""
    if not (isinstance(config, dict) and "dataset" in config and "seed" in config):
        return config
    missing = {k: v for k, v in CONFIG_KEYS_ADDED.items() if k not in config}
    return {**config, **missing} if missing else config


def _dmlnb_version() -> str:
    """This package's version string."""
    import dmlnb

    return str(dmlnb.__version__)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (Path, torch.device, torch.dtype)):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


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
    here = here or Path(__file__).resolve().parent
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
        "dmlnb": _dmlnb_version(),
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
        payload = json.dumps({"config": config, "history": rows}, sort_keys=True, default=_jsonable)
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


def run_fingerprint(config: Any, spec: Any) -> str:
    """16 hex digits identifying a run before it trains: a hash of its resolved configuration
    (a :class:`~dmlnb.profiles.TrainConfig` or its dict) and its method specification ``spec``
    (what the configuration does not say: the loss and its settings, the sampler, the hooks,
    what is stored after training). :mod:`dmlnb.runs` reloads a finished run only when the
    fingerprint of what is asked for equals the one its record was trained under."""
    config = config.to_dict() if hasattr(config, "to_dict") else config
    payload = json.dumps({"config": as_json(config), "spec": as_json(spec)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
