"""What the book's runs cost, per chapter, read from the run records a profile left in ``results/``.

    python benchmarks/book.py                     # the committed default-profile records
    python benchmarks/book.py --profile smoke --results /path/to/results

One row per chapter: runs, epochs trained, images processed, training and evaluation seconds as
the records measured them (on the machines and thread counts that trained them, named in the
``threads`` column), and the total, and ``outside %``: the share of the training steps' time spent outside the
model's forward and backward pass (sampler and batch gather, hooks, loss, optimiser step,
bookkeeping), from the per-phase seconds (:class:`dmlnb.training.PhaseClock`) that runs trained
on the CPU record. A second table splits the steps' time into those phases per chapter, so the
next hotspot is visible. Records written before the loop timed its phases leave both empty
("-"). Images count only the epochs whose record holds img/s (the SSDML algorithm's own runs
record none). This is the cost of regenerating the chapter with ``retrain=True`` on a machine
like the one that made the records; re-rendering from the records costs none of it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from dmlnb.training import PhaseClock

ROOT = Path(__file__).resolve().parents[1]


def run_costs(record: dict) -> dict[str, float]:
    """Epochs, images, training and evaluation seconds of one run record's history."""
    rows = [r for r in record.get("history", []) if isinstance(r, dict) and r.get("epoch", 0) > 0]
    train = sum(r.get("train_seconds") or 0.0 for r in rows)
    timed = [r for r in rows if r.get("images_per_second") is not None]  # SSDML records hold no img/s
    images = sum(r["images_per_second"] * (r.get("train_seconds") or 0.0) for r in timed) if timed else float("nan")
    evaluation = sum((r.get("metrics") or {}).get("eval_seconds", 0.0) for r in record.get("history", []))
    phases = {p: sum((r.get("step_seconds") or {}).get(p, 0.0) for r in rows) for p in PhaseClock.PHASES}
    return {"epochs": len(rows), "images": images, "train s": train, "eval s": evaluation, **phases}


def chapter_table(results: Path, profile: str) -> pd.DataFrame:
    """One row per chapter folder of ``results`` holding records of ``profile``."""
    rows = []
    for chapter in sorted(p for p in results.iterdir() if (p / profile).is_dir()):
        costs, threads = [], set()
        for path in sorted((chapter / profile).rglob("record.json")):
            record = json.loads(path.read_text())
            costs.append(run_costs(record))
            threads.add(str((record.get("environment") or {}).get("threads", "?")))
        if not costs:
            continue
        frame = pd.DataFrame(costs)
        rows.append({
            "chapter": chapter.name, "runs": len(costs), "epochs": int(frame["epochs"].sum()),
            "images (M)": frame["images"].sum() / 1e6, "train min": frame["train s"].sum() / 60,
            "eval min": frame["eval s"].sum() / 60, "threads": ",".join(sorted(threads)),
            **{p: frame[p].sum() for p in PhaseClock.PHASES},
        })
    table = pd.DataFrame(rows)
    if not table.empty:
        table["total min"] = table["train min"] + table["eval min"]
        total = table.sum(numeric_only=True).to_dict()
        table = pd.concat([table, pd.DataFrame([{**total, "chapter": "all", "threads": ""}])], ignore_index=True)
        table[["runs", "epochs"]] = table[["runs", "epochs"]].astype(int)
        timed = table[list(PhaseClock.PHASES)].sum(axis=1)
        inside = table["forward"] + table["backward"]
        table["outside %"] = (100 * (1 - inside / timed)).where(timed > 0)
    return table


def phase_shares(table: pd.DataFrame) -> pd.DataFrame:
    """Per chapter, each step phase's share (%) of the timed steps' seconds (chapters whose
    records hold no phase timings are left out)."""
    phases = table.set_index("chapter")[list(PhaseClock.PHASES)]
    timed = phases.sum(axis=1)
    return (100 * phases.div(timed, axis=0))[timed > 0]


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--profile", default="default")
    args = parser.parse_args(argv)
    table = chapter_table(args.results, args.profile)
    print(f"run records under {args.results} at profile {args.profile!r}")
    if table.empty:
        print("no run records")
        return table
    columns = ["chapter", "runs", "epochs", "images (M)", "train min", "eval min", "threads", "total min", "outside %"]
    print(table[columns].to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
    shares = phase_shares(table)
    print("\nshare of the training steps' time per phase (%), runs trained on the CPU:")
    print(shares.to_string(float_format=lambda v: f"{v:.1f}") if not shares.empty else "no record holds phase timings yet")
    return table


if __name__ == "__main__":
    main()
