"""What the book's runs cost, per chapter, read from the run records a profile left in ``results/``.

    python benchmarks/book.py                     # the committed default-profile records
    python benchmarks/book.py --profile smoke --results /path/to/results

One row per chapter: runs, epochs trained, images processed, training and evaluation seconds as
the records measured them (on the machines and thread counts that trained them, named in the
``threads`` column), and the total. Images count only the epochs whose record holds img/s (the
SSDML algorithm's own runs record none). This is the cost of regenerating the chapter with
``retrain=True`` on a machine like the one that made the records; re-rendering from the records
costs none of it. Not yet measured here: the share of a step spent outside the model's forward
and backward pass (sampler, hooks, loss bookkeeping), which the records do not hold.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def run_costs(record: dict) -> dict[str, float]:
    """Epochs, images, training and evaluation seconds of one run record's history."""
    rows = [r for r in record.get("history", []) if isinstance(r, dict) and r.get("epoch", 0) > 0]
    train = sum(r.get("train_seconds") or 0.0 for r in rows)
    timed = [r for r in rows if r.get("images_per_second") is not None]  # SSDML records hold no img/s
    images = sum(r["images_per_second"] * (r.get("train_seconds") or 0.0) for r in timed) if timed else float("nan")
    evaluation = sum((r.get("metrics") or {}).get("eval_seconds", 0.0) for r in record.get("history", []))
    return {"epochs": len(rows), "images": images, "train s": train, "eval s": evaluation}


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
        })
    table = pd.DataFrame(rows)
    if not table.empty:
        table["total min"] = table["train min"] + table["eval min"]
        total = table.sum(numeric_only=True).to_dict()
        table = pd.concat([table, pd.DataFrame([{**total, "chapter": "all", "threads": ""}])], ignore_index=True)
        table[["runs", "epochs"]] = table[["runs", "epochs"]].astype(int)
    return table


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--profile", default="default")
    args = parser.parse_args(argv)
    table = chapter_table(args.results, args.profile)
    print(f"run records under {args.results} at profile {args.profile!r}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return table


if __name__ == "__main__":
    main()
