"""The one training loop every notebook uses.

``train(model, loss_fn, train_set, eval_set, config)`` runs ``config.epochs`` epochs of batches
from a batch sampler (default: :class:`dmlnb.samplers.MPerClassSampler`), evaluates every
``config.eval_every`` epochs with :func:`dmlnb.evaluation.evaluate`, keeps the best epoch (the
papers report the best epoch), and returns a run record (:class:`dmlnb.records.RunRecord`).

Where the best epoch is chosen is ``config.select_on``: ``"test"`` (the papers' protocol: the
best epoch on the test classes, an optimistic estimate) or ``"validation"`` (on classes held out
of training, ``val_set``, Musgrave et al. 2020; the test classes are then reported at that
epoch). With a ``val_set`` every evaluation measures both, and the record keeps the epoch each
protocol selects (``selections``), whichever one chose ``best``.

* CPU or CUDA picked automatically; channels_last on both (on two CPU threads it trains the
  book's convnet faster than NCHW: ``benchmarks/book.py --measure``, whose numbers for one
  machine are in ``benchmarks/results/book_cpu.txt``); on
  CUDA, mixed precision (bf16 autocast, or fp16 with a grad scaler where bf16 is unsupported),
  fused optimiser steps, cuDNN autotuning
  (unless deterministic algorithms are requested) and, with ``config.compile``, a
  ``torch.compile``-d model; losses always see float32 embeddings. A step on the GPU makes no
  host read: the loss and the losses' value checks are read back every 50 steps
  (:class:`LossMeter`).
* Seeded: on CPU two runs with the same config give identical weights.
* With ``run_dir`` set, a checkpoint and then the record (JSON) are written atomically after every
  epoch; a run that is interrupted resumes from its last finished epoch and, on the same device,
  ends exactly where an uninterrupted run would (batches of epoch e depend only on (seed, e); RNG
  states are saved). Resumed on another device (a CUDA-made checkpoint on a CPU machine or the
  reverse) it continues, and the record says so (``device_changed``, ``device_notes``,
  ``segments``). Re-running a folder after a crash at any point repairs ``record.json`` from the
  checkpoint and removes the temporary files a killed write left.
* Checkpoints hold only tensors and plain containers and are loaded with ``weights_only=True``
  (:mod:`dmlnb.checkpoints`).
* With the environment variable ``DMLNB_NO_TRAINING=1`` (set by ``python -m dmlnb render``) a
  run that is not already finished in its ``run_dir`` raises :class:`TrainingDisabledError`
  naming the folder instead of training; inside :func:`measuring` (a timing study's few steps,
  which store nothing but the study's table) a run without ``run_dir`` trains all the same.
* Per-step :class:`dmlnb.hooks.Hook` objects add samplers that need embeddings, gradient edits
  (proximal terms) and penalties without forking the loop.
"""

from __future__ import annotations

import contextlib
import os
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, Sampler
from tqdm import tqdm

from dmlnb.allocator import keep_freed_memory
from dmlnb.checkpoints import (
    load_checkpoint,
    prepare_run_dir,
    restore_rng_state,
    rng_state,
    save_checkpoint,
)
from dmlnb.checks import DeferredChecks, deferred_checks
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.prefetch import prefetch
from dmlnb.env import NO_TRAINING_ENV, TrainingDisabledError, show_progress
from dmlnb.evaluation import compute_embeddings, evaluate
from dmlnb.hooks import Hook, TrainState
from dmlnb.methods import check_built
from dmlnb.profiles import OPTIMIZERS, TrainConfig
from dmlnb.records import RunRecord, environment_info, utc_now
from dmlnb.samplers import stream_generator

__all__ = [
    "train",
    "fit",
    "evaluation_sets",
    "resolve_device",
    "build_optimizer",
    "evaluate_model",
    "mixed_precision",
    "precision_description",
    "NO_TRAINING_ENV",
    "TrainingDisabledError",
    "check_training_allowed",
    "measuring",
    "check_dataset_labels",
    "LossMeter",
    "PhaseClock",
    "show_progress",
]

_MEASURING: ContextVar[bool] = ContextVar("dmlnb_measuring", default=False)


@contextlib.contextmanager
def measuring() -> Iterator[None]:
    """Inside, a run without a ``run_dir`` trains even with ``DMLNB_NO_TRAINING=1``.

    A timing study times a few training steps of runs that are never stored (``run_dir=None``):
    :func:`dmlnb.runs.stored_measurement` makes its table inside this context, so a render
    measures a missing or stale timing study as it measures one that needs no training. A run
    with a ``run_dir`` is checked as everywhere else."""
    token = _MEASURING.set(True)
    try:
        yield
    finally:
        _MEASURING.reset(token)


