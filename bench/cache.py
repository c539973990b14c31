"""Prompt caching benchmark: how much of a run's input the providers can serve from their cache.

    python bench/cache.py [--tasks 100] [--shared-tokens 4000] [--jobs 8]

Four cases: a shared ~4k-token text as the project overview, or as a context file every task
reads, each on an `anthropic` and an `openai` agent. For each, a project of `--tasks` tasks
(each with its own title, goal and a contract) is built and run (`harnessc run`, a whole
process) against the stand-in server (tests/runtime/fakeapi.py, in this process on its own
thread), which records every request body. The figure is computed from those bodies alone,
as the provider would cache them:

* anthropic caches up to a `cache_control` breakpoint: a request's cacheable tokens are
  those of its longest prefix (system, then message blocks) ending at one of its
  breakpoints that an earlier request also ended a breakpoint at, when that prefix reaches
  the model's minimum (2,048 tokens for claude-sonnet-4-6);
* openai caches the longest prefix (system message, then user message) a request shares with
  an earlier one, from 1,024 tokens on, in steps of 128.

cacheable share = cacheable tokens / input tokens, over all requests (tokens: characters / 4,
harnessc's estimate; the ratio is what counts). Goal: >= 90%; about 94-96% is the best (the
first request of a run writes the cache, and each task's own text is never cached).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require("aiohttp", "anthropic", "openai")
REPO = harnessc_env.REPO
sys.path.insert(0, str(REPO))

from tests.runtime.fakeapi import Reply, ThreadedFakeAPI  # noqa: E402

CHARS_PER_TOKEN = 4
MINIMUM = 1024  # tokens: the smallest prefix openai caches
ANTHROPIC_MINIMUM = 2048  # tokens: the smallest prefix claude-sonnet-4-6 caches (the provider's figure)
OPENAI_STEP = 128
KEYS = {"ANTHROPIC_API_KEY": "bench-anthropic-key-0000", "OPENAI_API_KEY": "bench-openai-key-0000"}
MODEL = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5.2"}
CASES = [(provider, where) for where in ("overview", "context") for provider in ("anthropic", "openai")]


class Answering(ThreadedFakeAPI):
    """The stand-in server, answering every task with a note its contract accepts."""

    def next_reply(self, body: Any) -> Reply:
        return Reply.ok('{"title": "a note"}', usage={"input": 100, "output": 10})


def shared_text(tokens: int) -> str:
    line = "The shared guide: every task of this project reads these conventions first. "
    return "\n".join(line for _ in range(tokens * CHARS_PER_TOKEN // (len(line) + 1)))


def write_project(root: Path, provider: str, where: str, base_url: str, tasks: int, shared_tokens: int,
                  jobs: int) -> None:
    text = shared_text(shared_tokens)
    overview = text if where == "overview" else "Notes on a project, one per task."
    (root / "docs").mkdir(parents=True)
    if where == "context":
        (root / "docs" / "guide.md").write_text(text + "\n", encoding="utf-8")
    lines = [f"# Cache bench\n\n{overview}\n\n## Tasks\n"]
    for i in range(tasks):
        context = "  - context: docs/guide.md\n" if where == "context" else ""
        lines.append(f"- [ ] **note-{i:03d}**: Write note {i} about topic {i * 7919 % 1000}\n"
                     f"  - contract: note\n{context}\n  Goal: Write note {i}: what topic {i} means for the team.\n")
    (root / "roadmap.md").write_text("\n".join(lines), encoding="utf-8")
    (root / "contracts.yaml").write_text(textwrap.dedent("""\
        contracts:
          note:
            description: A note
            output:
              title: {type: str, description: The note's title, example: a note}
        """), encoding="utf-8")
    url = base_url if provider == "anthropic" else base_url + "/v1"
    (root / "harness.yaml").write_text(
        f"agents:\n  llm: {{provider: {provider}, model: {MODEL[provider]}, base_url: '{url}',"
        f" price: {{input: 3.0, output: 15.0}}}}\nrouting: {{default: llm}}\nconcurrency: {jobs}\n", encoding="utf-8")


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def anthropic_share(bodies: list[dict]) -> tuple[int, int]:
    """(cacheable tokens, input tokens) of Messages requests, from their breakpoints."""
    seen: set[str] = set()
    cacheable = total = 0
    for body in bodies:
        system = body.get("system") or []
        content = body["messages"][0]["content"]
        blocks = list(system) + (content if isinstance(content, list) else [{"type": "text", "text": content}])
        prefix, ends = "", []
        for b in blocks:
            prefix += b["text"]
            if "cache_control" in b:
                ends.append(prefix)
        total += tokens(len(prefix))
        hits = [len(p) for p in ends if p in seen and tokens(len(p)) >= ANTHROPIC_MINIMUM]
        cacheable += tokens(max(hits, default=0))
        seen.update(ends)
    return cacheable, total


def openai_share(bodies: list[dict]) -> tuple[int, int]:
    """(cacheable tokens, input tokens) of Chat Completions requests: the longest prefix shared
    with an earlier request (with the same prompt_cache_key), cached from 1,024 tokens in
    steps of 128."""
    earlier: dict[Any, list[str]] = {}
    cacheable = total = 0
    for body in bodies:
        text = "".join(m["content"] for m in body["messages"])
        total += tokens(len(text))
        same_key = earlier.setdefault(body.get("prompt_cache_key"), [])
        shared = tokens(max((common_prefix(text, e) for e in same_key), default=0))
        if shared >= MINIMUM:
            cacheable += MINIMUM + (shared - MINIMUM) // OPENAI_STEP * OPENAI_STEP
        same_key.append(text)
    return cacheable, total


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of a and b (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def run_case(provider: str, where: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp, Answering() as api:
        root = Path(tmp) / "project"
        write_project(root, provider, where, api.base_url, args.tasks, args.shared_tokens, args.jobs)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env.update(KEYS, PYTHONPATH=str(REPO))
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "harnessc", "-C", str(root), "run"], capture_output=True,
                             text=True, env=env, timeout=900)
        elapsed = time.monotonic() - started
        bodies = [r.body for r in api.requests]
    if run.returncode != 0:
        raise SystemExit(f"{provider}/{where}: run failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    cacheable, total = (anthropic_share if provider == "anthropic" else openai_share)(bodies)
    return {"provider": provider, "shared text in": where, "requests": len(bodies),
            "input tokens": total, "cacheable": cacheable, "share": cacheable / total if total else 0.0,
            "run s": elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--shared-tokens", type=int, default=4000)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    results = [run_case(provider, where, args) for provider, where in CASES]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"load average {os.getloadavg()[0]:.2f}; {args.tasks} tasks sharing a ~{args.shared_tokens:,}-token text")
    print(f"{'provider':<10} {'shared text in':<15} {'requests':>8} {'input tok':>10} {'cacheable':>10} "
          f"{'share':>6} {'run s':>6}")
    for r in results:
        print(f"{r['provider']:<10} {r['shared text in']:<15} {r['requests']:>8} {r['input tokens']:>10,} "
              f"{r['cacheable']:>10,} {r['share']:>6.1%} {r['run s']:>6.1f}")
    worst = min(r["share"] for r in results)
    print(f"lowest share {worst:.1%} (goal >= 90%; the best achievable is about 94-96%)")
    print(f"median share {statistics.median(r['share'] for r in results):.1%}")


if __name__ == "__main__":
    main()
