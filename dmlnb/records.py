"""Run records: what a training run did, saved as JSON that is never half-written.

A record holds the resolved configuration, per-epoch metrics, timings, library versions, the
device and the git commit, so a table in the book can always be traced back to the run behind it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["RunRecord", "load_finished_record", "write_json_atomic", "read_json", "environment_info", "atomic_torch_save"]


def _atomic_write(path: Path, write: Any) -> None:
    """Write through ``write(file_object)`` to a temp file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON; readers see the old file or the new one, never a mix."""
    payload = (json.dumps(data, indent=1, sort_keys=False, default=_jsonable) + "\n").encode()
    _atomic_write(Path(path), lambda fh: fh.write(payload))


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` through a temp file + rename (a checkpoint is never left truncated)."""
    _atomic_write(Path(path), lambda fh: torch.save(obj, fh))


def read_json(path: str | Path) -> dict[str, Any]:
    with open(path) as fh:
        return json.load(fh)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (Path, torch.device, torch.dtype)):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _git_commit() -> dict[str, Any]:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=here, capture_output=True, text=True, timeout=5,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty if commit else None}


def environment_info(device: torch.device) -> dict[str, Any]:
    """Versions, device and git state for a run record."""
    import numpy
    import torchvision

    import dmlnb

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": numpy.__version__,
        "dmlnb": dmlnb.__version__,
        "platform": platform.platform(),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "git": _git_commit(),
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info


class RunRecord:
    """The JSON record of one training run (``data``), saved atomically to ``path``.

    ``data`` keys: ``name``, ``status`` ("running" / "finished"), ``config``, ``components``,
    ``environment``, ``history`` (one row per epoch: ``epoch``, ``loss``, ``train_seconds``,
    ``images_per_second``, ``lr``, ``metrics`` or ``None``), ``best`` (``epoch``, ``metric``,
    ``value``, ``metrics``, ``seconds_to_best``), ``started``, ``finished``.
    """

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.data = data
        self.path = path

    @classmethod
    def new(cls, name: str, config: dict[str, Any], components: dict[str, Any], environment: dict[str, Any]) -> "RunRecord":
        from datetime import datetime, timezone

        return cls(
            {
                "name": name,
                "status": "running",
                "config": config,
                "components": components,
                "environment": environment,
                "history": [],
                "best": None,
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "finished": None,
            }
        )

    @classmethod
    def load(cls, path: str | Path) -> "RunRecord":
        return cls(read_json(path), Path(path))

    def add_epoch(self, row: dict[str, Any], select_metric: str) -> bool:
        """Append an epoch row; returns ``True`` when it is the new best by ``select_metric``.

        The evaluation before training (``epoch == 0``) is recorded but never counts as best.
        """
        self.data["history"].append(row)
        metrics = row.get("metrics")
        if not metrics or row["epoch"] == 0:
            return False
        if select_metric not in metrics:
            raise KeyError(f"select_metric {select_metric!r} not among computed metrics {sorted(metrics)}")
        best = self.data["best"]
        if best is not None and metrics[select_metric] <= best["value"]:
            return False
        self.data["best"] = {
            "epoch": row["epoch"],
            "metric": select_metric,
            "value": metrics[select_metric],
            "metrics": metrics,
            "seconds_to_best": sum(r["train_seconds"] for r in self.data["history"]),
        }
        return True

    def finish(self, when: str) -> None:
        self.data["status"] = "finished"
        self.data["finished"] = when
        self.data["total_train_seconds"] = sum(r["train_seconds"] for r in self.data["history"])

    def save(self, path: str | Path | None = None) -> None:
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("RunRecord has no path; pass one to save()")
        write_json_atomic(target, self.data)
        self.path = target

    @property
    def best(self) -> dict[str, Any] | None:
        return self.data["best"]

    @property
    def config(self) -> dict[str, Any]:
        return self.data["config"]

    def history_frame(self) -> "Any":
        """Per-epoch history as a pandas DataFrame (metrics flattened into columns)."""
        import pandas as pd

        rows = []
        for row in self.data["history"]:
            flat = {k: v for k, v in row.items() if k != "metrics"}
            flat.update(row.get("metrics") or {})
            rows.append(flat)
        return pd.DataFrame(rows).set_index("epoch")

    def __repr__(self) -> str:
        best = self.best
        summary = f"best {best['metric']}={best['value']:.4f} @ epoch {best['epoch']}" if best else "no evaluation"
        return f"RunRecord({self.data['name']!r}, {self.data['status']}, {summary})"


def load_finished_record(run_dir: str | Path, config: dict[str, Any] | Any) -> RunRecord | None:
    """The finished record in ``run_dir`` if it was made with ``config``, else ``None``.

    Lets a notebook re-render its tables from saved records without retraining; a record made
    with another configuration (or an unfinished one) is ignored, so changed settings retrain.
    """
    path = Path(run_dir) / "record.json"
    if not path.exists():
        return None
    record = RunRecord.load(path)
    wanted = config.to_dict() if hasattr(config, "to_dict") else config
    same = json.loads(json.dumps(wanted, default=_jsonable)) == record.data["config"]
    return record if record.data["status"] == "finished" and same else None
