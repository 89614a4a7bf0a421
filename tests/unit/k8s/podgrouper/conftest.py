"""Puts this folder on the import path so the pod grouper tests can share `pg_objects`."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
