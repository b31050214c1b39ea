"""One-off migration: give the committed run records the method specifications the chapters now
derive from registered methods (:mod:`dmlnb.methods`), without retraining anything.

    python tools/migrate_factory_specs.py [--check] [RESULTS_DIR]

Until the method registry, a chapter's run specification named its loss by a chapter key
(``{"loss": "contrastive-hard", ...}``) while the loss's settings were typed in code, outside
the fingerprint. Now each chapter adds ``"factory"``: the registered method's name, version and
every argument (:attr:`dmlnb.methods.MethodCall.spec`), built from the same call that builds
the loss. The calls reproduce what each key built before (the same class and arguments; the
tests train each registered method against stored values), so a committed record describes the
run the chapter would train today; this script adds its ``"factory"`` entry and its new
fingerprint (:func:`dmlnb.records.run_fingerprint`), and removes the typed description of the
loss that chapters 02 and 03 kept in it (the method's spec says it now). Every other byte of the
record stays.
A record that already has the entry is left as it is; ``--check`` only counts what it would
change and exits 1 when anything is left to migrate.

It ran once, at commit ada2067, on every committed record. Its mappings from the old keys to
calls use the chapters' functions as they were then (``easy_positive.loss_method``,
``easy_positive.Study``, ``profs.loss_method``), which the chapter layer has since replaced: on
today's records (all migrated) ``--check`` still counts 0, but a record made before that commit
is migrated by running the script from it (``git worktree add /tmp/migrate ada2067``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dmlnb.experiments import discriminative, easy_positive, facility_location, profs, ssdml
from dmlnb.methods import SPEC_KEY, call
from dmlnb.records import RunRecord, read_json, run_fingerprint, write_json_atomic

ROOT = Path(__file__).resolve().parents[1] / "results"


def _easy_positive(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 01: the old specification names the study settings its loss reads."""
    design = SimpleNamespace(
        semihard=spec.get("semihard", easy_positive.Study.semihard),
        triplet_margin=spec.get("triplet_margin"),
        proxy_scale=spec.get("proxy_scale"),
    )
    return easy_positive.loss_method(spec["method"], design).spec  # type: ignore[arg-type]


