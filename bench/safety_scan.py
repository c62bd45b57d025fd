"""Safety scan: worst-case timings before and after RE2, throughput, labelled-set figures.

Run: .venv/bin/python bench/safety_scan.py [--grounding] (only the grounding figures)

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

Grounding (issue 34), on the case table tests/data/grounding_cases.jsonl: the
old check (gateway/jobs/support.py as it was when the table was written, taken
from git history) beside the new one (`memory_core.grounding`): refuse-cases
written, write-cases refused, and for each ``memory.write_approval`` how many
of the table's entries are written, staged and dropped. The new check's three
figures come from the real path, each case proposed to the memory tool of
`gateway.jobs.approvals.learning_tools`/`background_tools` with a real
`FileMemoryStore` in a temporary directory; the old check's are computed from
its verdicts (off: supported is written, the rest dropped; background and all:
everything a background job writes is staged).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.jobs.approvals import background_tools, learning_tools  # noqa: E402
from gateway.jobs.context import BackgroundSettings, JobContext, WriteApproval  # noqa: E402
from gateway.jobs.support import said_texts  # noqa: E402
from memory_core import (  # noqa: E402
    FileMemoryStore,
    Origin,
    OwnWords,
    SkillsStore,
    StoredMessage,
    check,
    instruction_reasons,
    scan,
)

TIMEOUT = 10.0
DATA = ROOT / "tests" / "data" / "safety_labelled.jsonl"
BLIND = ROOT / "tests" / "data" / "safety_blind.jsonl"
CASES = ROOT / "tests" / "data" / "grounding_cases.jsonl"
MODES: tuple[WriteApproval, ...] = ("off", "background", "all")
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


def _old_check() -> Callable[[str, list[str]], bool] | None:
    """The check as it was when the case table was written (git history), or None."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    try:
        added = git("log", "--diff-filter=A", "--format=%H", "--", str(CASES.relative_to(ROOT)))
        source = git("show", f"{added.split()[-1]}:gateway/jobs/support.py")
    except (subprocess.CalledProcessError, FileNotFoundError, IndexError):
        return None
    module = types.ModuleType("old_support")
    sys.modules["old_support"] = module  # dataclasses look their module up
    exec(compile(source, "old_support", "exec"), module.__dict__)

    def supported(entry: str, said: list[str]) -> bool:
        return bool(module.check(entry, module.OwnWords(said)).supported)

    return supported


def _stored(row: dict[str, Any]) -> list[StoredMessage]:
    return [
        StoredMessage(n, 1, m["role"], m["text"], float(n), None, None, None, None, None,
                      not m.get("forwarded", False))
        for n, m in enumerate(row["messages"])
    ]  # fmt: skip


def _verdict_figures(rows: list[dict[str, Any]], ok: list[bool]) -> dict[str, Counter[str]]:
    """Written, staged and dropped under each mode, from the verdicts alone."""
    figures: dict[str, Counter[str]] = {}
    for mode in MODES:
        figures[mode] = Counter(
            ("staged" if mode != "off" else "written" if good else "dropped", row["expect"])
            for row, good in zip(rows, ok, strict=True)
        )
    return figures


async def _through_tools(rows: list[dict[str, Any]], mode: WriteApproval) -> Counter[str]:
    """Each case's entry proposed to a review's memory tool, as `mnemo run` builds it."""
    found: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as home:
        settings = BackgroundSettings(0, 0, "off", 600.0, False, 60.0, write_approval=mode)
        ctx = JobContext(
            sessions=None,  # type: ignore[arg-type]  # not used by the learning tools
            memory=FileMemoryStore(Path(home)),
            skills=SkillsStore(Path(home) / "skills", Path(home) / "skills.json"),
            model=None,  # type: ignore[arg-type]  # the judge is off: no model is asked
            context_chars=0,
            settings=settings,
            notify=None,  # type: ignore[arg-type]
            locales=None,  # type: ignore[arg-type]
        )
        for n, row in enumerate(rows):
            user_key = f"telegram-case{n}"
            learning = learning_tools(ctx, user_key, Origin("review", 1))
            said = OwnWords(said_texts(_stored(row)))
            [memory] = [t for t in background_tools(ctx, learning, said, "review", user_key)
                        if t.name == "memory"]  # fmt: skip
            await memory.handler({"target": "user", "action": "add", "content": row["entry"]})
            await learning.settled()
            written = any(e.text == row["entry"] for e in ctx.memory.origins("user", user_key))
            fate = "written" if written else "staged" if learning.staged else "dropped"
            found[(fate, row["expect"])] += 1  # type: ignore[index]
    return found


