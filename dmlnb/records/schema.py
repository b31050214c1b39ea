"""The run record's schema: its version, the fields every reader relies on
(:func:`validate_record`), the migration of older records (:func:`migrate_record`) and the
configuration keys added since records were first written (:data:`CONFIG_KEYS_ADDED`).
"""

from __future__ import annotations

from typing import Any

from dmlnb.profiles import SELECT_ON
from dmlnb.records.environment import dmlnb_version
from dmlnb.records.fingerprint import run_fingerprint

__all__ = [
    "SCHEMA_VERSION",
    "CONFIG_KEYS_ADDED",
    "RecordError",
    "validate_record",
    "migrate_record",
    "with_added_config_keys",
]


SCHEMA_VERSION = 1

#: TrainConfig keys added after records were first written -> the value runs made before had.
CONFIG_KEYS_ADDED: dict[str, Any] = {
    "compile": False,
    "select_on": "test",
    "betas": (0.9, 0.999),
    "head_lr_scale": 1.0,
    "patience": None,
}


class RecordError(ValueError):
    """A run record that cannot be used: unreadable, of a newer schema, or missing a field."""


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
            f"({dmlnb_version()}) reads (up to {SCHEMA_VERSION}): update dmlnb on this machine "
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
