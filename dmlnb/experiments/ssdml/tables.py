"""The SSDML chapter's display tables built from its declarations (the notebook shows them)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from dmlnb.experiments.ssdml.profile_settings import settings_for
from dmlnb.experiments.ssdml.settings import Setting

__all__ = ["settings_table"]


def settings_table(settings: Mapping[str, Setting], profile: str) -> pd.DataFrame:
    """The paper profile's settings and ``settings`` (at ``profile``), one row per (profile,
    setting): dataset, network, ``d``, ``l``, labelled examples per class, partition, epochs
    (per partition), units per batch, ``k``, ``γ``, ``α``, lr, seeds and methods, as the runs'
    configurations hold them."""
    paper = settings_for("paper")
    rows = []
    for key, st in {**paper, **settings}.items():
        prof = "paper" if key in paper else profile
        cfg = st.train_config(prof, st.seeds[0])
        rows.append(
            {
                "setting": st.name,
                "profile": prof,
                "dataset": cfg.dataset,
                "network": cfg.model,
                "d": cfg.embedding_dim,
                "l": st.metric_dim,
                "labelled/class": st.labelled_per_class,
                "partition": "all" if st.partition_size >= 10**9 else st.partition_size,
                "epochs (per partition)": f"{cfg.epochs} "
                f"({min(st.epochs_per_partition, cfg.epochs)})",
                "batch (units)": cfg.batch_size,
                "k": st.k,
                "γ": st.gamma,
                "α": st.alpha,
                "lr": cfg.lr,
                "seeds": len(st.seeds),
                "methods": len(st.methods),
            }
        )
    frame = pd.DataFrame(rows).drop_duplicates(subset=["setting", "profile"])
    return frame.set_index(["profile", "setting"])
