"""``python -m bench``: the same as ``python bench/run.py`` (every benchmark, one table)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import main  # noqa: E402

if __name__ == "__main__":
    main()
