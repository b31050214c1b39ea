"""A chapter's experiment settings per profile: what is not a training-run field (seeds, sweeps,
timing sizes), one dict per profile, read with a reader's changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["profile_settings"]


def profile_settings(table: Mapping[str, Mapping[str, Any]], profile: str, **changes: Any) -> dict[str, Any]:
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
