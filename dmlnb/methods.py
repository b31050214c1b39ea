"""Methods as registered factories, and run specifications derived from them.

A *method* is a named factory: a class or function whose keyword arguments are the method's
hyper-parameters. :func:`register` adds one to the registry; :func:`call` binds it to values and
gives a :class:`MethodCall`, whose :attr:`~MethodCall.spec` (name, version and *every* argument,
defaults included) enters the run's fingerprint (:func:`dmlnb.records.run_fingerprint`). So a
changed hyper-parameter always changes the fingerprint and the run trains again instead of
reloading an old record: nothing about a method is typed twice.

A factory's parameters named in :data:`CONTEXT` (``num_classes``, ``embedding_dim``,
``centroids``) are not hyper-parameters: the run supplies them from its data and configuration
(which the configuration half of the fingerprint already covers), through
:meth:`MethodCall.build`. Every other parameter is a hyper-parameter and must have a JSON-able
value.

A method carries a ``version``: the test suite trains every registered method for a few steps
on a fabricated batch and compares its losses with stored values
(``tests/data/method_values.json``); when a code change moves them, the test asks to bump the
method's version, which changes the fingerprint of every run that uses it.

Example::

    loss_call = call("triplet", margin=0.2, mining="semihard")
    loss_call.spec   # {"name": "triplet", "version": 1, "args": {"margin": 0.2, ...all args}}
    loss = loss_call.build(num_classes=100, embedding_dim=64)

Every loss class of :mod:`dmlnb.losses` is registered here, as it is: its constructor's
arguments are the method's hyper-parameters (where a constructor takes an object, e.g. a miner,
a small factory beside the class exposes the choice as a plain argument instead):

==========================  ==========================================================
method                      factory
==========================  ==========================================================
``"contrastive"``           :class:`~dmlnb.losses.ContrastiveLoss`
``"triplet"``               :class:`~dmlnb.losses.TripletLoss`
``"lifted"``                :class:`~dmlnb.losses.LiftedStructureLoss`
``"npair"``                 :class:`~dmlnb.losses.NPairLoss`
``"angular"``               :class:`~dmlnb.losses.AngularLoss`
``"margin"``                :func:`margin_loss` (:class:`~dmlnb.losses.MarginLoss`)
``"multi-similarity"``      :class:`~dmlnb.losses.MultiSimilarityLoss`
``"soft-triple"``           :class:`~dmlnb.losses.SoftTripleLoss`
``"proxy-nca"``             :class:`~dmlnb.losses.ProxyNCALoss`
``"normalized-softmax"``    :class:`~dmlnb.losses.NormalizedSoftmaxLoss`
``"easy-positive"``         :func:`~dmlnb.losses.easy_positive_loss` (the paper's variants)
``"facility-location"``     :class:`~dmlnb.losses.FacilityLocationLoss`
``"discriminative"``        :class:`~dmlnb.losses.DiscriminativeLoss` (centroids from the run)
==========================  ==========================================================

A reader registers a new
one the same way (``register("my-loss", MyLoss)``) and names it in a chapter.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dmlnb.losses.angular import AngularLoss
from dmlnb.losses.contrastive import ContrastiveLoss
from dmlnb.losses.discriminative import DiscriminativeLoss
from dmlnb.losses.easy_positive import easy_positive_loss
from dmlnb.losses.facility_location import FacilityLocationLoss
from dmlnb.losses.lifted import LiftedStructureLoss
from dmlnb.losses.margin import margin_loss
from dmlnb.losses.multi_similarity import MultiSimilarityLoss
from dmlnb.losses.npair import NPairLoss
from dmlnb.losses.proxy_nca import ProxyNCALoss
from dmlnb.losses.soft_triple import SoftTripleLoss
from dmlnb.losses.softmax import NormalizedSoftmaxLoss
from dmlnb.losses.triplet import TripletLoss

__all__ = [
    "CONTEXT",
    "Method",
    "MethodCall",
    "register",
    "call",
    "registered",
    "unregister",
    "method",
    "from_spec",
    "check_built",
    "SPEC_KEY",
]

#: Factory parameters that the run supplies (from its data and configuration) rather than the
#: method's hyper-parameters: they are not part of :attr:`MethodCall.spec`.
CONTEXT: tuple[str, ...] = ("num_classes", "embedding_dim", "centroids")

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Method:
    """A registered method: its ``name``, ``factory``, ``version``, the ``context`` parameters
    the run supplies, and every hyper-parameter with its default (``defaults``; a required one
    maps to :data:`inspect.Parameter.empty`)."""

    name: str
    factory: Callable[..., Any]
    version: int
    context: tuple[str, ...]
    defaults: Mapping[str, Any] = field(repr=False)

    @property
    def summary(self) -> str:
        """The first line of the factory's docstring."""
        doc = inspect.getdoc(self.factory) or ""
        return doc.splitlines()[0] if doc else ""


