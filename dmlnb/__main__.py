"""``python -m dmlnb``: the command line (see :mod:`dmlnb.render`; its ``train`` command is :mod:`dmlnb.launch`)."""

from __future__ import annotations

import sys

from dmlnb.render import main

if __name__ == "__main__":
    sys.exit(main())
