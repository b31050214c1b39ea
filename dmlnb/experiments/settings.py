"""A chapter's experiment settings per profile: what is not a training-run field (seeds, sweeps,
timing sizes), one dict per profile, read with a reader's changes; and the one switch every
chapter shares, where its runs choose their best epoch.

The switch (``validation=`` of every chapter's factory, :func:`validation_holdout` and
:func:`with_validation`): ``None`` keeps the papers' protocol (the best epoch on the test classes,
an optimistic one, and the configuration the committed records were made with); a fraction or a
count of the training classes holds those classes out as a validation split
(``dataset_options["validation"]``, so it is part of the record and its fingerprint) and selects
the best epoch on them (``select_on="validation"``); ``True`` holds out the profile's
:data:`VALIDATION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dmlnb.profiles import TrainConfig

__all__ = ["profile_settings", "VALIDATION", "validation_holdout", "with_validation"]

#: Training classes held out as validation classes per profile (``validation=True``):
#:
#: * ``smoke``: 2 of the 5 digits training classes (the fewest a validation split may hold; 3
#:   classes remain, so a smoke batch may hold at most 3 classes);
#: * ``default``: a fifth of Omniglot-small's 136 training characters, 27 (540 drawings); the 109
#:   that remain still fill every default batch (at most 96 classes: the facility-location
#:   chapter's C / m = 0.75 batch of 128), except the discriminative chapter's deviation run with
#:   one image per class (128 classes), which it then leaves out;
#: * ``paper``: a fifth, as at the default profile.
VALIDATION: dict[str, float | int] = {"smoke": 2, "default": 0.2, "paper": 0.2}


def profile_settings(
    table: Mapping[str, Mapping[str, Any]], profile: str, **changes: Any
) -> dict[str, Any]:
    """A copy of ``table[profile]`` with the non-``None`` ``changes`` applied (a notebook passes
    its parameters, ``None`` meaning "the profile's value").

    Raises:
        ValueError: ``profile`` is not in ``table``.
        KeyError: a change names no setting of the profile.
    """
    if profile not in table:
        raise ValueError(f"unknown profile {profile!r}; choose one of {list(table)}")
    out = dict(table[profile])
    unknown = sorted(set(changes) - set(out))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; valid: {sorted(out)}")
    out.update({k: v for k, v in changes.items() if v is not None})
    return out


def validation_holdout(profile: str, validation: bool | float | int | None) -> float | int | None:
    """The training classes a chapter holds out at ``profile``: ``None`` (or ``False``) for the
    papers' protocol, :data:`VALIDATION` ``[profile]`` for ``True``, else ``validation`` itself (a
    fraction in ``(0, 1)`` or a class count, checked when the data are loaded:
    :func:`dmlnb.data.validation.hold_out_classes`).

    Raises:
        ValueError: ``validation=True`` at a profile without a :data:`VALIDATION` entry.
        TypeError: ``validation`` is not ``None``, a bool, a float or an int.
    """
    if validation is None or validation is False:
        return None
    if validation is True:
        if profile not in VALIDATION:
            raise ValueError(
                f"validation=True: profile {profile!r} has no hold-out in VALIDATION "
                f"({VALIDATION}); pass a fraction or a class count, e.g. validation=0.2"
            )
        return VALIDATION[profile]
    if not isinstance(validation, (int, float)):
        raise TypeError(
            f"validation={validation!r} ({type(validation).__name__}) must be None (the papers' "
            "protocol), True (the profile's hold-out), a fraction of the training classes such as "
            "0.2, or a class count such as 20"
        )
    return validation


def with_validation(config: "TrainConfig", holdout: float | int | None) -> "TrainConfig":
    """``config`` selecting its best epoch on ``holdout`` training classes held out
    (``dataset_options["validation"] = holdout``, ``select_on="validation"``); ``holdout=None``
    returns ``config`` itself (the papers' protocol, the configuration of today's records).
    Every method and seed of a comparison holds out the same classes (the draw's seed is
    ``validation_seed``, 0 unless ``config.dataset_options`` sets it)."""
    if holdout is None:
        return config
    return config.replace(
        dataset_options={**config.dataset_options, "validation": holdout}, select_on="validation"
    )
