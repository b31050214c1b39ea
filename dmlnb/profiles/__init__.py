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

from dmlnb.profiles.config import TrainConfig, make_config
from dmlnb.profiles.rule import Rule
from dmlnb.profiles.rules import (
    CONFIG_RULES,
    MODELS,
    OPTIMIZERS,
    PARAMETER_RULES,
    SELECT_ON,
    check_parameters,
    evaluation_names,
)
from dmlnb.profiles.scales import PROFILE_ENV, PROFILES, available_profiles, resolve_profile

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