def check_training_allowed(run_dir: Path | None, what: str) -> None:
    """Raise :class:`TrainingDisabledError` when ``DMLNB_NO_TRAINING=1``: ``what`` (e.g. "epochs
    3-10") of the run in ``run_dir`` would have to be trained; the message says which record is
    missing and how to get it. A run without ``run_dir`` inside :func:`measuring` may train."""
    if os.environ.get(NO_TRAINING_ENV, "") in ("", "0"):
        return
    if run_dir is None:
        if _MEASURING.get():
            return
        raise TrainingDisabledError(
            f"training is disabled ({NO_TRAINING_ENV}=1, set by `python -m dmlnb render`) but "
            f"{what} would be trained by a run without run_dir, which has no record to reload: "
            "give the run a run_dir holding its finished record, or unset DMLNB_NO_TRAINING to "
            "train it here"
        )
    record, ckpt = run_dir / "record.json", run_dir / "checkpoint.pt"
    if not record.exists() and not ckpt.exists():
        where = f"{record} is missing"
    elif not ckpt.exists():
        where = f"{record} is there but {ckpt} (the trained weights this step needs) is not"
    else:
        where = f"{ckpt} holds an unfinished run"
    raise TrainingDisabledError(
        f"training is disabled ({NO_TRAINING_ENV}=1, set by `python -m dmlnb render`) but {what} "
        f"would be trained: {where}. Copy that run folder (record.json, analysis.json, "
        "checkpoint.pt, best.pt) from the machine that trained it into --runs, or render without "
        "--runs to train here"
    )


def resolve_device(name: str = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; otherwise ``torch.device(name)``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device {name!r} requested but CUDA is not available; use 'auto' or 'cpu'"
        )
    return device


def build_optimizer(
    config: TrainConfig, model: nn.Module, loss_fn: nn.Module
) -> torch.optim.Optimizer:
    """The configured optimiser over the model's and the loss's parameters.

    Parameter groups: the model's parameters at ``lr`` (first, so ``param_groups[0]`` holds the
    base rate); with ``head_lr_scale != 1`` the embedding head's (``model.head``) in a group of
    their own at ``head_lr_scale * lr``; the loss's at ``loss_lr`` (default ``lr``). Adam and AdamW
    use ``betas``. (A learning-rate factor must be a group for Adam: scaling the gradients, as
    :class:`~dmlnb.losses.discriminative.BackboneLR` does for SGD, leaves Adam's steps unchanged.)

    When every parameter is on a CUDA device, Adam, AdamW and SGD use their fused implementation
    (one kernel per step instead of one per parameter; same update up to rounding); elsewhere
    PyTorch's default (``foreach``) implementation.

    Raises:
        ValueError: ``head_lr_scale != 1`` for a model without an ``nn.Module`` ``head``.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": trainable}]
    if config.head_lr_scale != 1.0:
        head = getattr(model, "head", None)
        if not isinstance(head, nn.Module):
            raise ValueError(
                f"head_lr_scale={config.head_lr_scale:g} needs model.head (an nn.Module, as "
                f"dmlnb.models.EmbeddingNet has), {type(model).__name__} has none; use "
                "head_lr_scale=1.0"
            )
        in_head = {id(p) for p in head.parameters()}
        groups = [
            {"params": [p for p in trainable if id(p) not in in_head]},
            {
                "params": [p for p in trainable if id(p) in in_head],
                "lr": config.head_lr_scale * config.lr,
            },
        ]
    loss_params = [p for p in loss_fn.parameters() if p.requires_grad]
    if loss_params:
        groups.append({"params": loss_params, "lr": config.loss_lr or config.lr})
    name, lr, wd = config.optimizer, config.lr, config.weight_decay
    params = [p for g in groups for p in g["params"]]
    fused = bool(params) and all(
        p.is_cuda and p.is_floating_point() for p in params
    )  # one kernel per step
    betas = tuple(config.betas)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas, weight_decay=wd, fused=fused or None)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, weight_decay=wd, fused=fused or None)
    if name == "sgd":
        return torch.optim.SGD(
            groups, lr=lr, momentum=config.momentum, weight_decay=wd, fused=fused or None
        )
    if name == "rmsprop":
        return torch.optim.RMSprop(groups, lr=lr, momentum=config.momentum, weight_decay=wd)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")


class _Indexed(Dataset):
    """Wraps a labelled dataset so items carry their index: ``(x, y, i)``."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, int, int]:
        x, y = self.dataset[i]
        return x, y, i