_REGISTRY: dict[str, Method] = {}


def _parameters(factory: Callable[..., Any]) -> list[inspect.Parameter]:
    target = factory.__init__ if inspect.isclass(factory) else factory  # type: ignore[misc]
    params = list(inspect.signature(target).parameters.values())
    return params[1:] if inspect.isclass(factory) else params  # drop ``self``


def register(
    name: str, factory: Callable[..., Any], *, version: int = 1, replace: bool = False
) -> Method:
    """Register ``factory`` (a class or function) as the method ``name``.

    Its parameters named in :data:`CONTEXT` are supplied by the run; every other one is a
    hyper-parameter. ``*args``/``**kwargs`` are refused: a hyper-parameter the registry cannot
    see could not enter the fingerprint.

    Raises:
        ValueError: ``name`` is taken (pass ``replace=True`` to redefine it, e.g. in a
            notebook, with a higher ``version``: other code under the same name and version
            would reload the runs of the old code), ``version`` < 1, or the factory takes
            ``*args``/``**kwargs``.
    """
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be an int >= 1, got {version!r}")
    old = _REGISTRY.get(name)
    if old is not None and not replace:
        raise ValueError(
            f"method {name!r} is registered already ({old.factory!r}); "
            "choose another name or pass replace=True with a higher version"
        )
    if old is not None and old.factory is not factory and version <= old.version:
        raise ValueError(
            f"method {name!r} is replaced by other code at version {version}, not above its "
            f"version {old.version}: the runs of the old code would reload; pass "
            f"version={old.version + 1}"
        )
    context: list[str] = []
    defaults: dict[str, Any] = {}
    for p in _parameters(factory):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(
                f"{factory!r} takes *{p.name}: list every hyper-parameter of method "
                f"{name!r} as a named parameter, so each enters the fingerprint"
            )
        if p.name in CONTEXT:
            context.append(p.name)
        else:
            defaults[p.name] = p.default
    _REGISTRY[name] = Method(name, factory, version, tuple(context), defaults)
    return _REGISTRY[name]


def method(name: str, *, version: int = 1) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator form of :func:`register`: ``@method("my-loss")`` over a class or function."""

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        register(name, factory, version=version)
        return factory

    return decorate


def unregister(name: str) -> None:
    """Remove the method ``name`` from the registry (a notebook's or a test's own method).

    Raises:
        ValueError: no method ``name`` is registered.
    """
    _lookup(name)
    del _REGISTRY[name]


def registered() -> dict[str, Method]:
    """Every registered method by name: the library's losses and any a reader registered."""
    return dict(_REGISTRY)


def _lookup(name: str) -> Method:
    methods = registered()
    if name not in methods:
        raise ValueError(
            f"unknown method {name!r}; choose one of {sorted(methods)} or register it with "
            "dmlnb.methods.register (a package's own methods are registered when it is "
            "imported: import dmlnb.ssdml for the SSDML objectives)"
        )
    return methods[name]


def _as_default(name: str, key: str, value: Any, default: Any) -> Any:
    """``value`` in the type of its ``default`` where that is a number: an ``int`` given for a
    ``float`` default becomes a ``float`` (``10`` and ``10.0`` are one run, not two
    fingerprints), and a ``bool`` for a number is refused."""
    numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
    if numeric and isinstance(value, bool):
        raise ValueError(f"method {name!r}: argument {key}={value!r} is a bool; pass a number")
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _check_json(name: str, key: str, value: Any) -> Any:
    """``value`` as the fingerprint stores it (tuples as lists), or an error naming the
    argument: a value that JSON cannot hold exactly could not tell two runs apart."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"method {name!r}: argument {key}={value!r} is not a finite number")
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(
            f"method {name!r}: argument {key}={value!r} ({type(value).__name__}) is "
            "not JSON (numbers, strings, booleans, None, lists, dicts): pass a "
            "plain value, and build tensors inside the factory"
        ) from None
    return json.loads(text)


@dataclass(frozen=True)
class MethodCall:
    """A method bound to every hyper-parameter's value (``args``, defaults included)."""

    method: Method
    args: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.method.name

    @property
    def spec(self) -> dict[str, Any]:
        """``{"name", "version", "args"}``: what the run's specification stores of the method
        (JSON; the args sorted by name)."""
        return {
            "name": self.method.name,
            "version": self.method.version,
            "args": {k: self.args[k] for k in sorted(self.args)},
        }

    def replace(self, **changes: Any) -> MethodCall:
        """The same method with some hyper-parameters changed."""
        return call(self.method.name, **{**self.args, **changes})

    def build(self, **context: Any) -> Any:
        """The factory called with the run's ``context`` (the method's :data:`CONTEXT`
        parameters; others given are ignored) and the hyper-parameters. A module it returns is
        tagged with :attr:`spec` (``method_spec``), which :func:`dmlnb.training.train` checks
        against the run's specification.

        Raises:
            ValueError: a context parameter the method needs is missing.
        """
        missing = [c for c in self.method.context if c not in context]
        if missing:
            raise ValueError(
                f"method {self.name!r} needs {missing} from the run; pass them to build()"
            )
        built = self.method.factory(**{c: context[c] for c in self.method.context}, **self.args)
        try:
            built.method_spec = self.spec
        except AttributeError:  # a factory result that takes no attributes is returned untagged
            pass
        return built

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.args.items()))
        return f"{self.method.name}({args})"