def _fates(mode: str, check_name: str, figures: Counter[Any], how: str) -> None:
    cells = []
    for fate in ("written", "staged", "dropped"):
        refuse = figures[(fate, "refuse")]
        cells.append(f"{refuse + figures[(fate, 'write')]:>2} ({refuse:>2})")
    print(f"    {mode:<11} {check_name:<4} {' / '.join(cells)}   {how}")


def _staged_split(ok: list[bool]) -> str:
    grounded = sum(ok)
    return (
        f"staged under background and all: {grounded} grounded (they wait as learned in the "
        f"background), {len(ok) - grounded} not grounded (they wait with their reason)"
    )


def _own(row: dict[str, Any]) -> list[str]:
    return [m["text"] for m in row["messages"] if m["role"] == "user" and not m.get("forwarded")]


def grounding() -> None:
    rows = _rows(CASES)
    langs = ", ".join(sorted({r["lang"] for r in rows}))
    count = Counter(r["expect"] for r in rows)
    print(f"grounding case table {CASES.relative_to(ROOT)}: {len(rows)} cases "
          f"({count['refuse']} to refuse, {count['write']} to write; {langs})")  # fmt: skip
    new_ok = [check(r["entry"], OwnWords(_own(r))).supported for r in rows]
    old = _old_check()
    old_ok = [old(r["entry"], _own(r)) for r in rows] if old is not None else None
    print(f"  {'':<36} {'old check':>14} {'new check':>14}")
    for label, expect, wrong in (
        ("refuse-cases written", "refuse", True),
        ("write-cases refused", "write", False),
    ):
        cells = []
        for ok in (old_ok, new_ok):
            if ok is None:
                cells.append("n/a")
                continue
            hit = sum(r["expect"] == expect and o == wrong for r, o in zip(rows, ok, strict=True))
            cells.append(_rate(hit, count[expect]))
        print(f"  {label:<36} {cells[0]:>14} {cells[1]:>14}")
    missed = [r["id"] for r, o in zip(rows, new_ok, strict=True) if (r["expect"] == "write") != o]
    print(f"  new check's misses: {', '.join(missed) or 'none'}")
    print("  under memory.write_approval: written / staged / dropped (of them, refuse-cases)")
    for mode in MODES:
        if old_ok is not None:
            _fates(mode, "old", _verdict_figures(rows, old_ok)[mode], "from the verdicts")
        figures = asyncio.run(_through_tools(rows, mode))
        how = "through learning_tools/background_tools and a FileMemoryStore"
        _fates("" if old_ok is not None else mode, "new", figures, how)
    print(f"  new check, {_staged_split(new_ok)}")
    if old_ok is not None:
        print(f"  old check, {_staged_split(old_ok)}")
    _grounding_speed(old)


LONG_SESSION = 500
SPEED_ENTRIES = ("Plays the cello on Sundays", "Loves coffee and the garden", "Owns a boat")


def _grounding_speed(old: Callable[[str, list[str]], bool] | None) -> None:
    """The check over a session of `LONG_SESSION` messages: indexing them once, then one
    entry checked (best of three); the old check indexed the words on each call."""
    words = ["coffee", "tea", "dog", "cat", "Berlin", "Lisbon", "nurse", "piano", "garden"]
    texts = [
        f"my friend likes {words[n % 9]}, but I don't {words[(n + 3) % 9]}? "
        f"I love {words[(n + 5) % 9]} #{n}"
        for n in range(LONG_SESSION)
    ] + ["I play the cello on Sundays"]
    said = OwnWords(texts)
    build = _best(lambda: OwnWords(texts)) * 1000
    each = max(_best(lambda e=e: check(e, said)) for e in SPEED_ENTRIES) * 1000  # type: ignore[misc]
    line = f"  {LONG_SESSION} messages: index {build:.1f} ms, slowest check {each:.2f} ms (new)"
    if old is not None:
        both = max(_best(lambda e=e: old(e, texts)) for e in SPEED_ENTRIES) * 1000  # type: ignore[misc]
        line += f"; old check, index and check together: {both:.1f} ms"
    print(line)


if __name__ == "__main__":
    print(describe())
    if "--grounding" not in sys.argv[1:]:
        timings()
        throughput()
        labelled()
    grounding()
