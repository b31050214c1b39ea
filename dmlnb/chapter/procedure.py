"""How a group's runs train beyond their loss: a :class:`Procedure` (sampler, hooks, a loss
wrapper, the network, what is stored after training), declared as data.

A run of :func:`dmlnb.chapter.train_runs` is its method call (the loss), its seed, its
configuration changes and its group's procedure. The default procedure trains the configured
network on the loss alone, as :func:`dmlnb.training.fit` does. A chapter whose runs need more
(PROFS's batches and proximal hook, facility location's margin decay, SSDML's schedule) writes a
procedure: a frozen dataclass whose fields are **all** its arguments, overriding the methods it
needs. :meth:`Procedure.spec_entries` puts every field into the run's specification (so into its
fingerprint): a reader who changes one trains those runs again. A procedure whose records were
made before this layer may write its entries under the keys those records hold
(:meth:`spec_entries` overridden; :meth:`seed_entries` for entries that depend on the seed), so
they still reload; ``tests/test_chapter_procedures.py`` checks, for every procedure a chapter
declares, that changing any field changes the fingerprint (a field listed in
:attr:`Procedure.NAME_FIELDS` names the run's folder only and is exempt).

Which data a run trains on and how it is trained are hooks too: :meth:`Procedure.data_key` and
:meth:`Procedure.load_data` (runs with one key share one load; SSDML loads each seed's labelled
draw), :meth:`Procedure.train` (default :func:`dmlnb.training.train`; SSDML runs Algorithm 1).

Example::

    @dataclass(frozen=True)
    class MarginDecay(Procedure):
        rate: float = 0.94

        def components(self, run: RunContext) -> Components:
            return Components(run.loss, hooks=[MarginDecayHook(run.loss, rate=self.rate)])

    RunGroup({"clustering": call("facility-location")}, seeds=(0, 1, 2),
             procedure=MarginDecay(rate=0.9))
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from dmlnb import training
from dmlnb.data import load_dataset
from dmlnb.hooks import Hook
from dmlnb.methods import MethodCall
from dmlnb.models import configured_model
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord

if TYPE_CHECKING:  # pragma: no cover
    from torch.utils.data import Sampler

__all__ = ["Procedure", "RunContext", "Components"]


@dataclass
class RunContext:
    """What a procedure sees of one run while it trains: its ``label``, method ``call``,
    ``seed``, resolved ``config``, the loaded ``splits`` (:class:`dmlnb.data.DatasetSplits`), the
    ``model`` and ``loss`` built for it and its folder (``None``: in memory). ``state`` is the
    procedure's scratch space between :meth:`Procedure.components` and
    :meth:`Procedure.finish` (e.g. a hook whose log ``finish`` stores)."""

    label: str
    call: MethodCall
    seed: int
    config: TrainConfig
    splits: Any
    model: nn.Module
    loss: nn.Module
    run_dir: Path | None
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Components:
    """What :func:`dmlnb.training.train` is given: the ``loss`` it minimises (the method's, or a
    wrapper of it), the batch ``sampler`` (``None``: the configuration's), the ``hooks`` and
    further keyword ``options`` of the loop (e.g. ``{"eval_at_start": True}``)."""

    loss: nn.Module
    sampler: Sampler | None = None
    hooks: Sequence[Hook] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Procedure:
    """The default procedure: the configured network, the loss alone, nothing stored after
    training. Subclass it as a frozen dataclass; every field is an argument of the procedure and
    enters every run's fingerprint (:meth:`spec_entries`). A field that takes one of a few
    values names them in :attr:`FIELD_CHOICES` (or is typed ``Literal[...]``), so that
    ``tests/test_chapter_procedures.py`` can change it."""

    #: field -> its valid values, for a field whose values are a few names
    FIELD_CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {}
    #: a method label whose runs every field concerns (a field may concern one method only), and
    #: field values under which every other field matters (e.g. a switch that a period needs)
    EXAMPLE_LABEL: ClassVar[str] = "method"
    EXAMPLE_FIELDS: ClassVar[Mapping[str, Any]] = {}
    #: a seed under which every field concerns the run (:meth:`seed_entries`)
    EXAMPLE_SEED: ClassVar[int] = 0
    #: fields that name the run's folder only (:meth:`run_name`), never what it trains: they stay
    #: out of the fingerprint (e.g. a tag that records made before the layer carry in their
    #: folder names); two runs they tell apart but whose fingerprints agree are one run
    NAME_FIELDS: ClassVar[tuple[str, ...]] = ()

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        """The entries this procedure adds to a run's specification (besides the method's
        ``"factory"``): ``{"procedure": {"name": <class>, <field>: <value>, ...}}``, or nothing
        for the default procedure. Every field must be JSON-able."""
        fields = dataclasses.asdict(self)
        if type(self) is Procedure:
            return {}
        return {"procedure": {"name": type(self).__name__, **fields}}

    def seed_entries(self, label: str, call: MethodCall, seed: int) -> dict[str, Any]:
        """Entries of the run's specification that depend on its ``seed`` too (e.g. what only
        the first seed stores), added to :meth:`spec_entries`' (default: none)."""
        return {}

    def run_name(self, label: str, seed: int, changes: tuple[tuple[str, Any], ...]) -> str:
        """The run's folder name: ``"<label>[-<key><value>...]-seed<seed>"``."""
        tag = "".join(f"-{k}{v}" for k, v in changes)
        return f"{label}{tag}-seed{seed}".replace(" ", "_").replace("/", "_")

    def configure(self, config: TrainConfig, label: str, call: MethodCall) -> TrainConfig:
        """The run's configuration from the group's (its changes and seed already applied)."""
        return config

    def build(
        self, call: MethodCall, config: TrainConfig, splits: Any
    ) -> tuple[nn.Module, nn.Module]:
        """The run's ``(model, loss)``: the loss built from the method's call with what the run
        knows (the number of training classes, the embedding's dimension) after
        ``torch.manual_seed(config.seed)`` (learnable proxies and centres are seeded too), then
        the configured network (:func:`dmlnb.models.configured_model`, seeded again). Override
        it for a network or loss of the chapter's own; keep the seeding order of the records it
        must reproduce."""
        torch.manual_seed(config.seed)
        loss = call.build(num_classes=splits.num_train_classes, embedding_dim=config.embedding_dim)
        return configured_model(config, splits.input_shape), loss

    def data_key(self, config: TrainConfig) -> Hashable:
        """Which data a run of ``config`` (its changes and seed applied) trains on: runs with one
        key share one :meth:`load_data` (default: one load per dataset and its options)."""
        return (config.dataset, json.dumps(config.dataset_options, sort_keys=True, default=str))

    def load_data(self, config: TrainConfig, data_root: str | Path | None) -> Any:
        """The run's :class:`dmlnb.data.DatasetSplits` (default: ``config.dataset`` with its
        options), loaded only when a run trains."""
        return load_dataset(config.dataset, root=data_root, **config.dataset_options)

    def components(self, run: RunContext) -> Components:
        """The loss the loop minimises, the sampler and the hooks (default: the loss alone)."""
        return Components(run.loss)

    def train(
        self, run: RunContext, parts: Components, *, resume: bool, name: str, spec: dict[str, Any]
    ) -> RunRecord:
        """Train ``run.model`` on ``parts`` into ``run.run_dir`` (``resume``: continue its
        checkpoint), storing ``spec`` in the record named ``name`` (default:
        :func:`dmlnb.training.train` on the splits' training set, evaluated as
        :func:`dmlnb.training.evaluation_sets` says)."""
        eval_set, gallery = training.evaluation_sets(run.splits)
        return training.train(
            run.model,
            parts.loss,
            run.splits.train,
            eval_set,
            run.config,
            sampler=parts.sampler,
            hooks=parts.hooks,
            gallery_set=gallery,
            run_dir=run.run_dir,
            resume=resume,
            name=name,
            spec=spec,
            val_set=run.splits.validation,
            **parts.options,
        )

    def finish(self, run: RunContext, record: RunRecord) -> dict[str, Any]:
        """What is stored in the record's ``extras`` after training (``run.model`` is the
        trained network at its last epoch)."""
        return {}