def call(name: str, /, **args: Any) -> MethodCall:
    """The registered method ``name`` with ``args``; every hyper-parameter not given takes its
    default.

    Raises:
        ValueError: an unknown method or argument, a required argument missing, a context
            parameter given as a hyper-parameter, or a value JSON cannot hold.
    """
    m = _lookup(name)
    unknown = sorted(set(args) - set(m.defaults))
    if unknown:
        given_context = [k for k in unknown if k in CONTEXT]
        if given_context:
            raise ValueError(
                f"method {name!r}: {given_context} come from the run, not the call; "
                "pass them to MethodCall.build()"
            )
        raise ValueError(
            f"method {name!r} has no argument {unknown}; its arguments are {sorted(m.defaults)}"
        )
    bound = {k: args.get(k, default) for k, default in m.defaults.items()}
    missing = sorted(k for k, v in bound.items() if v is _REQUIRED)
    if missing:
        raise ValueError(f"method {name!r} needs {missing}: pass them to call()")
    bound = {k: _as_default(name, k, v, m.defaults[k]) for k, v in bound.items()}
    return MethodCall(m, {k: _check_json(name, k, v) for k, v in bound.items()})


#: The key of a run's specification that holds its method's :attr:`MethodCall.spec`.
SPEC_KEY = "factory"


def check_built(loss: Any, run_spec: Mapping[str, Any] | None) -> None:
    """When the run's specification names a method (``run_spec["factory"]``), check that
    ``loss`` or a module inside it (a wrapper's) was built by that very call
    (:meth:`MethodCall.build` tags it): the loss that trains is the one the fingerprint names.

    Raises:
        ValueError: no module of ``loss`` was built by the named method call.
    """
    wanted = (run_spec or {}).get(SPEC_KEY)
    if wanted is None:
        return
    modules = loss.modules() if hasattr(loss, "modules") else [loss]
    built = [getattr(m, "method_spec", None) for m in modules]
    if wanted not in built:
        found = [b for b in built if b is not None]
        raise ValueError(
            f"the run's specification names method {wanted} but the loss was built by "
            f"{found or 'no registered method'}: build it with "
            "dmlnb.methods.from_spec(spec['factory']).build(...)"
        )


def from_spec(spec: Mapping[str, Any]) -> MethodCall:
    """The :class:`MethodCall` a stored ``spec`` (:attr:`MethodCall.spec`) describes.

    Raises:
        ValueError: the method is unknown, or its version is not the registered one (the code
            moved since: the run would not compute what was stored).
    """
    made = call(spec["name"], **spec["args"])
    if made.method.version != spec["version"]:
        raise ValueError(
            f"method {spec['name']!r} is at version {made.method.version}, the spec "
            f"names version {spec['version']}: its code changed since"
        )
    return made


# The library's losses (see the module docstring).
register("contrastive", ContrastiveLoss)
register("triplet", TripletLoss)
register("lifted", LiftedStructureLoss)
register("npair", NPairLoss)
register("angular", AngularLoss)
register("margin", margin_loss)
register("multi-similarity", MultiSimilarityLoss)
register("soft-triple", SoftTripleLoss)
register("proxy-nca", ProxyNCALoss)
register("normalized-softmax", NormalizedSoftmaxLoss)
register("easy-positive", easy_positive_loss)
register("facility-location", FacilityLocationLoss)
register("discriminative", DiscriminativeLoss)
