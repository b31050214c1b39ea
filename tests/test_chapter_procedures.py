"""Every procedure a chapter declares (:class:`dmlnb.chapter.Procedure` subclasses of the
chapter modules) puts every one of its fields into its runs' fingerprints (its seed-dependent
entries included, at the procedure's ``EXAMPLE_SEED``): a reader who changes one trains those
runs again, never reloads a record made with the old value. A field of ``NAME_FIELDS`` names the
run's folder only and is exempt."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from typing import Any

import pytest

import dmlnb.experiments
from dmlnb.chapter import Procedure, run_spec
from dmlnb.methods import MethodCall, call, registered
from dmlnb.profiles import make_config
from dmlnb.records import run_fingerprint


def _chapter_procedures() -> list[type[Procedure]]:
    for info in pkgutil.walk_packages(dmlnb.experiments.__path__, "dmlnb.experiments."):
        importlib.import_module(info.name)
    found, todo = [], list(Procedure.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("dmlnb.experiments"):
            found.append(cls)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


PROCEDURES = _chapter_procedures()


def _others(value: Any) -> list[Any]:
    """Other values of a field's type to try, in order."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value * 2, max(value - 1, 0)]
    if isinstance(value, float):
        return [value * 2 + 0.5, value / 2, 0.0]
    if isinstance(value, str):
        return [value + "x", ""]
    if value is None:
        return [1, 0.5, "x", True]
    if isinstance(value, tuple):
        return [value[:-1], (*value, *value[-1:])] if value else [(1,)]
    return []


def _literals(hint: Any) -> list[Any]:
    """The values of a ``Literal[...]`` type hint (also inside ``Optional``), else none."""
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return [v for arg in typing.get_args(hint) for v in _literals(arg)]


def _call_for(procedure: Procedure, label: str) -> MethodCall:
    """A registered method's default call the procedure accepts."""
    for name in registered():
        try:
            c = call(name)
            procedure.spec_entries(label, c)
            return c
        except (KeyError, ValueError, TypeError):
            continue
    raise AssertionError(f"{type(procedure).__name__}.spec_entries accepts no registered method")


def test_the_chapters_declare_procedures() -> None:
    assert PROCEDURES, "no chapter declares a Procedure"


@pytest.mark.parametrize("cls", PROCEDURES, ids=lambda c: c.__qualname__)
def test_a_name_field_changes_only_the_folder(cls: type[Procedure]) -> None:
    base = cls(**cls.EXAMPLE_FIELDS)
    assert set(cls.NAME_FIELDS) <= {f.name for f in dataclasses.fields(cls)}
    label, seed = cls.EXAMPLE_LABEL, cls.EXAMPLE_SEED
    c = _call_for(base, label)
    for name in cls.NAME_FIELDS:
        changed = dataclasses.replace(base, **{name: _others(getattr(base, name))[0]})
        assert run_spec(c, changed, label, seed) == run_spec(c, base, label, seed)
        assert changed.run_name(label, seed, ()) != base.run_name(label, seed, ())


@pytest.mark.parametrize("cls", PROCEDURES, ids=lambda c: c.__qualname__)
def test_every_field_of_a_chapter_procedure_enters_the_fingerprint(cls: type[Procedure]) -> None:
    fields = dataclasses.fields(cls)
    missing = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    assert not missing, f"{cls.__qualname__}: give every field a default ({missing})"
    base = cls(**cls.EXAMPLE_FIELDS)
    label, config = cls.EXAMPLE_LABEL, make_config("smoke")
    c = _call_for(base, label)
    seed = cls.EXAMPLE_SEED
    fingerprint = run_fingerprint(config, run_spec(c, base, label, seed))
    hints = typing.get_type_hints(cls)
    for f in [f for f in fields if f.name not in cls.NAME_FIELDS]:
        tried, now = [], getattr(base, f.name)
        named = [*cls.FIELD_CHOICES.get(f.name, ()), *_literals(hints.get(f.name))]
        for value in [v for v in named if v != now] + _others(now):
            try:
                changed = dataclasses.replace(base, **{f.name: value})
                spec = run_spec(c, changed, label, seed)
            except (ValueError, TypeError, KeyError) as err:  # a value the procedure refuses
                tried.append(f"{value!r}: {err}")
                continue
            assert run_fingerprint(config, spec) != fingerprint, (
                f"{cls.__qualname__}.{f.name} = {value!r} leaves the fingerprint unchanged: "
                "put the field into spec_entries"
            )
            break
        else:
            pytest.fail(f"{cls.__qualname__}.{f.name}: no other value to try ({tried})")
