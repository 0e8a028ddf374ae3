"""Where the tests find the repository's files and the shared data (never an absolute
path of one machine): the repository root, the tests' own data, ``../shared``."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples"
SHARED = Path(os.environ.get("ANDREAS_SHARED_DIR") or ROOT.parent / "shared")
