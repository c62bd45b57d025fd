"""Running the real `mnemo` script as a person would, against the standalone fake model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_mnemo(
    command: str, stdin: str, *, home: Path, cwd: Path, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`mnemo <command>` with `stdin` typed in, its data in `home`, its model the fake
    OpenAI server started in a process of its own (`python -m tests.fakes.openai`).

    `user` is the console's login name (``$USER``), so the person is ``console-<user>``.
    """
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().split()[-1]
        env = {**os.environ, "OPENAI_BASE_URL": url + "/v1", "MNEMO_HOME": str(home)}
        if user is not None:
            env.update(USER=user, LOGNAME=user)
        mnemo = Path(sys.executable).parent / "mnemo"
        return subprocess.run(
            [str(mnemo), command], input=stdin, env=env, capture_output=True,
            text=True, timeout=60, cwd=cwd,
        )  # fmt: skip
    finally:
        fake.terminate()
        fake.wait(timeout=10)
