"""bench/audit_groups.py: the two-group verdict table runs and says what the math says."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_group_table(capsys):
    spec = importlib.util.spec_from_file_location("audit_groups_bench",
                                                  ROOT / "bench" / "audit_groups.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--steps", "3"])
    lines = capsys.readouterr().out.splitlines()
    row = {line.split("  ")[0].strip(): line.split() for line in lines if "e-" in line
           or "e+" in line}
    assert row["gd"][1:2] + row["gd"][3:4] == ["keeps", "breaks"]
    assert row["scaled_gd λ=0"][2:3] + row["scaled_gd λ=0"][4:5] == ["keeps", "keeps"]
    assert row["Adam"][1:2] + row["Adam"][3:4] == ["breaks", "breaks"]
    assert any("cond(R) = 4" in line for line in lines)
