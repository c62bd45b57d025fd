"""The machine a benchmark ran on, printed beside its figures.

    from machine import describe   # bench/ is on sys.path when a script in it runs
    print(describe())

One line: CPU cores, Python, SQLite, the platform and the load average, so a
figure can be read beside the machine and the load that produced it.
"""

from __future__ import annotations

import os
import platform
import sqlite3


def load_average() -> str:
    """The 1/5/15-minute load average, or 'n/a' where the platform has none."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def describe() -> str:
    """One line naming the cores, Python, SQLite and platform, with the load average."""
    return (
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}; "
        f"load average {load_average()}"
    )


if __name__ == "__main__":
    print(describe())