def _batches(
    dataset: Dataset,
    batches: Iterable[list[int]],
    num_workers: int,
    pin: bool,
    *,
    device: torch.device,
    seed: int,
    epoch: int,
    ahead: int,
) -> Iterable:
    """Yield ``(x (B,...), y (B,), indices (B,))`` for the given index lists.

    A :class:`CachedImageDataset` crops batch ``t`` on ``device`` with a generator seeded by
    ``(seed, epoch, t)`` (so the batches of an epoch depend only on ``(seed, epoch)``, also after
    a resume) and builds ``ahead`` batches in a background thread while the model computes
    (``ahead=0`` when the sampler must see each step before drawing the next batch).
    """
    if isinstance(dataset, CachedImageDataset):

        def load(t: int, idx: list[int]) -> tuple[Tensor, Tensor, Tensor]:
            index = torch.as_tensor(idx, dtype=torch.long)  # (B,)
            x, y = dataset.get_batch(
                index, device=device, generator=stream_generator(seed, "augment", epoch, t)
            )
            return x, y, index

        yield from prefetch(load, batches, device, ahead)
        return
    if hasattr(dataset, "get_batch"):  # in-memory fast path: one gather per batch
        for idx in batches:
            index = torch.as_tensor(idx, dtype=torch.long)
            x, y = dataset.get_batch(index)
            yield x, y, index
        return
    loader = DataLoader(
        _Indexed(dataset),
        batch_sampler=batches,
        num_workers=num_workers,
        pin_memory=pin,
        persistent_workers=False,
    )
    yield from loader


def mixed_precision(
    device: torch.device, enabled: bool
) -> tuple[contextlib.AbstractContextManager, torch.amp.GradScaler | None]:
    """``(autocast context, grad scaler or None)``: bf16 autocast on CUDA where supported, fp16
    with a scaler otherwise; no-ops on CPU or when ``enabled`` is false."""
    if not (enabled and device.type == "cuda"):
        return contextlib.nullcontext(), None
    if torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16), None
    return torch.autocast("cuda", dtype=torch.float16), torch.amp.GradScaler("cuda")


def precision_description(config: TrainConfig) -> str:
    """In words, the arithmetic a run of ``config`` trains in (:func:`mixed_precision`), for the
    chapters' deviations tables: none of the five papers states its precision."""
    if not config.amp:
        return "float32 on every device (amp off)"
    return (
        "bf16 autocast on a CUDA GPU (fp16 with a gradient scaler where bf16 is unsupported), "
        "float32 on a CPU (amp on; the loss and the evaluation in float32)"
    )


