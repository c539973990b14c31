#!/usr/bin/env python3
"""Lint benchmark: whole-process `harnessc lint` on specs/demo against its peers.

Each round runs, in turn (the order rotates each round so no tool always goes first):

- python -c pass                        the interpreter's own start-up: a floor, for reference
- harnessc -C specs/demo lint           the thing measured
- check-jsonschema --schemafile harnessc/schemas/contracts.schema.json specs/demo/contracts.yaml
- yamllint specs/demo/contracts.yaml

All four are console entry points in the same bin dir as sys.executable (run this with the
venv's python). A missing peer is skipped with a note. The medians and the ratios
lint / check-jsonschema and lint / yamllint are printed against the targets.

Usage:
    python bench/lint.py              # 15 rounds
    python bench/lint.py --rounds 5

harnessc's package is byte-compiled first (compileall), as pip does for the peers at
install time. Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import harnessc_env  # bench/: this script's directory

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "specs" / "demo"
SCHEMA = REPO / "harnessc" / "schemas" / "contracts.schema.json"  # the package's copy, committed
TARGET_VS_CHECK_JSONSCHEMA = 0.45  # issue 18: it drifted to 0.49-0.54x from 0.43-0.45x
TARGET_VS_YAMLLINT = 1.5


def _bin(name: str) -> str | None:
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() and os.access(path, os.X_OK) else None


def _time(argv: list[str], cwd: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, proc.returncode


def main(argv: list[str] | None = None) -> None:
    harnessc_env.require()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)

    commands: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    notes: list[str] = []
    harnessc = _bin("harnessc")
    if harnessc is None:
        raise SystemExit(f"no harnessc next to {sys.executable}: run this with the venv's python")
    commands["harnessc lint"] = [harnessc, "-C", str(DEMO), "lint"]
    cjs = _bin("check-jsonschema")
    if cjs is None:
        notes.append("check-jsonschema: not installed next to python, skipped")
    else:
        commands["check-jsonschema"] = [cjs, "--schemafile", str(SCHEMA), str(DEMO / "contracts.yaml")]
    yl = _bin("yamllint")
    if yl is None:
        notes.append("yamllint: not installed next to python, skipped")
    else:
        commands["yamllint"] = [yl, str(DEMO / "contracts.yaml")]

    # The peers run from site-packages, byte-compiled by pip at install time; an editable
    # harnessc under PYTHONDONTWRITEBYTECODE=1 would recompile every module on every run.
    # Compile it the same way first, so all tools start as they do for a user.
    import compileall

    compileall.compile_dir(str(REPO / "harnessc"), quiet=1)
    names = list(commands)
    codes: dict[str, set[int]] = {n: set() for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up: file cache, .pyc files
        _time(commands[name], REPO)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            t, rc = _time(commands[name], REPO)
            times[name].append(t)
            codes[name].add(rc)

    med = {n: statistics.median(ts) for n, ts in times.items()}
    print(f"harnessc lint bench: {args.rounds} rounds, python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print()
    print(f"{'command':<18} {'median ms':>10} {'min ms':>8} {'max ms':>8}  exit")
    for n in names:
        ts = times[n]
        print(f"{n:<18} {med[n] * 1000:>10.1f} {min(ts) * 1000:>8.1f} {max(ts) * 1000:>8.1f}  "
              + ",".join(str(c) for c in sorted(codes[n])))
    print()
    print("targets:")
    lint = med["harnessc lint"]
    for peer, target in (("check-jsonschema", TARGET_VS_CHECK_JSONSCHEMA), ("yamllint", TARGET_VS_YAMLLINT)):
        if peer not in med:
            print(f"  lint <= {target}x {peer:<17} skipped")
            continue
        ratio = lint / med[peer]
        print(f"  lint <= {target}x {peer:<17} {ratio:.2f}x  {'ok' if ratio <= target else 'MISSED'}")
    floor = med["python -c pass"]
    print(f"  (reference) lint / python start-up  {lint / floor:.1f}x; lint minus start-up {(lint - floor) * 1000:.0f} ms")
    for note in notes:
        print(f"  note: {note}")
    if codes["harnessc lint"] != {0}:
        print(f"  note: harnessc lint exited {sorted(codes['harnessc lint'])} on specs/demo (expected 0)")


if __name__ == "__main__":
    main()
