"""Hostile configuration files: how long `load_config` takes to refuse (or read) each.

Before issue 10 the 9-level "billion laughs" alias bomb took about 87 s and
3 GB and then aborted; a non-UTF-8 file or 20,000 nested lists gave a
traceback. Now every file is refused with one line, or read, in about a second
at most: the file is capped at 1 MiB, aliases are refused, nesting and the
number of keys and values are bounded.

    python bench/config_hostile.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.config import MAX_CONFIG_BYTES, load_config  # noqa: E402
from gateway.errors import ConfigError  # noqa: E402

LAUGHS = b"a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + b"".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n".encode()
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
CASES = {
    "billion laughs, 9 levels": LAUGHS,
    "not UTF-8": b"llm:\n  model: caf\xe9\n",
    "2 MiB file": b"# " + b"x" * (2 << 20),
    "1 MiB of [1,1,1,...]": b"llm: {model: [" + b"1," * 520_000 + b"]}\n",
    "1 MiB block list": b"llm:\n  model:\n" + b"  - 1\n" * 174_000,
    "1 MiB of [[[...]]]": b"llm: " + b"[" * 524_000 + b"]" * 524_000,
    "1 MiB plain scalar": b"llm: {model: " + b"x" * (MAX_CONFIG_BYTES - 20) + b"}\n",
    "1 MiB comment": b"# " + b"x" * (MAX_CONFIG_BYTES - 10) + b"\n",
    "10,000-digit integer": b"llm: {timeout: " + b"9" * 10_000 + b"}\n",
}


def main() -> None:
    print(describe())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mnemo.yaml"
        for name, data in CASES.items():
            path.write_bytes(data[: 2 * MAX_CONFIG_BYTES + 16])
            start = time.perf_counter()
            try:
                load_config(path, environ={})
                outcome = "read"
            except ConfigError as exc:
                outcome = str(exc).replace(str(path), "FILE")
            print(f"{name:26} {time.perf_counter() - start:6.2f} s  {outcome[:90]}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
