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

from dmlnb.records.environment import GIT_CHANGED_LISTED as GIT_CHANGED_LISTED
from dmlnb.records.environment import GIT_SCOPE, environment_info, git_state, package_changed
from dmlnb.records.files import as_json, atomic_torch_save, read_json, write_json_atomic
from dmlnb.records.files import write_text_atomic as write_text_atomic
from dmlnb.records.fingerprint import run_fingerprint
from dmlnb.records.run_record import RunRecord, utc_now
from dmlnb.records.schema import (
    CONFIG_KEYS_ADDED,
    SCHEMA_VERSION,
    RecordError,
    migrate_record,
    validate_record,
    with_added_config_keys,
)

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
