"""The one time factor (tests/timing.py): read from MNEMO_TEST_TIME_SCALE, applied to the
polling helpers and to every test's pytest-timeout limit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import timing
from tests.timing import ENV, SCALE, scaled, time_scale, wait_until, wait_until_sync

ROOT = Path(__file__).resolve().parents[1]


def test_the_factor_is_one_unless_set_and_must_be_a_positive_number() -> None:
    assert time_scale({}) == 1.0
    assert time_scale({ENV: ""}) == 1.0
    assert time_scale({ENV: "3"}) == 3.0
    assert time_scale({ENV: " 0.5 "}) == 0.5
    for bad in ("0", "-1", "fast", "nan", "inf"):
        with pytest.raises(ValueError, match=ENV):
            time_scale({ENV: bad})


def test_scaled_multiplies_by_the_factor_read_at_import() -> None:
    assert scaled(2.0) == 2.0 * SCALE
    code = "from tests.timing import SCALE, scaled; print(SCALE, scaled(10))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={ENV: "3", "PATH": ""}, cwd=ROOT,
        capture_output=True, text=True, check=True, timeout=scaled(60),
    ).stdout  # fmt: skip
    assert out.split() == ["3.0", "30.0"]


async def test_wait_until_returns_the_probes_value_sync_or_async() -> None:
    values = iter([0, 0, "yes"])
    assert await wait_until(lambda: next(values), timeout=1) == "yes"

    async def probe() -> int:
        return 7

    assert await wait_until(probe, timeout=1) == 7
    assert wait_until_sync(lambda: [1], timeout=1) == [1]


async def test_a_wait_gives_up_after_the_scaled_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "SCALE", 4.0)  # the module's own factor, as if MNEMO_...=4
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"not within 0\.2 s: never"):
        await wait_until(lambda: False, timeout=0.05, what="never")
    assert time.monotonic() - start >= 0.2
    with pytest.raises(TimeoutError, match=r"not within 0\.2 s"):
        wait_until_sync(lambda: None, timeout=0.05)


@pytest.mark.timeout(7)
def test_a_timeout_mark_is_scaled(request: pytest.FixtureRequest) -> None:
    mark = request.node.get_closest_marker("timeout")
    assert mark.args[0] == 7 * SCALE


def test_the_ini_timeout_is_scaled_for_an_unmarked_test(request: pytest.FixtureRequest) -> None:
    mark = request.node.get_closest_marker("timeout")
    assert mark.args[0] == float(request.config.getini("timeout")) * SCALE


def test_the_limits_follow_the_factor_in_a_run_at_scale_3() -> None:
    """The two tests above, run at factor 3: a mark left unscaled would fail them."""
    env = {**os.environ, ENV: "3"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-rA",
         f"{__file__}::test_a_timeout_mark_is_scaled",
         f"{__file__}::test_the_ini_timeout_is_scaled_for_an_unmarked_test"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=scaled(120),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("PASSED") == 2, run.stdout


RAW_DEADLINES = re.compile(
    r"asyncio\.wait_for\(.*, *(timeout=)?[0-9.]+\)"  # asyncio.wait_for(x, 5)
    r"|asyncio\.timeout\([0-9.]+\)"  # async with asyncio.timeout(5)
    r"|monotonic\(\) \+ [0-9.]+\b"  # deadline = time.monotonic() + 10
    r"|\.(communicate|wait|join|result)\((timeout=)?[0-9.]+\)"  # proc.wait(timeout=30)
)


def test_no_test_waits_on_a_number_of_seconds_the_factor_does_not_scale() -> None:
    """A deadline written as a bare number in a test (not through `scaled`) is found."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name in ("timing.py", "test_timing.py"):
            continue
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if RAW_DEADLINES.search(text) and "scaled(" not in text:
                found.append(f"{path.relative_to(ROOT)}:{number}: {text.strip()}")
    assert found == [], "wrap these in tests.timing.scaled():\n" + "\n".join(found)
    assert RAW_DEADLINES.search("        await asyncio.wait_for(task, 5)")  # the check sees one
    assert RAW_DEADLINES.search("    proc.wait(timeout=30)")
