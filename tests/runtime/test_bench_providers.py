"""bench/providers.py still runs (it imports runtime internals that move), and under its
faults every HTTP request is one attempt, for both SDK providers. Figures are not checked."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .helpers import REPO, env

pytest.importorskip("aiohttp")
pytest.importorskip("anthropic")
pytest.importorskip("openai")


def test_bench_providers_runs_and_requests_equal_attempts():
    r = subprocess.run([sys.executable, str(REPO / "bench" / "providers.py"), "--calls", "20", "--repeat", "1",
                        "--imports", "0"], capture_output=True, text=True, timeout=300, env=env())
    assert r.returncode == 0, r.stdout + r.stderr
    checks = re.findall(r"requests (\d+) == (?:calls|attempts) (\d+): (True|False)", r.stdout)
    assert len(checks) == 4, r.stdout  # agent and run, for anthropic and openai
    assert all(a == b and ok == "True" for a, b, ok in checks), r.stdout
    assert all(int(a) > 20 for a, _, _ in checks), r.stdout  # faults were injected and retried
