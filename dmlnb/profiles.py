"""Profiles: one experiment, three scales.

* ``smoke`` — seconds on a 2-core CPU, on data bundled with scikit-learn (``digits``); what CI runs.
* ``default`` — real data small enough for a CPU in minutes (Omniglot's minimal splits); what the
  book shows.
* ``paper`` — the paper's dataset, backbone, embedding size and schedule; needs a GPU.

A profile is a set of :class:`TrainConfig` field values. Notebooks layer their own presets on top
(``presets={"paper": {"dataset": "cars196"}}``) and a reader's overrides on top of that;
:func:`make_config` validates every key, type and range (:data:`CONFIG_RULES`), so a typo fails
loudly instead of being ignored; :func:`check_parameters` does the same for a notebook's parameters.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PROFILE_ENV",
    "TrainConfig",
    "PROFILES",
    "make_config",
    "available_profiles",
    "resolve_profile",
    "Rule",
    "CONFIG_RULES",
    "PARAMETER_RULES",
    "MODELS",
    "OPTIMIZERS",
    "SELECT_ON",
    "check_parameters",
    "evaluation_names",
]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (the run record stores it verbatim)."""

    # data
    dataset: str = "digits"
    dataset_options: dict = field(default_factory=dict)
    # model
    model: str = "convnet"
    pretrained: bool = False
    embedding_dim: int = 64
    normalize: bool = True
    width: int = 64
    # batches
    batch_size: int = 128
    m_per_class: int = 8
    steps_per_epoch: int | None = None
    # optimisation
    epochs: int = 10
    optimizer: str = "adam"
    lr: float = 1e-3
    loss_lr: float | None = None
    #: The learning rate of the embedding head (``model.head``, the layer put on the trunk) as a
    #: multiple of ``lr`` (PROFS Sec. 5.2 trains its new FC layer at 10x the pretrained trunk's);
    #: 1 trains every model parameter at ``lr``.
    head_lr_scale: float = 1.0
    weight_decay: float = 0.0
    momentum: float = 0.9
    #: Adam's and AdamW's ``(beta1, beta2)`` (torch's default; SGD and RMSprop ignore them).
    betas: tuple = (0.9, 0.999)
    lr_milestones: tuple = ()
    lr_gamma: float = 0.1
    grad_clip: float | None = None
    # evaluation
    eval_every: int = 1
    eval_ks: tuple = (1, 2, 4, 8)
    eval_metrics: tuple = ("recall", "nmi", "f1", "map_at_r")
    select_metric: str = "R@1"
    #: Where the best epoch is chosen: ``"test"``, the papers' protocol (the best epoch on the
    #: test classes, an optimistic estimate), or ``"validation"``, on the validation classes held
    #: out of training (``dataset_options={"validation": 0.2}``; Musgrave et al. 2020), the test
    #: classes then measured at that epoch. Either way a run with a validation split records both
    #: selections (:mod:`dmlnb.selection`).
    select_on: str = "test"
    eval_batch_size: int = 512
    # execution
    seed: int = 0
    device: str = "auto"
    amp: bool = True
    channels_last: bool = True
    num_workers: int = 0
    #: ``torch.compile`` the model for training on CUDA (ignored on the CPU); the first steps
    #: then include the compilation (tens of seconds for a ResNet-50).
    compile: bool = False

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes`` applied and validated."""
        return make_config(None, changes, base=self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: The environment variable that overrides a notebook's ``profile`` parameter
#: (:func:`resolve_profile`).
PROFILE_ENV = "DMLNB_PROFILE"

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        dataset="digits",
        model="convnet",
        width=16,
        embedding_dim=16,
        batch_size=24,
        m_per_class=8,
        steps_per_epoch=6,
        epochs=2,
        lr=3e-3,
    ),
    "default": dict(
        dataset="omniglot-small",
        dataset_options={"image_size": 28},
        model="convnet",
        embedding_dim=64,
        batch_size=128,
        m_per_class=8,
        epochs=15,
        lr=1e-3,
        # on a 2-core CPU a forward pass of 128 test images runs faster per image than one of 512
        # (the small network's activations stay in cache)
        eval_batch_size=128,
    ),
    "paper": dict(
        dataset="cub200",
        dataset_options={"image_size": 224},
        model="resnet50",
        pretrained=True,
        embedding_dim=512,
        batch_size=128,
        m_per_class=4,
        epochs=100,
        lr=1e-5,
        weight_decay=1e-4,
        num_workers=8,
        eval_every=5,
    ),
}


def available_profiles() -> list[str]:
    return list(PROFILES)


# ----------------------------------------------------------------------------------------------
# What a value may be: one declarative rule per config key and per notebook parameter
# ----------------------------------------------------------------------------------------------

#: Networks :func:`dmlnb.models.build_model` builds (:func:`dmlnb.models.available_models`).
MODELS = ("convnet", "ssdml-mnist", "ssdml-cifar", "googlenet", "resnet18", "resnet50", "vgg16")

#: Optimisers :func:`dmlnb.training.build_optimizer` builds.
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")

#: Where :class:`TrainConfig.select_on` chooses the best epoch: on the validation classes, or on
#: the test classes (the papers' protocol, optimistic).
SELECT_ON = ("validation", "test")

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


def _count(low: int = 1, **kw: Any) -> Rule:
    return Rule("int", low=low, **kw)


def _number(low: float = 0.0, above: bool = False, **kw: Any) -> Rule:
    return Rule("float", low=low, above=above, **kw)


def _datasets() -> list[str]:
    from dmlnb.data import available_datasets

    return available_datasets()


def _metric_names() -> tuple[str, ...]:
    from dmlnb.evaluation import METRIC_NAMES

    return METRIC_NAMES


def _milestone(value: float) -> bool:
    return value < 1 or float(value).is_integer()


def _device(name: str) -> bool:
    return re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", name) is not None


#: The rule of every :class:`TrainConfig` field (:func:`make_config` applies them).
CONFIG_RULES: dict[str, Rule] = {
    "dataset": Rule("str", choices=_datasets),
    "dataset_options": Rule("dict", example='{"image_size": 224}'),
    "model": Rule("str", choices=MODELS),
    "pretrained": Rule("bool"),
    "embedding_dim": _count(),
    "normalize": Rule("bool"),
    "width": _count(),
    "batch_size": _count(2),
    "m_per_class": _count(),
    "steps_per_epoch": _count(optional=True),
    "epochs": _count(),
    "optimizer": Rule("str", choices=OPTIMIZERS),
    "lr": _number(),
    "loss_lr": _number(optional=True),
    "head_lr_scale": _number(above=True),
    "weight_decay": _number(),
    "momentum": _number(high=1.0, below=True),
    "betas": Rule(
        "seq",
        item=_number(high=1.0, below=True),
        test=(lambda b: len(b) == 2, "two of them: (beta1, beta2)"),
        example="(0.9, 0.99)",
    ),
    "lr_milestones": Rule(
        "seq",
        item=_number(above=True, test=(_milestone, "fractions of the run < 1 or whole epochs")),
        example="(0.5, 0.75) or (20, 30)",
    ),
    "lr_gamma": _number(above=True),
    "grad_clip": _number(above=True, optional=True),
    "eval_every": _count(),
    "eval_ks": Rule("seq", item=_count(), distinct=True, example="(1, 2, 4, 8)"),
    "eval_metrics": Rule(
        "seq", item=Rule("str", choices=_metric_names), distinct=True, example='("recall", "nmi")'
    ),
    "select_metric": Rule("str", example='"R@1", "NMI", "F1" or "MAP@R"'),
    "select_on": Rule("str", choices=SELECT_ON),
    "eval_batch_size": _count(),
    "seed": _count(0),
    "device": Rule("str", test=(_device, '"auto", "cpu", "cuda", "cuda:N" or "mps"')),
    "amp": Rule("bool"),
    "channels_last": Rule("bool"),
    "compile": Rule("bool"),
    "num_workers": _count(0),
}


def _grid(item: Rule, example: str) -> Rule:
    """None (the profile's grid) or a non-empty list of distinct values."""
    return Rule("seq", item=item, optional=True, nonempty=True, distinct=True, example=example)


_SEEDS = _grid(_count(0), "[0, 1, 2]")

#: The rule of every notebook parameter (:func:`check_parameters` applies them; ``overrides``
#: is also checked key by key against :data:`CONFIG_RULES`).
PARAMETER_RULES: dict[str, Rule] = {
    "profile": Rule("str", choices=tuple(PROFILES)),
    "overrides": Rule("dict", example='{"epochs": 3}'),
    "methods": Rule("dict", example='{"clustering": {"pam_passes": 3}}'),
    "changes": Rule("dict", example='{"EPSHN": {"temperature": 0.05}}'),
    "seeds": _SEEDS,
    "kmeans_seeds": _SEEDS,
    "seed_offset": _count(0),
    "group_sizes": _grid(_count(2), "[2, 4, 8]"),
    "m_grid": _grid(_count(), "[1, 4, 40]"),
    "lambda_grid": _grid(_number(), "[0.0, 0.001, 0.1]"),
    "temperature": _number(above=True),
    "gamma": _number(optional=True),
    "tsne_classes": _count(),
    "threads": _count(),
    "retrain": Rule("bool"),
    "validation": Rule("holdout", optional=True, example="True or 0.2"),
    "data_root": Rule("path", optional=True),
    "results_dir": Rule("path"),
}


def evaluation_names(eval_ks: Sequence[int], eval_metrics: Sequence[str]) -> list[str]:
    """The keys :func:`dmlnb.evaluation.evaluate` returns for ``ks`` and ``metrics``, e.g.
    ``["R@1", "R@2", "NMI"]``: the names ``select_metric`` may take."""
    names = [f"R@{k}" for k in eval_ks] if "recall" in eval_metrics else []
    labels = {"nmi": "NMI", "f1": "F1", "map_at_r": "MAP@R"}
    return names + [label for metric, label in labels.items() if metric in eval_metrics]


#: Checks across fields: ``(predicate on the config, message)``.
_CROSS_CHECKS: tuple[tuple[Callable[[TrainConfig], bool], Callable[[TrainConfig], str]], ...] = (
    (
        lambda c: c.batch_size % c.m_per_class == 0,
        lambda c: (
            f"batch_size ({c.batch_size}) must be a multiple of m_per_class ({c.m_per_class}); "
            f"change one of them"
        ),
    ),
    (
        lambda c: "recall" not in c.eval_metrics or len(c.eval_ks) > 0,
        lambda c: (
            "eval_ks must not be empty while eval_metrics asks for 'recall'; give Ks, "
            "e.g. eval_ks=(1, 2, 4, 8)"
        ),
    ),
    (
        lambda c: c.select_metric in evaluation_names(c.eval_ks, c.eval_metrics),
        lambda c: (
            f"select_metric {c.select_metric!r} is not computed with eval_ks={c.eval_ks} and "
            f"eval_metrics={c.eval_metrics}; choose one of "
            f"{evaluation_names(c.eval_ks, c.eval_metrics)} or add its K / metric"
        ),
    ),
)


def _check_values(
    values: Mapping[str, Any], rules: Mapping[str, Rule], what: str
) -> dict[str, Any]:
    """``values`` checked by ``rules`` (unknown names raise :class:`KeyError`
    listing the valid ones)."""
    unknown = sorted(set(values) - set(rules), key=str)
    if unknown:
        raise KeyError(f"unknown {what}(s) {unknown}; valid keys are: {', '.join(rules)}")
    return {k: rules[k].check(what, k, v) for k, v in values.items()}


def _as_mapping(overrides: Any, what: str) -> Mapping[str, Any]:
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise TypeError(
            f'{what} must be a dict of TrainConfig fields, e.g. {{"epochs": 3}}; '
            f"got {type(overrides).__name__} {overrides!r}"
        )
    return overrides


def check_parameters(parameters: Mapping[str, Any], required: Sequence[str] = ()) -> None:
    """Validate a notebook's parameters by :data:`PARAMETER_RULES` (``overrides`` key by key by
    :data:`CONFIG_RULES`); the set-up cell calls it before using any of them.

    Args:
        parameters: name -> value, e.g. ``dict(profile=profile, seeds=seeds)``.
        required: names that may not be ``None`` here although the rule allows it elsewhere.

    Raises:
        KeyError: a name without a rule; TypeError / ValueError: a bad value (the message names
        the parameter, the value and what is allowed).
    """
    missing = sorted(set(required) - set(parameters))
    if missing:
        raise KeyError(f"required notebook parameter(s) {missing} not passed to check_parameters")
    rules = {
        **PARAMETER_RULES,
        **{n: dataclasses.replace(PARAMETER_RULES[n], optional=False) for n in required},
    }
    _check_values(parameters, rules, "notebook parameter")
    if "overrides" in parameters:
        _check_values(
            _as_mapping(parameters["overrides"], "notebook parameter 'overrides'"),
            CONFIG_RULES,
            "config key",
        )


def make_config(
    profile: str | None,
    overrides: Mapping[str, Any] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    base: TrainConfig | None = None,
) -> TrainConfig:
    """Resolve ``profile`` (+ a notebook's ``presets[profile]``) + ``overrides`` into a config.

    Raises:
        ValueError: unknown profile (the message lists the valid ones).
        KeyError: an override or preset key that is not a :class:`TrainConfig` field (lists them).
        TypeError: a value of the wrong type, or ``overrides`` not a mapping.
        ValueError: a value out of its range (:data:`CONFIG_RULES`), or fields that contradict
            each other (``batch_size`` / ``m_per_class``, ``select_metric`` / ``eval_ks`` /
            ``eval_metrics``).
    """
    values: dict[str, Any] = {}
    if profile is not None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of {available_profiles()}")
        values.update(PROFILES[profile])
        if presets is not None:
            unknown_profiles = set(presets) - set(PROFILES)
            if unknown_profiles:
                raise ValueError(
                    f"presets name unknown profiles {sorted(unknown_profiles)}; "
                    f"valid: {available_profiles()}"
                )
            values.update(presets.get(profile, {}))
    values.update(_as_mapping(overrides, "overrides"))
    checked = _check_values(values, CONFIG_RULES, "config key")
    start = base if base is not None else TrainConfig()
    config = dataclasses.replace(start, **checked)
    for holds, message in _CROSS_CHECKS:
        if not holds(config):
            raise ValueError(message(config))
    return config


def resolve_profile(profile: str) -> str:
    """The profile a notebook actually runs at.

    The environment variable ``DMLNB_PROFILE`` overrides the notebook's ``profile`` parameter:
    ``make test`` sets it to ``smoke`` so that nbval, which re-executes notebooks as stored and
    cannot inject papermill parameters, runs them at the smoke scale.
    """
    import os

    chosen = os.environ.get(PROFILE_ENV) or profile
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}; choose one of {available_profiles()}")
    return chosen