@contextlib.contextmanager
def _cudnn_autotune(device: torch.device) -> Iterator[None]:
    """cuDNN autotuning (``torch.backends.cudnn.benchmark``) while training on CUDA, unless
    deterministic algorithms are requested (``torch.use_deterministic_algorithms(True)``: then the
    run stays bit-reproducible and a resumed run ends where an uninterrupted one does)."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = before or (
        device.type == "cuda" and not torch.are_deterministic_algorithms_enabled()
    )
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def _default_sampler(labels: Tensor, config: TrainConfig) -> Sampler:
    from dmlnb.samplers import MPerClassSampler

    return MPerClassSampler(
        labels, m=config.m_per_class, batch_size=config.batch_size, seed=config.seed
    )


def evaluate_model(
    model: nn.Module,
    eval_set: Dataset,
    config: TrainConfig,
    gallery_set: Dataset | None = None,
    device: torch.device | None = None,
    distance: str = "cosine",
) -> dict[str, float]:
    """Embed ``eval_set`` (and ``gallery_set``) and compute the configured metrics with
    ``distance`` (``"cosine"`` or ``"euclidean"``)."""
    emb, lab = compute_embeddings(model, eval_set, batch_size=config.eval_batch_size, device=device)
    kwargs: dict[str, Any] = {}
    if gallery_set is not None:
        g_emb, g_lab = compute_embeddings(
            model, gallery_set, batch_size=config.eval_batch_size, device=device
        )
        kwargs = {"gallery_embeddings": g_emb, "gallery_labels": g_lab}
    return evaluate(
        emb,
        lab,
        ks=config.eval_ks,
        metrics=config.eval_metrics,
        seed=config.seed,
        metric=distance,
        **kwargs,
    )  # type: ignore[arg-type]


class PhaseClock:
    """Seconds a training epoch spends in each phase of its steps, on the CPU.

    ``lap(phase)`` charges the time since the previous lap to ``phase``. The loop's phases:
    ``data`` (the sampler and the batch gather), ``hooks`` (hooks before the forward pass, their
    penalties and their per-step bookkeeping), ``forward`` (the model), ``loss``, ``backward``
    (through the loss and the model), ``optimizer`` (zeroing, clipping, the step) and
    ``bookkeeping`` (the loss meter, the progress bar). Only the CPU is timed: on a GPU the
    kernels run asynchronously and timing them per phase would need a host synchronisation per
    step, so ``totals()`` is ``None`` there.
    """

    PHASES = ("data", "hooks", "forward", "loss", "backward", "optimizer", "bookkeeping")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.last = time.perf_counter()

    def lap(self, phase: str) -> None:
        if self.enabled:
            now = time.perf_counter()
            self.seconds[phase] += now - self.last
            self.last = now

    def totals(self) -> dict[str, float] | None:
        """``{phase: seconds}`` of the epoch so far (``None`` when not timed)."""
        return dict(self.seconds) if self.enabled else None


class LossMeter:
    """An epoch's per-image mean loss, summed on the device and read back only every ``every``
    steps (default: each step on the CPU, where a read is free; every 50 steps on a GPU, so a
    step never waits for the host) and at the end of the epoch.

    A non-finite loss is caught at the next read, which names the first step that produced it
    (on a GPU up to ``every - 1`` further steps may have run with it; the run stops either way).
    The sum is kept in float64 (float32 on MPS), as the per-step Python sum was. When it reads
    every ``k > 1`` steps, the losses' value checks (finite embeddings, label ranges, finite loss)
    are deferred to the same reads (:meth:`deferring`), so a step makes no host read at all.
    """

    def __init__(self, device: torch.device, every: int | None = None) -> None:
        dtype = torch.float32 if device.type == "mps" else torch.float64
        self.every = every if every is not None else (1 if device.type == "cpu" else 50)
        self.total = torch.zeros((), dtype=dtype, device=device)  # sum of loss x batch size
        self.first_bad = torch.full(
            (), -1, dtype=torch.long, device=device
        )  # first non-finite step
        self.last = torch.zeros((), dtype=dtype, device=device)
        self.images, self.pending = 0, 0
        #: Value checks of the losses, deferred to this meter's reads when it
        #: reads every k > 1 steps.
        self.checks = DeferredChecks(device) if self.every > 1 else None

    def deferring(self) -> contextlib.AbstractContextManager:
        """Context in which the losses' value checks report to this meter instead of reading the
        device (:func:`dmlnb.checks.deferred_checks`); a no-op when the meter reads every step."""
        return deferred_checks(self.checks) if self.checks is not None else contextlib.nullcontext()

    def add(self, loss: Tensor, batch_size: int, step: int) -> None:
        """Add one step's mean loss (a 0-d tensor on the device) of ``batch_size`` images; call
        :meth:`start_step` before the step's forward pass."""
        self.last = loss.to(self.total.dtype)
        self.total += self.last * batch_size
        self.first_bad = torch.where(
            (self.first_bad < 0) & ~torch.isfinite(loss), step, self.first_bad
        )
        self.images += batch_size
        self.pending += 1

    def due(self) -> bool:
        """Whether ``every`` steps have passed since the last read."""
        return self.pending >= self.every

    def read(self, epoch: int) -> float:
        """The last step's loss (one host read); raises ``FloatingPointError`` on
        a non-finite one."""
        return self._read(epoch, self.last)

    def epoch_mean(self, epoch: int) -> float:
        """The epoch's mean loss per image (one host read; checks finiteness first)."""
        return self._read(epoch, self.total) / max(self.images, 1)

    def start_step(self, step: int) -> None:
        """The step whose value checks follow (named by a deferred check's error)."""
        if self.checks is not None:
            self.checks.step = step

    def _read(self, epoch: int, value: Tensor) -> float:
        parts = [self.first_bad.to(value.dtype), value]
        if self.checks is not None:
            parts.append(self.checks.failed_step().to(value.dtype))
        read = torch.stack(parts).tolist()  # the one read
        first_bad, out = read[0], read[1]
        self.pending = 0
        if self.checks is not None:
            self.checks.raise_for(int(read[2]))  # a bad batch's own error comes first
        if first_bad >= 0:
            raise FloatingPointError(
                f"non-finite loss at epoch {epoch + 1}, step {int(first_bad)}: lower the learning "
                "rate (config key 'lr') or set grad_clip"
            )
        return out


