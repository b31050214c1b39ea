"""The method registry (:mod:`dmlnb.methods`): every hyper-parameter enters the fingerprint, bad
calls are refused with the fix, and each registered method still computes its stored values."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from method_values import EXAMPLE_ARGS, agrees, checked_calls, method_values, stored

from dmlnb.losses import TripletLoss
from dmlnb.methods import (
    CONTEXT,
    call,
    from_spec,
    method,
    register,
    registered,
    unregister,
)
from dmlnb.records import run_fingerprint

CONFIG = {"epochs": 1, "seed": 0}
METHODS = sorted(registered())


def _changed(value: Any) -> Any:
    """Another value of the same kind as ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2.0 + 0.5
    if isinstance(value, str):
        return value + "-other"
    if value is None:
        return 1
    if isinstance(value, list):
        return [*value, 0]
    raise AssertionError(f"no other value for {value!r}")


@pytest.mark.parametrize("name", METHODS)
def test_every_argument_changes_the_fingerprint(name: str) -> None:
    """Each argument given to call() reaches the spec and moves the fingerprint (a factory whose
    argument the registry dropped, or a call() that ignored one, fails here)."""
    base = call(name, **EXAMPLE_ARGS.get(name, {}))
    before = run_fingerprint(CONFIG, {"factory": base.spec})
    assert set(base.spec["args"]) == set(registered()[name].defaults)  # defaults included
    for key, value in base.args.items():
        changed = call(name, **{**base.args, key: _changed(value)})
        assert changed.spec["args"][key] == _changed(value), (name, key)
        assert run_fingerprint(CONFIG, {"factory": changed.spec}) != before, (name, key)


@pytest.mark.parametrize("name", METHODS)
def test_version_enters_the_fingerprint(name: str) -> None:
    spec = call(name, **EXAMPLE_ARGS.get(name, {})).spec
    bumped = {**spec, "version": spec["version"] + 1}
    assert run_fingerprint(CONFIG, {"factory": bumped}) != run_fingerprint(
        CONFIG, {"factory": spec}
    )


CALLS = checked_calls()


@pytest.mark.parametrize("key", sorted(CALLS))
def test_method_call_still_computes_its_stored_values(key: str) -> None:
    """Every method at its defaults and every call a committed record trained."""
    c = CALLS[key]
    old = stored().get(key)
    assert old is not None, (
        f"no stored values for {c}: store them with python tests/method_values.py --update "
        "(a new method or call, or a version bumped)"
    )
    new = method_values(c)
    assert agrees(new, old), (
        f"{c} computes other values than stored ({new} against {old['values']}): bump the "
        f"method's version (register({c.name!r}, ..., version={c.method.version + 1})), then "
        "store its values with python tests/method_values.py --update"
    )


def test_method_values_are_deterministic() -> None:
    c = call("margin")  # samples its negatives: seeded
    assert method_values(c) == method_values(c)


def test_the_values_move_when_a_method_computes_something_else() -> None:
    c = call("contrastive")
    old = {"values": method_values(c)}
    assert agrees(method_values(c), old)
    assert not agrees(method_values(c.replace(neg_margin=1.01)), old)  # forward
    assert not agrees(method_values(c.replace(squared_hinge=True)), old)


def test_stored_values_hold_only_calls_still_checked() -> None:
    assert set(stored()) <= set(CALLS), (
        "remove the values of calls no longer checked: python tests/method_values.py --update"
    )


def test_spec_holds_every_argument_and_builds_what_it_says() -> None:
    c = call("triplet", margin=0.3, mining="hard")
    assert c.spec == {
        "name": "triplet",
        "version": 1,
        "args": {
            "distance": "euclidean",
            "margin": 0.3,
            "mining": "hard",
            "normalize": True,
            "reduction": "nonzero",
        },
    }
    loss = c.build(num_classes=3, embedding_dim=4)
    assert isinstance(loss, TripletLoss) and loss.margin == 0.3 and loss.mining == "hard"
    assert loss.method_spec == c.spec
    assert json.loads(json.dumps(c.spec)) == c.spec
    assert from_spec(c.spec).args == c.args
    assert c.replace(margin=0.5).args["margin"] == 0.5 and c.args["margin"] == 0.3


def test_context_comes_from_the_run_not_the_spec() -> None:
    c = call("soft-triple", centers_per_class=2)
    assert not set(c.spec["args"]) & set(CONTEXT)
    loss = c.build(num_classes=5, embedding_dim=6, centroids=None)
    assert (loss.num_classes, loss.embedding_dim, loss.centers_per_class) == (5, 6, 2)
    with pytest.raises(ValueError, match=r"needs \['embedding_dim'\]"):
        c.build(num_classes=5)
    with pytest.raises(ValueError, match="come from the run"):
        call("soft-triple", num_classes=5)


def test_bad_calls_name_the_fix() -> None:
    with pytest.raises(ValueError, match="unknown method 'tripplet'"):
        call("tripplet")
    with pytest.raises(ValueError, match=r"has no argument \['margn'\]"):
        call("triplet", margn=0.1)
    with pytest.raises(ValueError, match=r"needs \['name'\]"):
        call("easy-positive")
    with pytest.raises(ValueError, match="not JSON"):
        call("triplet", margin=torch.tensor(0.2))
    with pytest.raises(ValueError, match="not a finite number"):
        call("triplet", margin=float("nan"))
    with pytest.raises(ValueError, match="version 1, the spec names version 7"):
        from_spec({**call("triplet").spec, "version": 7})


def test_register_refuses_hidden_arguments_and_taken_names() -> None:
    def hidden(embedding_dim: int, **kwargs: Any) -> None:
        return None

    with pytest.raises(ValueError, match=r"takes \*kwargs"):
        register("test-hidden", hidden)
    with pytest.raises(ValueError, match="registered already"):
        register("triplet", TripletLoss)
    with pytest.raises(ValueError, match="version must be"):
        register("test-version", TripletLoss, version=0)


def test_a_reader_registers_a_method_and_its_arguments_enter_the_spec() -> None:
    @method("test-scaled-triplet", version=2)
    def scaled(*, margin: float = 0.1, scale: float = 2.0) -> TripletLoss:
        """A triplet loss with its margin scaled."""
        return TripletLoss(margin=margin * scale)

    try:
        c = call("test-scaled-triplet", scale=3.0)
        assert c.spec == {
            "name": "test-scaled-triplet",
            "version": 2,
            "args": {"margin": 0.1, "scale": 3.0},
        }
        assert abs(c.build().margin - 0.3) < 1e-12
        assert (
            registered()["test-scaled-triplet"].summary == "A triplet loss with its margin scaled."
        )
    finally:
        unregister("test-scaled-triplet")
    with pytest.raises(ValueError, match="unknown method"):
        call("test-scaled-triplet")
