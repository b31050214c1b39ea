"""The front page's verdict table (``book/verdicts.md``) is what the chapters' ``claims.json``
give (:mod:`dmlnb.chapter.summary`), and the counting is right."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from dmlnb.chapter.summary import book_verdicts, verdicts_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_the_front_page_is_what_the_claims_give() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "front_page.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "{include} verdicts.md" in (ROOT / "book" / "intro.md").read_text()


def _claim(category: str, reason: str | None = None) -> dict:
    return {"category": category, "reason": reason}


def test_claims_are_counted_by_category_and_reason(tmp_path: Path) -> None:
    claims = [
        _claim("holds"),
        _claim("holds (qualified)"),
        _claim("does not hold"),
        _claim("inconclusive"),
        _claim("not tested at this scale", "needs-gpu"),
        _claim("not tested at this scale", "needs-paper-data"),
        _claim("not tested at this scale"),  # set aside: its runs collapsed
    ]
    for chapter, these in (("01_a", claims), ("02_b", claims[-3:])):
        folder = tmp_path / chapter / "default"
        folder.mkdir(parents=True)
        (folder / "claims.json").write_text(json.dumps({"claims": these}))
    frame = book_verdicts(tmp_path).set_index("chapter")
    a = frame.loc["01_a"]
    assert (a["claims"], a["holds"], a["does not hold"], a["needs-gpu"]) == (7, 1, 1, 1)
    assert (a["not tested at this scale"], a["set-aside"]) == (3, 1)
    assert a["decided"] == 3 / 4  # of the four tested
    assert math.isnan(frame.loc["02_b", "decided"])  # none tested
    table = verdicts_markdown(frame.reset_index())
    assert "{doc}`../notebooks/01_a`" in table and "| 75% |" in table
    assert table.splitlines()[-1].startswith("| **book** | **10** |")  # 7 + 3 claims
