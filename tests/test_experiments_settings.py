"""A chapter's per-profile experiment settings, read with a reader's changes."""

import pytest

from dmlnb.experiments.settings import profile_settings

TABLE = {"smoke": {"seeds": (0,), "repeats": 1}, "default": {"seeds": (0, 1, 2), "repeats": 5}}


def test_changes_apply_to_a_copy_and_none_keeps_the_profile_value():
    out = profile_settings(TABLE, "default", seeds=(7,), repeats=None)
    assert out == {"seeds": (7,), "repeats": 5}
    out["repeats"] = 0
    assert TABLE["default"]["repeats"] == 5  # the table is not changed


def test_unknown_profile_or_setting_raises():
    with pytest.raises(ValueError, match="choose one of \\['smoke', 'default'\\]"):
        profile_settings(TABLE, "paper")
    with pytest.raises(KeyError, match="epochs"):
        profile_settings(TABLE, "smoke", epochs=3)