def train(
    model: nn.Module,
    loss_fn: nn.Module,
    train_set: Dataset,
    eval_set: Dataset | None,
    config: TrainConfig,
    *,
    sampler: Sampler | None = None,
    hooks: Sequence[Hook] = (),
    gallery_set: Dataset | None = None,
    run_dir: str | Path | None = None,
    resume: bool = True,
    eval_at_start: bool = False,
    progress: bool | None = None,
    name: str | None = None,
    spec: dict[str, Any] | None = None,
    eval_model: nn.Module | None = None,
    eval_distance: str = "cosine",
    allow_unlabelled: bool = False,
    val_set: Dataset | None = None,
) -> RunRecord:
    """Train ``model`` with ``loss_fn`` and return the run record.

    Args:
        model: maps images ``(B, C, H, W)`` to embeddings ``(B, D)``; moved to the device in place.
        loss_fn: ``loss_fn(embeddings (B, D), labels (B,)) -> scalar``; its
            parameters are optimised.
        train_set: a :class:`dmlnb.data.LabelledDataset` (``labels`` attribute, ``(x, y)`` items).
        eval_set: evaluated every ``config.eval_every`` epochs (``None``: no evaluation).
        config: the resolved :class:`dmlnb.profiles.TrainConfig`.
        sampler: batch sampler yielding index lists (``set_epoch`` is called when present);
            default :class:`dmlnb.samplers.MPerClassSampler` with ``config.m_per_class``.
        hooks: per-step hooks; a sampler that is also a :class:`Hook` is added automatically.
        gallery_set: separate gallery for retrieval (In-Shop); ``eval_set`` is then the query set.
        run_dir: folder for ``record.json`` and checkpoints (``None``: nothing is written).
        resume: continue from ``run_dir``'s checkpoint when one exists (a finished run is loaded,
            not retrained).
        eval_at_start: also evaluate before the first step (history row with ``epoch == 0``).
        progress: show a tqdm bar (``None``: unless ``DMLNB_PROGRESS=0``, see
            :func:`show_progress`).
        name: run name stored in the record (default: the folder name or ``"run"``).
        spec: the method specification stored in the record with its
            :func:`~dmlnb.records.run_fingerprint` (:mod:`dmlnb.runs` passes it); a checkpoint
            is resumed only when its record has the same configuration and specification.
        eval_model: the module evaluated (default ``model``; e.g. the network followed by a
            learned metric layer), with ``eval_distance`` (``"cosine"`` or ``"euclidean"``).
        allow_unlabelled: ``train_set`` may hold unlabelled examples (label ``-1``): for a loss
            that does not read the batch labels (:func:`dmlnb.ssdml.algorithm.train_ssdml`).
        val_set: validation classes held out of ``train_set`` (``splits.validation``, e.g. from
            ``dataset_options={"validation": 0.2}``), evaluated (as query and gallery at once)
            whenever ``eval_set`` is; rows get ``val_metrics`` beside the test ``metrics``, and
            the record both selections. Needed for ``config.select_on == "validation"``.

    Raises:
        ValueError: ``config.select_on == "validation"`` for a run that evaluates (``eval_set``)
            without a ``val_set`` (a run without evaluation selects nothing), a ``val_set``
            without an ``eval_set``, an empty set, or a ``loss_fn`` not built by the method
            ``spec["factory"]`` names (:func:`dmlnb.methods.check_built`), and the errors of
            the checks it makes.
    """
    labels = check_dataset_labels(train_set, "train_set", allow_unlabelled)
    check_built(loss_fn, spec)
    _check_not_empty(eval_set, "eval_set", "pass None for no evaluation")
    _check_not_empty(gallery_set, "gallery_set", "pass None for no evaluation")
    _check_not_empty(val_set, "val_set", "pass None for no validation split")
    if config.select_on == "validation" and val_set is None and eval_set is not None:
        raise ValueError(
            "config.select_on is 'validation' but no validation split was given: pass "
            "dataset_options={'validation': 0.2} (a fraction or count of the training classes) to "
            "fit, val_set=splits.validation to train, or select_on='test' (the papers' protocol)"
        )
    if val_set is not None and eval_set is None:
        raise ValueError(
            "val_set is given without an eval_set: a run selected on the validation classes "
            "reports the test classes at that epoch; pass the test set as eval_set"
        )
    device = resolve_device(config.device)
    if device.type == "cpu":
        keep_freed_memory()  # a step's activations reuse the previous step's memory (same results)
    run_dir = prepare_run_dir(run_dir) if run_dir is not None else None
    torch.manual_seed(config.seed)
    model.to(device)
    loss_fn.to(device)
    channels_last = config.channels_last and device.type in ("cpu", "cuda")
    if channels_last:
        model.to(memory_format=torch.channels_last)
    sampler = sampler if sampler is not None else _default_sampler(labels, config)
    hooks = list(hooks)
    if isinstance(sampler, Hook) and sampler not in hooks:
        hooks.insert(0, sampler)
    optimizer = build_optimizer(config, model, loss_fn)
    milestones = sorted(
        {max(1, round(f * config.epochs)) if f < 1 else int(f) for f in config.lr_milestones}
    )
    scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=milestones, gamma=config.lr_gamma
    )
    autocast, scaler = mixed_precision(device, config.amp)
    step_model = torch.compile(model) if config.compile and device.type == "cuda" else model
    state = TrainState(model=model, loss_fn=loss_fn, optimizer=optimizer, device=device)

    components: dict[str, Any] = {
        "model": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss": repr(loss_fn),
        "sampler": repr(sampler),
        "hooks": [repr(h) for h in hooks],
        "train_set": f"{type(train_set).__name__} of {len(train_set)} items",  # type: ignore[arg-type]
    }
    if val_set is not None:
        val_labels = check_dataset_labels(val_set, "val_set")
        components["val_set"] = (
            f"{type(val_set).__name__} of {len(val_set)} items, "  # type: ignore[arg-type]
            f"{int(torch.unique(val_labels).numel())} classes"
        )
    record = RunRecord.new(
        name=name or (run_dir.name if run_dir is not None else "run"),
        config=config.to_dict(),
        components=components,
        environment=environment_info(device),
        spec=spec,
    )
    start_epoch = 0
    ckpt_path = run_dir / "checkpoint.pt" if run_dir is not None else None
    if resume and ckpt_path is not None and ckpt_path.exists():
        ckpt = load_checkpoint(ckpt_path)
        saved = RunRecord.from_data(ckpt.get("record"), f"{ckpt_path}['record']")
        if saved.config != record.data["config"] or saved.data.get(
            "fingerprint"
        ) != record.data.get("fingerprint"):
            raise ValueError(
                f"{run_dir} holds a run with a different configuration or method specification; "
                "pass a new run_dir, or resume=False to overwrite it"
            )
        model.load_state_dict(ckpt["model"])
        loss_fn.load_state_dict(ckpt["loss"])
        optimizer.load_state_dict(ckpt["optimizer"])  # casts the state to the parameters' device
        scheduler.load_state_dict(ckpt["scheduler"])
        if scaler is not None and ckpt.get("scaler"):
            scaler.load_state_dict(ckpt["scaler"])
        if len(ckpt["hooks"]) != len(hooks) and int(ckpt["epoch"]) < config.epochs:
            raise ValueError(
                f"{ckpt_path} holds the state of {len(ckpt['hooks'])} hooks, this run has "
                f"{len(hooks)} ({[type(h).__name__ for h in hooks]}); pass the same hooks, or a "
                "new run_dir"
            )
        for hook, hook_state in zip(hooks, ckpt["hooks"]):
            hook.load_state_dict(hook_state)
        restore_rng_state(ckpt, device, ckpt_path)
        record = saved
        start_epoch = int(ckpt["epoch"])
        if start_epoch < config.epochs:
            record.resume(environment_info(device), start_epoch)
    if start_epoch < config.epochs:
        check_training_allowed(
            run_dir, f"epochs {start_epoch + 1}-{config.epochs} of {record.data['name']!r}"
        )
    if run_dir is not None:
        record.path = run_dir / "record.json"
        if start_epoch > 0:
            record.save_if_stale()  # the checkpoint may be newer than record.json (a crash between)

    def timed_eval(query: Dataset, gallery: Dataset | None) -> dict[str, float]:
        t0 = time.perf_counter()
        metrics = evaluate_model(eval_model or model, query, config, gallery, device, eval_distance)
        metrics["eval_seconds"] = time.perf_counter() - t0
        return metrics

    def run_eval() -> dict[str, Any]:
        """The row entries of one evaluation: ``metrics`` (the test set) and, with a ``val_set``,
        ``val_metrics`` (the validation set as query and gallery)."""
        out = {"metrics": timed_eval(eval_set, gallery_set)}  # type: ignore[arg-type]
        if val_set is not None:
            out["val_metrics"] = timed_eval(val_set, None)
        return out

    if eval_at_start and start_epoch == 0 and eval_set is not None:
        record.add_epoch(
            {"epoch": 0, "loss": None, "train_seconds": 0.0, **run_eval()},
            config.select_metric,
            config.select_on,
        )

    steps_per_epoch = len(sampler) if config.steps_per_epoch is None else config.steps_per_epoch  # type: ignore[arg-type]
    if (
        isinstance(sampler, Hook)
        and config.steps_per_epoch is not None
        and steps_per_epoch != len(sampler)
    ):  # type: ignore[arg-type]
        raise ValueError(
            f"{type(sampler).__name__} counts {len(sampler)} steps per epoch but "  # type: ignore[arg-type]
            f"config.steps_per_epoch is {steps_per_epoch}: its schedule would drift from the "
            "loop's; leave steps_per_epoch unset or build the sampler with "
            "num_batches=steps_per_epoch"
        )
    total = steps_per_epoch * config.epochs
    bar = tqdm(
        total=total,
        initial=steps_per_epoch * start_epoch,
        disable=not show_progress(progress) or start_epoch >= config.epochs,
        desc=record.data["name"],
        leave=False,
    )
    step = (
        int(ckpt.get("step", steps_per_epoch * start_epoch)) if start_epoch else 0
    )  # the next step's number
    for hook in hooks:
        hook.on_train_start(state)
    stack = contextlib.ExitStack()
    pin = device.type == "cuda"
    try:
        stack.enter_context(_cudnn_autotune(device))
        for epoch in range(start_epoch, config.epochs):
            state.epoch = epoch
            model.train()
            t0 = time.perf_counter()
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)  # type: ignore[attr-defined]
            if (
                config.steps_per_epoch is None
            ):  # a sampler's epoch may change length (SSDML's partitions)
                steps_per_epoch = len(sampler)  # type: ignore[arg-type]
                bar.total = bar.n + steps_per_epoch * (config.epochs - epoch)
            batches = _EpochBatches(sampler, steps_per_epoch)
            meter = LossMeter(device)
            clock = PhaseClock(device.type == "cpu")
            ahead = 0 if isinstance(sampler, Hook) else 1  # a hook sampler draws after each step
            with meter.deferring():
                for i, (x, y, idx) in enumerate(
                    _batches(
                        train_set,
                        batches,
                        config.num_workers,
                        pin,
                        device=device,
                        seed=config.seed,
                        epoch=epoch,
                        ahead=ahead,
                    )
                ):
                    state.step = step
                    step += 1
                    meter.start_step(state.step)
                    x = x.to(device, non_blocking=True)
                    if channels_last and x.dim() == 4:
                        x = x.contiguous(memory_format=torch.channels_last)
                    state.labels, state.indices = y.to(device, non_blocking=True), idx
                    clock.lap("data")
                    for hook in hooks:
                        hook.on_step_start(state)
                    clock.lap("hooks")
                    with autocast:
                        out = step_model(x)
                    state.embeddings = out.float()  # (B, D)
                    clock.lap("forward")
                    loss = loss_fn(state.embeddings, state.labels)
                    clock.lap("loss")
                    for hook in hooks:
                        extra = hook.penalty(state)
                        if extra is not None:
                            loss = loss + extra
                    clock.lap("hooks")
                    optimizer.zero_grad(set_to_none=True)
                    clock.lap("optimizer")
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.unscale_(optimizer)
                    else:
                        loss.backward()
                    state.loss = loss.detach()
                    clock.lap("backward")
                    for hook in hooks:
                        hook.after_backward(state)
                    clock.lap("hooks")
                    if config.grad_clip is not None:
                        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    state.embeddings = state.embeddings.detach()
                    clock.lap("optimizer")
                    for hook in hooks:
                        hook.on_step_end(state)
                    clock.lap("hooks")
                    meter.add(state.loss, len(idx), state.step)
                    if meter.due():
                        bar.set_postfix(
                            epoch=epoch + 1, loss=f"{meter.read(epoch):.4f}", refresh=False
                        )
                    bar.update(1)
                    clock.lap("bookkeeping")
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            train_seconds = time.perf_counter() - t0
            scheduler.step()
            for hook in hooks:
                hook.on_epoch_end(state)
            row: dict[str, Any] = {
                "epoch": epoch + 1,
                "loss": meter.epoch_mean(epoch),
                "train_seconds": train_seconds,
                "images_per_second": meter.images / train_seconds if train_seconds > 0 else None,
                "lr": optimizer.param_groups[0]["lr"],
                "metrics": None,
            }
            if clock.enabled:
                row["step_seconds"] = clock.totals()  # per phase, summed over the epoch (CPU only)
            for hook in hooks:
                row.update(hook.epoch_summary(state))
            last = epoch + 1 == config.epochs
            if eval_set is not None and ((epoch + 1) % config.eval_every == 0 or last):
                row.update(run_eval())
            elif val_set is not None:
                row["val_metrics"] = None
            improved = record.add_epoch(row, config.select_metric, config.select_on)
            if last:
                record.finish(utc_now())
            if run_dir is not None:
                if improved:
                    save_checkpoint(
                        {
                            "model": model.state_dict(),
                            "loss": loss_fn.state_dict(),
                            "epoch": epoch + 1,
                        },
                        run_dir / "best.pt",
                    )
                save_checkpoint(
                    {
                        "model": model.state_dict(),
                        "loss": loss_fn.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "scaler": scaler.state_dict() if scaler is not None else None,
                        "hooks": [h.state_dict() for h in hooks],
                        **rng_state(device),
                        "epoch": epoch + 1,
                        "step": step,
                        "record": record.data,
                    },
                    ckpt_path,  # type: ignore[arg-type]
                )
                record.save()  # after the checkpoint: a finished record.json always has one
    finally:
        stack.close()
        bar.close()
    if start_epoch >= config.epochs and record.data["status"] != "finished":
        record.finish(utc_now())
        if run_dir is not None:
            record.save()
    return record


