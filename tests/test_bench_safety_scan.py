"""bench/safety_scan.py --grounding runs and prints the case table's figures: the old and
the new check side by side, and written / staged / dropped under each write_approval."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.timing import scaled

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "grounding_cases.jsonl"


def test_the_grounding_figures_print_for_every_write_approval() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "safety_scan.py"), "--grounding"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=scaled(120),
    ).stdout
    total = sum(1 for line in CASES.read_text(encoding="utf-8").splitlines() if line)
    assert out.startswith("machine: ")
    assert f"grounding case table tests/data/grounding_cases.jsonl: {total} cases" in out
    written = re.search(r"refuse-cases written +(?:n/a|\S+ \(\S+\)) +(\d+)/(\d+)", out)
    assert written is not None, out
    refuse = sum(json.loads(line)["expect"] == "refuse" for line in CASES.open(encoding="utf-8"))
    assert int(written.group(2)) == refuse and int(written.group(1)) <= 1
    fates = re.findall(r"new +(\d+) \( *\d+\) / +(\d+) \( *\d+\) / +(\d+) \( *\d+\)", out)
    assert len(fates) == 3, out  # off, background, all
    off, background, every = ([int(n) for n in row] for row in fates)
    assert sum(off) == total and off[1] == 0  # off: grounded written, the rest dropped
    assert background == every == [0, total, 0]  # a background job's writes all wait
