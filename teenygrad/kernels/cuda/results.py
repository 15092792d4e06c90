"""The GPU figures benchmarks/gpu.py recorded (benchmarks/results/gpu.json), for chapter 11 to show.

The book is built on machines without a GPU, where nothing can be measured: the chapter shows what was recorded,
with the device and the date, or says that nothing was.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "gpu.json"


def recorded(path: Path = RESULTS) -> dict[str, Any] | None:
    """The last GPU run's figures, or None when no GPU run is recorded (or the file is not there: an installed
    teenygrad has no benchmarks/)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    return data if data.get("recorded") else None
