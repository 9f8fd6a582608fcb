"""`benchmarks/libraries.py` measures corpus entries and writes its markdown table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import libraries  # noqa: E402


def test_measures_entries_and_writes_the_comparison(tmp_path):
    rows = libraries.measure_all(rounds=1, only="scipy.special.erf")
    assert rows and all(r["correct"] and r["loop_us"] > 0 and r["vmap_us"] > 0 for r in rows)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(rows))
    out = tmp_path / "table.md"
    libraries.main(["--markdown", str(out), f"one={path}", f"two={path}", f"two={path}"])
    text = out.read_text()
    assert "| scipy.special | erf | yes |" in text
    assert "one: median speed-up (batched)" in text and "two: ratio" in text
