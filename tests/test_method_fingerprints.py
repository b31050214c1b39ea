"""A reader's change to a chapter's method trains it again: the run's fingerprint follows every
argument of the registered method the chapter builds its loss from (issue #45), and a loss that is
not the one the specification names is refused before training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dmlnb.data import InMemoryDataset
from dmlnb.experiments import profs as X
from dmlnb.methods import call
from dmlnb.profiles import make_config
from dmlnb.records import run_fingerprint
from dmlnb.runs import reuse_reason
from dmlnb.training import train

RESULTS = Path(__file__).resolve().parents[1] / "results" / "04_profs" / "default"


def _committed_contrastive_run(changes=None):
    """The default profile's plain Contrastive-Hard run of seed 0, as the chapter declares it
    (:func:`dmlnb.experiments.profs.groups`): its folder, configuration and specification."""
    config, settings = (
        X.experiment_config("default", validation=True),
        X.experiment_settings("default"),
    )
    group = X.groups(config, settings, 109, changes)["table1/plain"]
    run = next(r for r in group.runs() if r.label == "Contrastive-Hard" and r.seed == 0)
    return run.name, run.config(config), run.spec


def test_a_changed_loss_argument_stales_the_committed_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's example: Contrastive-Hard's ``neg_margin`` 1.0 -> 0.3 used to reload the old
    record silently. Now its committed record no longer matches and the run would train, whether
    the chapter's table of methods changes or a reader's notebook changes the argument."""
    name, config, spec = _committed_contrastive_run()
    assert reuse_reason(RESULTS / name, config, spec)[0] == ""
    changed = X.LOSS_METHODS["contrastive-hard"].replace(neg_margin=0.3)
    for after in (
        _committed_contrastive_run({"Contrastive-Hard": {"neg_margin": 0.3}}),
        (
            monkeypatch.setitem(X.LOSS_METHODS, "contrastive-hard", changed),
            _committed_contrastive_run(),
        )[1],
    ):
        assert after[0] == name and after[2]["factory"]["args"]["neg_margin"] == 0.3
        assert run_fingerprint(after[1], after[2]) != run_fingerprint(config, spec)
        reason, _ = reuse_reason(RESULTS / after[0], after[1], after[2])
        assert "fingerprint changed" in reason and "factory" in reason
    loss = X.build_loss("contrastive-hard", 10, 8)
    assert loss.neg_margin == 0.3 and loss.method_spec == changed.spec


def test_every_chapter_loss_key_builds_what_its_spec_names() -> None:
    for key in X.LOSS_METHODS:
        loss = X.build_loss(key, 10, 8)
        assert loss.method_spec == X.loss_method(key).spec
        assert key in X.implementation() and str(X.loss_method(key)) in X.implementation()[key]


def _tiny() -> tuple[InMemoryDataset, object]:
    torch.manual_seed(0)
    data = InMemoryDataset(torch.randn(16, 1, 4, 4), torch.arange(4).repeat_interleave(4))
    return data, make_config(
        "smoke", {"epochs": 1, "embedding_dim": 8, "batch_size": 8, "m_per_class": 2}
    )


def test_training_refuses_a_loss_the_specification_does_not_name() -> None:
    data, config = _tiny()
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8))
    named = call("triplet", margin=0.2)
    other = named.replace(margin=0.5).build()
    with pytest.raises(ValueError, match="names method .* but the loss was built by"):
        train(model, other, data, None, config, spec={"factory": named.spec})
    untagged = torch.nn.Identity()
    with pytest.raises(ValueError, match="no registered method"):
        train(model, untagged, data, None, config, spec={"factory": named.spec})