def _facility_location(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 02: the study's settings the loss reads are in the old specification."""
    study = SimpleNamespace(
        gamma=spec["gamma"],
        refinement=spec.get("refinement"),
        npair_pairs=spec.get("pairs"),
        npair_penalty=spec.get("penalty"),
    )
    return facility_location.loss_method(spec["method"], study).spec  # type: ignore[arg-type]


def _discriminative(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 03: a clustering run's gamma and refinement are in its old ``"loss"`` text
    (:func:`~dmlnb.experiments.discriminative.clustering_implementation`, checked both ways)."""
    if spec["method"] != "clustering":
        return discriminative.loss_method(spec["method"]).spec
    found = re.fullmatch(
        r"FacilityLocationLoss\(margin multiplier ([0-9.]+), 5 PAM passes, "
        r"refinement (\w+)\)",
        spec["loss"],
    )
    if found is None:
        raise ValueError(f"unexpected clustering loss text {spec['loss']!r}")
    gamma, refinement = float(found[1]), found[2]
    if discriminative.clustering_implementation(gamma, refinement) != spec["loss"]:
        raise ValueError(f"{spec['loss']!r} does not round-trip")
    return discriminative.loss_method("clustering", gamma, refinement).spec


def _ssdml(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Chapter 05: the method's settings are under ``"method"`` (its mining only when not the
    paper's, the baselines' arguments under ``"hyper"``)."""
    m = spec["method"]
    setting = SimpleNamespace(
        metric_dim=m["metric_dim"],
        alpha=m.get("alpha", 40.0),
        k=m.get("k"),
        gamma=m.get("gamma"),
        propagation=m.get("propagation", "one-sided"),
        negatives=m.get("negatives", "neighbourhood"),
        baseline_hyper={m["method"]: m.get("hyper", {})},
    )
    return ssdml.objective_method(m["method"], setting, m.get("alpha")).spec  # type: ignore[arg-type]


#: Per chapter folder: the method spec of a record's old specification.
FACTORIES: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "00_protocol": lambda spec: call("normalized-softmax", temperature=spec["temperature"]).spec,
    "01_easy_positive": _easy_positive,
    "02_facility_location": _facility_location,
    "03_discriminative": _discriminative,
    "04_profs": lambda spec: profs.loss_method(spec["loss"]).spec,
    "05_ssdml": _ssdml,
}


#: Chapters whose old specification described the loss in typed words (``"loss"``); the method's
#: spec says it now, so the words leave the fingerprint (a reworded description no longer
#: retrains a run).
TYPED_DESCRIPTIONS = ("02_facility_location", "03_discriminative")


def _typed(chapter: str, spec: Mapping[str, Any]) -> bool:
    """Whether ``spec`` still holds a typed description of its loss (the method spec says it)."""
    return chapter in TYPED_DESCRIPTIONS and "loss" in spec


def migrate(root: Path, write: bool = True) -> dict[str, int]:
    """Add the ``"factory"`` entry to every record under ``root/<chapter>/`` of
    :data:`FACTORIES` that lacks one, and drop the typed descriptions of
    :data:`TYPED_DESCRIPTIONS`; returns how many records each chapter changed."""
    changed: dict[str, int] = {}
    for chapter, factory in FACTORIES.items():
        changed[chapter] = 0
        for path in sorted((root / chapter).glob("*/*/record.json")):
            data = read_json(path)
            spec = data.get("spec")
            if spec is None or (SPEC_KEY in spec and not _typed(chapter, spec)):
                continue
            if SPEC_KEY not in spec:
                spec = {**spec, SPEC_KEY: factory(spec)}
            data["spec"] = {
                k: v for k, v in spec.items() if not (k == "loss" and _typed(chapter, spec))
            }
            data["fingerprint"] = run_fingerprint(RunRecord.load(path).config, data["spec"])
            changed[chapter] += 1
            if write:
                write_json_atomic(path, data)
    return changed


#: Stored results (not run records) keyed by a chapter's settings that now name the method too:
#: ``(glob under the results folder, where the settings sit in the file, the method's spec)``.
STORED_RESULTS: tuple[tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], dict]], ...] = (
    (
        "01_easy_positive/*/diagnostics/EPHN-n*-drop-rule.json",
        (),
        lambda _: easy_positive.loss_method("EPHN").spec,
    ),
    (
        "04_profs/*/step-times-*/measurement.json",
        ("settings",),
        lambda settings: profs.loss_method(settings["loss"]).spec,
    ),
)


def migrate_stored(root: Path, write: bool = True) -> int:
    """Add the method's ``"factory"`` spec to the settings of the stored results of
    :data:`STORED_RESULTS` that lack it; returns how many files changed."""
    changed = 0
    for pattern, where, factory in STORED_RESULTS:
        for path in sorted(root.glob(pattern)):
            data = read_json(path)
            settings = data
            for k in where:
                settings = settings[k]
            if SPEC_KEY in settings:
                continue
            settings[SPEC_KEY] = factory(settings)
            changed += 1
            if write:
                write_json_atomic(path, data)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", type=Path, default=ROOT, help="the results folder")
    parser.add_argument("--check", action="store_true", help="count, write nothing")
    args = parser.parse_args(argv)
    changed = migrate(args.results, write=not args.check)
    for chapter, count in changed.items():
        print(f"{chapter}: {count} records {'to migrate' if args.check else 'migrated'}")
    stored = migrate_stored(args.results, write=not args.check)
    print(f"stored results: {stored} {'to migrate' if args.check else 'migrated'}")
    return 1 if args.check and (any(changed.values()) or stored) else 0


if __name__ == "__main__":
    sys.exit(main())