def check_dataset_labels(dataset: Dataset, name: str, allow_unlabelled: bool = False) -> Tensor:
    """``dataset.labels`` as a ``(N,)`` long tensor, or an error naming ``name`` and the fix:
    the set must be non-empty, hold one integer label ``>= 0`` per example (``-1`` marks
    unlabelled examples, which a supervised train set must not contain; with
    ``allow_unlabelled`` it may)."""
    _check_not_empty(dataset, name, "check the dataset's split and filters")
    if not hasattr(dataset, "labels"):
        raise TypeError(
            f"{name} ({type(dataset).__name__}) has no `labels` attribute; wrap it in a "
            "dmlnb.data.LabelledDataset (or give it a (N,) integer `labels` tensor)"
        )
    labels = torch.as_tensor(dataset.labels)  # type: ignore[attr-defined]
    if labels.dim() != 1 or len(labels) != len(dataset):  # type: ignore[arg-type]
        raise ValueError(
            f"{name}.labels has shape {tuple(labels.shape)} but {name} holds {len(dataset)} "
            "examples; "  # type: ignore[arg-type]
            "give one class id per example"
        )
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"{name}.labels are {labels.dtype}; labels must be integer class ids: convert them "
            "with labels.long() (after checking they hold whole numbers)"
        )
    negative = int((labels < (-1 if allow_unlabelled else 0)).sum())
    if negative and allow_unlabelled:
        raise ValueError(
            f"{name}.labels holds {negative} labels below -1 (min {int(labels.min())}); "
            "use class ids >= 0, and -1 for unlabelled examples"
        )
    if negative:
        raise ValueError(
            f"{name}.labels holds {negative} negative labels (min {int(labels.min())}); -1 marks "
            f"unlabelled examples, which supervised training cannot use: filter them out of {name} "
            "first (e.g. dataset.subset((dataset.labels >= 0).nonzero().flatten()))"
        )
    return labels.long()


