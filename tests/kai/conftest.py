"""Puts tests/ on the import path so unit tests can share `helpers`, and this folder for `table_cluster`."""

import sys
from pathlib import Path

for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
