"""What one value may be (:class:`Rule`): a declarative rule that checks and normalises a config
key or a notebook parameter and says in its errors what is allowed."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Rule"]

_KIND_NAMES = {
    "int": "an int",
    "float": "a number",
    "str": "a string",
    "bool": "True or False",
    "dict": "a dict",
    "path": "a path (str)",
    "seq": "a list",
    "holdout": "True / False, a fraction of the training classes in (0, 1) or a class count >= 1",
}
_PLURAL = {"int": "ints", "float": "numbers", "str": "strings"}


@dataclass(frozen=True)
class Rule:
    """What one value may be.

    Attributes:
        kind: ``"int"``, ``"float"`` (ints accepted, returned as float; must be finite), ``"str"``,
            ``"bool"``, ``"dict"``, ``"path"`` (a non-empty str or ``os.PathLike``), ``"seq"``
            (a list or tuple, returned as a tuple, each element checked by ``item``) or
            ``"holdout"`` (validation classes: a bool, a float fraction in ``(0, 1)`` or an int
            count ``>= 1``, returned as given; :mod:`dmlnb.experiments.settings`).
        low, high: inclusive bounds of a number; ``above`` / ``below`` make them strict.
        choices: the allowed strings, or a function returning them (for registries filled on
            import).
        item: the rule of each element of a ``"seq"``.
        optional: ``None`` is allowed.
        nonempty, distinct: for a ``"seq"``.
        test: an extra ``(predicate, description)`` for what bounds cannot say (of a ``"seq"``:
            on the whole tuple, e.g. its length).
        example: shown in the message, e.g. ``"[0, 1, 2]"``.
    """

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False
    choices: tuple[str, ...] | Callable[[], Sequence[str]] | None = None
    item: "Rule | None" = None
    optional: bool = False
    nonempty: bool = False
    distinct: bool = False
    test: tuple[Callable[[Any], bool], str] | None = None
    example: str = ""

    def allowed(self, plural: bool = False) -> str:
        """What the rule allows, in words: ``"None or an int >= 1"``."""
        if self.kind == "seq":
            item = self.item.allowed(plural=True) if self.item is not None else "values"
            words = "non-empty " * self.nonempty + "distinct " * self.distinct
            text = f"a {words}list of {item}" + (
                f" ({self.test[1]})" if self.test is not None else ""
            )
        elif self.choices is not None:
            text = f"{'names from' if plural else 'one of'} {list(self._choices())}"
        else:
            text = _PLURAL.get(self.kind, self.kind) if plural else _KIND_NAMES[self.kind]
            if self.low is not None:
                text += f" {'>' if self.above else '>='} {self.low:g}"
            if self.high is not None:
                text += (
                    f"{' and' if self.low is not None else ''} {'<' if self.below else '<='} "
                    f"{self.high:g}"
                )
            if self.test is not None:
                text += f" ({self.test[1]})"
        if self.optional:
            text = "None or " + text
        return text + (f", e.g. {self.example}" if self.example and not plural else "")

    def _choices(self) -> Sequence[str]:
        return self.choices() if callable(self.choices) else self.choices  # type: ignore[return-value]

    def _type_ok(self, value: Any) -> bool:
        if self.kind == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        if self.kind == "float":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind == "path":
            return isinstance(value, (str, os.PathLike))
        if self.kind == "seq":
            return isinstance(value, (list, tuple))
        if self.kind == "holdout":
            return isinstance(value, (bool, int, float))
        return isinstance(value, {"str": str, "bool": bool, "dict": Mapping}[self.kind])

    def _range_ok(self, value: Any) -> bool:
        if self.kind == "holdout":
            return isinstance(value, bool) or (
                value >= 1 if isinstance(value, int) else 0.0 < value < 1.0
            )
        if self.kind == "float" and not math.isfinite(value):
            return False
        if self.kind == "path" and not str(value):
            return False
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.below else value > self.high):
            return False
        return self.test is None or self.test[0](value)

    def check(self, kind: str, name: str, value: Any) -> Any:
        """``value`` of ``name`` validated and normalised (float, tuple, dict).

        Args:
            kind: what ``name`` is, for the message: ``"config key"``, ``"notebook parameter"``.
            name: e.g. ``"epochs"``; ``"eval_ks[0]"`` for an element of a list.

        Raises:
            TypeError: the wrong type; ValueError: the right type out of range. Both name
            ``kind name``, the value and what is allowed.
        """
        what = f"{kind} {name!r}"
        if value is None and self.optional:
            return None
        if not self._type_ok(value):
            got = f"{type(value).__name__} {value!r}"
            raise TypeError(
                f"{what} must be {self.allowed()}; got {got}{self._hint(kind, name, value)}"
            )
        if self.kind == "seq":
            items = tuple(value)
            if self.item is not None:
                try:
                    items = tuple(
                        self.item.check(kind, f"{name}[{i}]", v) for i, v in enumerate(value)
                    )
                except (TypeError, ValueError) as err:  # name the whole list, too
                    raise type(err)(f"{err} (in {what} = {value!r}: {self.allowed()})") from None
            if self.nonempty and not items:
                raise ValueError(
                    f"{what} must be {self.allowed()}; got an empty {type(value).__name__}"
                )
            if self.distinct and len(set(items)) < len(items):
                raise ValueError(f"{what} must be {self.allowed()}; got repeats in {value!r}")
            if self.test is not None and not self.test[0](items):
                raise ValueError(f"{what} must be {self.allowed()}; got {value!r}")
            return items
        if self.kind == "dict":
            return dict(value)
        if self.choices is not None and value not in self._choices():
            raise ValueError(
                f"unknown {name.split('[')[0]} {value!r} ({what}); choose one of "
                f"{list(self._choices())}"
            )
        if not self._range_ok(value):
            raise ValueError(f"{what} must be {self.allowed()}; got {value!r}")
        return float(value) if self.kind == "float" else value

    def _hint(self, kind: str, name: str, value: Any) -> str:
        """For papermill: ``-p`` passes a number or a word; lists and dicts need ``-y``."""
        if (
            kind == "notebook parameter"
            and self.kind in ("seq", "dict")
            and isinstance(value, (str, int, float))
        ):
            example = self.example or ("[...]" if self.kind == "seq" else "{...}")
            return f" (with papermill pass lists and dicts as YAML: -y '{name}: {example}')"
        return ""
