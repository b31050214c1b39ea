import typing

import pytest

from dmlnb.profiles import PROFILES, TrainConfig, make_config, resolve_profile


def test_profiles_resolve_and_layer_presets_then_overrides():
    cfg = make_config("default", {"epochs": 3}, presets={"default": {"epochs": 7, "lr": 0.5}})
    assert cfg.dataset == PROFILES["default"]["dataset"]
    assert cfg.lr == 0.5  # preset beats the profile
    assert cfg.epochs == 3  # override beats the preset


def test_unknown_profile_lists_valid_ones():
    with pytest.raises(ValueError, match="smoke.*default.*paper"):
        make_config("fast")


def test_unknown_key_lists_valid_keys():
    with pytest.raises(KeyError, match="epoch.*valid keys.*epochs"):
        make_config("smoke", {"epoch": 3})


@pytest.mark.parametrize(
    "key,value",
    [("epochs", "3"), ("lr", "1e-3"), ("normalize", 1), ("steps_per_epoch", 2.5), ("epochs", True)],
)
def test_wrong_type_is_an_error(key, value):
    with pytest.raises(TypeError, match=key):
        make_config("smoke", {key: value})


def test_ints_become_floats_lists_become_tuples_and_none_where_optional():
    cfg = make_config("smoke", {"lr": 1, "lr_milestones": [0.5, 0.75], "steps_per_epoch": None})
    assert isinstance(cfg.lr, float) and cfg.lr == 1.0
    assert cfg.lr_milestones == (0.5, 0.75)
    assert cfg.steps_per_epoch is None


def test_batch_must_be_a_multiple_of_m_per_class():
    with pytest.raises(ValueError, match="multiple of m_per_class"):
        make_config("smoke", {"batch_size": 30, "m_per_class": 8})


def test_replace_validates():
    cfg = make_config("smoke")
    assert cfg.replace(seed=3).seed == 3
    with pytest.raises(KeyError):
        cfg.replace(sead=3)


def test_presets_for_unknown_profile_rejected():
    with pytest.raises(ValueError, match="unknown profiles"):
        make_config("smoke", presets={"quick": {}})


def test_env_override_of_profile(monkeypatch):
    monkeypatch.delenv("DMLNB_PROFILE", raising=False)
    assert resolve_profile("default") == "default"
    monkeypatch.setenv("DMLNB_PROFILE", "smoke")
    assert resolve_profile("default") == "smoke"
    monkeypatch.setenv("DMLNB_PROFILE", "tiny")
    with pytest.raises(ValueError, match="tiny"):
        resolve_profile("default")


def test_config_is_json_friendly():
    d = TrainConfig().to_dict()
    assert d["dataset"] == "digits" and isinstance(d["eval_ks"], tuple)


def test_every_config_field_has_a_rule_and_every_profile_passes_it():
    from dataclasses import fields

    from dmlnb.profiles import CONFIG_RULES

    assert set(CONFIG_RULES) == {f.name for f in fields(TrainConfig)}
    kinds = {int: "int", float: "float", str: "str", bool: "bool", dict: "dict", tuple: "seq"}
    for name, hint in typing.get_type_hints(
        TrainConfig
    ).items():  # the rules follow the annotations
        options = [o for o in typing.get_args(hint) or (hint,) if o is not type(None)]
        assert [kinds[o] for o in options] == [CONFIG_RULES[name].kind], name
        assert CONFIG_RULES[name].optional == (type(None) in typing.get_args(hint)), name
    for name in PROFILES:
        make_config(name)
    make_config(None)  # the dataclass defaults, too


def test_evaluation_names_match_what_evaluate_returns():
    import torch

    from dmlnb.evaluation import evaluate
    from dmlnb.profiles import evaluation_names

    emb, labels = torch.randn(12, 4), torch.arange(3).repeat(4)
    for ks, metrics in (((1, 2), ("recall", "nmi", "f1", "map_at_r")), ((4,), ("map_at_r", "f1"))):
        assert sorted(evaluation_names(ks, metrics)) == sorted(
            evaluate(emb, labels, ks=ks, metrics=metrics)
        )


def test_select_on_defaults_to_the_papers_protocol_and_takes_validation_or_test():
    assert TrainConfig().select_on == "test" and make_config("smoke").select_on == "test"
    assert make_config("smoke", {"select_on": "validation"}).select_on == "validation"
    with pytest.raises(ValueError, match=r"unknown select_on 'val'.*\['validation', 'test'\]"):
        make_config("smoke", {"select_on": "val"})
    with pytest.raises(TypeError, match="select_on"):
        make_config("smoke", {"select_on": True})


def test_betas_default_to_torchs_and_take_two_values_in_0_1():
    assert TrainConfig().betas == (0.9, 0.999) and make_config("smoke").betas == (0.9, 0.999)
    assert make_config("smoke", {"betas": [0.9, 0.99]}).betas == (0.9, 0.99)
    with pytest.raises(
        ValueError,
        match=r"config key 'betas' must be a list of numbers.*\(beta1, beta2\).*0.9, 0.99, 0.9",
    ):
        make_config("smoke", {"betas": (0.9, 0.99, 0.9)})
    with pytest.raises(ValueError, match=r"betas\[1\].* < 1.*1.0"):
        make_config("smoke", {"betas": (0.9, 1.0)})
    with pytest.raises(TypeError, match="betas"):
        make_config("smoke", {"betas": 0.99})


def test_head_lr_scale_defaults_to_1_and_must_be_positive():
    assert (
        TrainConfig().head_lr_scale == 1.0
        and make_config("smoke", {"head_lr_scale": 10}).head_lr_scale == 10.0
    )
    with pytest.raises(ValueError, match="head_lr_scale.*> 0"):
        make_config("smoke", {"head_lr_scale": 0.0})
