"""Safety scan: worst-case timings before and after RE2, throughput, labelled-set figures.

Run: .venv/bin/python bench/safety_scan.py

For the labelled set (tune and holdout apart) and the blind set written
without the rules (tests/data/safety_blind.jsonl, if present), it prints: the
share of malicious entries refused by the scan, the share of the rest that
`instruction_reasons` stages, refused-or-staged, the share of benign entries
falsely refused, and the staging of benign entries split by what they should
get ("write": staging is a false staging; "stage": staging is right). The
labelled set has no "expected" field: its benign rows count as "write". Only
these aggregate rates are printed for the blind set, never an entry.

"Before" is the single-module scan as it was before issue 10 (taken from git
history), run in a subprocess that is killed after 10 s; "after" is the
current `memory_core.safety`, best of three runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from memory_core import instruction_reasons, scan  # noqa: E402

TIMEOUT = 10.0
DATA = ROOT / "tests" / "data" / "safety_labelled.jsonl"
BLIND = ROOT / "tests" / "data" / "safety_blind.jsonl"
WORST = {
    "ignore + 30 apostrophes": "ignore " + "'" * 30,
    "ignore + 34 apostrophes": "ignore " + "'" * 34,
    "Skip breakfast on ____…": "Skip breakfast on ____________________________ (fill in later)",
    "Drop-off: -----…": "Drop-off: ------------------------",
}
FILLER = {
    "100k apostrophes": "'" * 100_000,
    "100k curly apostrophes": "’" * 100_000,
    "100k dashes": "-" * 100_000,
    "100k underscores": "_" * 100_000,
    "100k 'ignore ' + filler": ("ignore " + "'’-_ " * 25_000)[:100_000],
}


def _old_source() -> str | None:
    """The pre-issue-10 memory_core/safety.py, made importable without the package."""
    try:
        commit = subprocess.run(
            ["git", "rev-list", "-n1", "HEAD", "--", "memory_core/safety.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        source = subprocess.run(
            ["git", "show", f"{commit}^:memory_core/safety.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return source.replace(
        "from memory_core.errors import UnsafeContentError", "UnsafeContentError = ValueError"
    )


def _old_time(source: str, text: str) -> str:
    program = textwrap.dedent(
        """
        import sys, time, types
        module = types.ModuleType("old_safety")
        sys.modules["old_safety"] = module
        exec(compile(SOURCE, "old_safety", "exec"), module.__dict__)
        start = time.perf_counter()
        module.scan(TEXT)
        print(time.perf_counter() - start)
        """
    )
    program = program.replace("SOURCE", repr(source)).replace("TEXT", repr(text))
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return f">{TIMEOUT:.0f} s (killed)"
    return f"{float(done.stdout.strip()) * 1000:.1f} ms"


def _best(action: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _rows(path: Path = DATA) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _refused(row: dict[str, str]) -> bool:
    if scan(row["text"]) is not None:
        return True
    # The previous entries of the set are clean alone, so scanning the join is
    # what the memory tool's neighbour check (`scan_joined`) amounts to here.
    return "previous" in row and scan(row["previous"] + "\n" + row["text"]) is not None


def timings() -> None:
    source = _old_source()
    print("worst adversarial inputs (issue 10)           before            after")
    for name, text in WORST.items():
        before = _old_time(source, text) if source else "n/a"
        after = _best(lambda t=text: scan(t)) * 1000
        print(f"  {name:<42} {before:>17}  {after:8.2f} ms")
    print("100,000 characters of filler (after only)")
    for name, text in FILLER.items():
        print(f"  {name:<42} {'':>17}  {_best(lambda t=text: scan(t)) * 1000:8.1f} ms")


def throughput() -> None:
    benign = [row["text"] for row in _rows() if row["label"] == "benign"]
    entries = benign * 40
    size = sum(len(t.encode("utf-8")) for t in entries)
    seconds = _best(lambda: [scan(t) for t in entries], runs=2)
    print(
        f"ordinary memory entries: {len(entries):,} entries, {size / 1e6:.2f} MB, "
        f"{seconds:.2f} s, {size / 1e6 / seconds:.2f} MB/s, "
        f"{seconds / len(entries) * 1e6:.0f} µs per entry"
    )
    ascii_text = " ".join(t for t in benign if t.isascii())
    big = (ascii_text * (200_000 // len(ascii_text) + 1))[:200_000]
    seconds = _best(lambda: scan(big), runs=2)
    print(
        f"one 200,000-character English text: {seconds * 1000:.0f} ms, "
        f"{len(big) / 1e6 / seconds:.2f} MB/s"
    )


def _rate(hit: int, total: int) -> str:
    return f"{hit}/{total} ({100 * hit / total:.1f}%)" if total else "0/0 (n/a)"


def _staged(row: dict[str, str]) -> bool:
    return bool(instruction_reasons(row["text"]))


def _figures(name: str, rows: list[dict[str, str]]) -> None:
    bad = [r for r in rows if r["label"] == "malicious"]
    good = [r for r in rows if r["label"] == "benign"]
    refused = [r for r in bad if _refused(r)]
    passed = [r for r in bad if not _refused(r)]
    staged = sum(_staged(r) for r in passed)
    print(f"  {name}: {len(bad)} malicious, {len(good)} benign")
    print(f"    malicious refused by the scan      {_rate(len(refused), len(bad))}")
    print(f"    of the rest, staged                {_rate(staged, len(passed))}")
    print(f"    malicious refused or staged        {_rate(len(refused) + staged, len(bad))}")
    print(
        f"    benign falsely refused             {_rate(sum(_refused(r) for r in good), len(good))}"
    )
    for expected, meaning in (("write", "false staging"), ("stage", "staged as it should be")):
        part = [r for r in good if r.get("expected", "write") == expected]
        hit = sum(_staged(r) for r in part if not _refused(r))
        print(f"    benign expected {expected:<5} staged ({meaning}) {_rate(hit, len(part))}")


def labelled() -> None:
    rows = _rows()
    print(f"labelled set {DATA.relative_to(ROOT)}: {len(rows)} entries")
    for split in ("tune", "holdout"):
        _figures(split, [r for r in rows if r["split"] == split])
    if BLIND.exists():
        # Aggregate rates only: the blind set measures the rules and is never read entry by entry.
        blind = _rows(BLIND)
        print(f"blind set {BLIND.relative_to(ROOT)}: {len(blind)} entries")
        _figures("blind", blind)
    else:
        print(f"blind set {BLIND.relative_to(ROOT)}: not present")


if __name__ == "__main__":
    print(describe())
    timings()
    throughput()
    labelled()