def _check_not_empty(dataset: Dataset | None, name: str, hint: str) -> None:
    if dataset is not None and len(dataset) == 0:  # type: ignore[arg-type]
        raise ValueError(f"{name} is empty (0 examples); {hint}")


class _EpochBatches:
    """The first ``n`` batches of a sampler's current epoch, drawn lazily (cycling the sampler if
    its epoch is shorter), so a sampler that is also a hook sees every step's embeddings before
    it builds the next batch."""

    def __init__(self, sampler: Sampler, n: int) -> None:
        self.sampler, self.n = sampler, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[list[int]]:
        produced = 0
        while produced < self.n:
            before = produced
            for batch in self.sampler:
                yield list(batch)
                produced += 1
                if produced == self.n:
                    return
            if produced == before:
                raise ValueError(
                    f"{self.sampler!r} yielded no batch; check batch_size against the data"
                )


def evaluation_sets(splits: Any) -> tuple[Any, Any]:
    """What a run of ``splits`` (:class:`dmlnb.data.DatasetSplits`) is evaluated on:
    ``(query, gallery)`` when the dataset has both (In-Shop), else ``(test, None)`` (the test
    set against itself)."""
    if splits.query is not None and splits.gallery is not None:
        return splits.query, splits.gallery
    return splits.test, None


