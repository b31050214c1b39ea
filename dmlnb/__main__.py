"""``python -m dmlnb``: the command line (:mod:`dmlnb.cli`)."""

from __future__ import annotations

import sys

from dmlnb.cli import main

if __name__ == "__main__":
    sys.exit(main())
