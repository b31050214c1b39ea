"""The one training loop: :func:`train` (see :mod:`dmlnb.training` for what it does)."""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset, Sampler
from tqdm import tqdm

from dmlnb.allocator import keep_freed_memory
from dmlnb.checkpoints import prepare_run_dir
from dmlnb.env import show_progress
from dmlnb.hooks import Hook, TrainState
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, utc_now
from dmlnb.training.allowed import check_training_allowed
from dmlnb.training.batches import EpochBatches, default_sampler, load_batches
from dmlnb.training.checkpointing import TrainedState
from dmlnb.training.device import cudnn_autotune, mixed_precision, resolve_device
from dmlnb.training.evaluating import evaluation_row
from dmlnb.training.inputs import check_train_inputs
from dmlnb.training.meters import LossMeter, PhaseClock
from dmlnb.training.optimizer import build_optimizer, build_scheduler
from dmlnb.training.recording import new_record

__all__ = ["train"]


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
    labels = check_train_inputs(
        loss_fn,
        train_set,
        eval_set,
        config,
        gallery_set=gallery_set,
        val_set=val_set,
        spec=spec,
        allow_unlabelled=allow_unlabelled,
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
    sampler = sampler if sampler is not None else default_sampler(labels, config)
    hooks = list(hooks)
    if isinstance(sampler, Hook) and sampler not in hooks:
        hooks.insert(0, sampler)
    optimizer = build_optimizer(config, model, loss_fn)
    scheduler = build_scheduler(config, optimizer)
    autocast, scaler = mixed_precision(device, config.amp)
    step_model = torch.compile(model) if config.compile and device.type == "cuda" else model
    state = TrainState(model=model, loss_fn=loss_fn, optimizer=optimizer, device=device)

    record = new_record(
        model,
        loss_fn,
        sampler,
        hooks,
        train_set,
        val_set,
        config,
        device=device,
        run_dir=run_dir,
        name=name,
        spec=spec,
    )
    parts = TrainedState(model, loss_fn, optimizer, scheduler, scaler, hooks)
    start_epoch = 0
    ckpt_path = run_dir / "checkpoint.pt" if run_dir is not None else None
    if resume and ckpt_path is not None and ckpt_path.exists():
        record, start_epoch, ckpt = parts.resume(ckpt_path, record, config, device)
        if record.stopped_early:  # it converged (patience) before its last epoch: nothing left
            start_epoch = config.epochs
    if start_epoch < config.epochs:
        check_training_allowed(
            run_dir, f"epochs {start_epoch + 1}-{config.epochs} of {record.data['name']!r}"
        )
    if run_dir is not None:
        record.path = run_dir / "record.json"
        if start_epoch > 0:
            record.save_if_stale()  # the checkpoint may be newer than record.json (a crash between)

    run_eval = functools.partial(
        evaluation_row,
        eval_model or model,
        eval_set,
        gallery_set,
        val_set,
        config,
        device,
        eval_distance,
    )

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
        stack.enter_context(cudnn_autotune(device))
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
            batches = EpochBatches(sampler, steps_per_epoch)
            meter = LossMeter(device)
            clock = PhaseClock(device.type == "cpu")
            ahead = 0 if isinstance(sampler, Hook) else 1  # a hook sampler draws after each step
            with meter.deferring():
                for i, (x, y, idx) in enumerate(
                    load_batches(
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
            stop = (
                not last
                and config.patience is not None
                and record.evaluations_since_best() >= config.patience
            )
            if stop:  # converged: no better epoch in `patience` evaluations
                record.data["stopped"] = {"epoch": epoch + 1, "patience": config.patience}
            if last or stop:
                record.finish(utc_now())
            if run_dir is not None:
                parts.save(
                    run_dir,
                    epoch=epoch + 1,
                    step=step,
                    improved=improved,
                    device=device,
                    record=record,
                )
            if stop:
                break
    finally:
        stack.close()
        bar.close()
    if start_epoch >= config.epochs and record.data["status"] != "finished":
        record.finish(utc_now())
        if run_dir is not None:
            record.save()
    return record