def fit(
    config: TrainConfig,
    loss_fn: nn.Module,
    *,
    data_root: str | Path | None = None,
    splits: Any = None,
    sampler: Sampler | None = None,
    hooks: Sequence[Hook] = (),
    run_dir: str | Path | None = None,
    **train_kwargs: Any,
) -> tuple[nn.Module, RunRecord]:
    """Load the configured dataset, build the configured model (seeded) and :func:`train` it.

    Returns ``(model, record)``. ``splits`` may be passed to reuse an already loaded
    :class:`dmlnb.data.DatasetSplits`. Its ``validation`` split (``dataset_options={"validation":
    ...}``), when present, is evaluated beside the test set and can select the best epoch
    (``config.select_on``).
    """
    from dmlnb.data import load_dataset
    from dmlnb.models import configured_model

    if splits is None:
        splits = load_dataset(config.dataset, root=data_root, **config.dataset_options)
    model = configured_model(config, splits.input_shape)
    eval_set, gallery = evaluation_sets(splits)
    record = train(
        model,
        loss_fn,
        splits.train,
        eval_set,
        config,
        sampler=sampler,
        hooks=hooks,
        gallery_set=gallery,
        run_dir=run_dir,
        val_set=splits.validation,
        **train_kwargs,
    )
    return model, record
