"""Write the front page's verdict table (``book/verdicts.md``) from every chapter's claims.

Usage: python tools/front_page.py [--check]

Reads ``results/<chapter>/default/claims.json`` (each chapter's render writes it) through
:func:`dmlnb.chapter.summary.book_verdicts`; ``--check`` exits 1 when the file is not what the
claims give (``tests/test_front_page.py`` runs that check).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dmlnb.chapter.summary import book_verdicts, verdicts_markdown

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "book" / "verdicts.md"

HEADER = """<!-- Written by `python tools/front_page.py` from every chapter's claims.json. -->

Each chapter's claims at the `default` profile, counted by the book's verdict (the rule is in
{doc}`protocol`); a claim this scale cannot test is counted by its typed reason (*data*: it
needs the paper's data; *GPU*: a GPU's budget; *never*: no run can test it; *not run yet*: this
scale could test it and the chapter has not run it, a gap) or, when its runs could not exercise
it (a collapsed run, a metric at its ceiling), as *set aside*; *decided* is the share of the
tested claims whose verdict is "holds" or "does not hold".

"""


def text(root: Path = ROOT) -> str:
    """The file's content from the claims under ``root / "results"``."""
    return HEADER + verdicts_markdown(book_verdicts(root / "results", "default"))


def main(argv: list[str]) -> int:
    wanted = text()
    if "--check" in argv:
        if not TARGET.is_file() or TARGET.read_text() != wanted:
            print(f"{TARGET} is stale: run python tools/front_page.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
