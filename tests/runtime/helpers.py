"""Hand-made compiled projects for runtime tests (a plan.json + prompts, as the compiler writes them)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harnessc import planfile
from harnessc.planfile import Plan

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def node(tid: str, **kw) -> dict:
    n = {
        "id": tid, "title": kw.pop("title", f"Task {tid}"), "phase": None, "done": False,
        "priority": "normal", "order": 0, "complexity": None, "tags": [], "goal": "",
        "depends_on": [], "contract": None,
        "completion_promise": None, "success": None, "accept": [], "context": [],
        "limits": {"max_iterations": 50, "max_time": 3600, "stuck_after": 3, "budget_usd": None},
        "retry": {"max_retries": 2, "on_failure": "retry", "delays": [0]},
        "routing": {"agent": "rehearsal", "chain": [], "reason": "test"},
        "estimate": {"input_tokens": 100, "output_tokens": 100, "cost_usd": None},
        "prompt": {"path": f"prompts/{tid}.md", "sha256": ""},
        "fingerprint": "fp-" + tid, "wave": 0,
    }
    for k in ("limits", "retry", "routing", "estimate"):
        if k in kw:
            n[k] = {**n[k], **kw.pop(k)}
    n.update(kw)
    return n


SIMPLE_CONTRACT = {
    "name": "summary", "description": "a summary",
    "json_schema": {"type": "object", "required": ["title", "score"],
                    "properties": {"title": {"type": "string", "minLength": 1},
                                   "score": {"type": "integer", "minimum": 0}},
                    "additionalProperties": False},
    "output": {"title": {"type": "str", "description": "", "required": True, "rules": [],
                         "example": "hello"},
               "score": {"type": "int", "description": "", "required": True, "rules": [],
                         "example": 3, "default": 0}},
    "output_rules": [], "accept": [], "on_failure": "retry", "max_retries": 2, "constraints": None,
}


def write_project(root: Path, nodes: list[dict], agents: dict | None = None,
                  contracts: dict | None = None, budget: dict | None = None,
                  concurrency: int = 4, templates: str | None = None, loop: dict | None = None) -> Plan:
    """Write roadmap.md, .harness/build/plan.json and prompts/<id>.md under root; the plan
    is returned as the runtime loads it (planfile checks the nodes' shape)."""
    root.mkdir(parents=True, exist_ok=True)
    roadmap = root / "roadmap.md"
    roadmap.write_text("# Test project\n\n## Tasks\n\n" + "".join(
        f"### {n['id']}: {n['title']}\n" for n in nodes), encoding="utf-8")
    build = root / ".harness" / "build"
    (build / "prompts").mkdir(parents=True, exist_ok=True)
    for i, n in enumerate(nodes):
        n.setdefault("order", i)
        if not n.get("order"):
            n["order"] = i
        text = f"# Task {n['id']}: {n['title']}\n\nDo the work for task {n['id']}.\n"
        (build / "prompts" / f"{n['id']}.md").write_text(text, encoding="utf-8")
        n["prompt"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    ids = [n["id"] for n in nodes]
    plan = {
        "version": 1, "harnessc": "0.1.0",
        "metadata": {"schema_version": 1, "root_name": root.name,
                     "sources": {"roadmap.md": hashlib.sha256(roadmap.read_bytes()).hexdigest()}},
        "project": {"title": "Test", "overview": ""},
        "templates": templates,
        "agents": agents or {"rehearsal": {"provider": "simulate"}},
        "budget": budget or {"max_cost_usd": None, "max_tokens": None},
        "defaults": {"max_retries": 2, "retry_delays": [0], "max_iterations": 50, "max_time": 3600,
                     "stuck_after": 3, "on_failure": "retry"},
        "concurrency": concurrency,
        "contracts": contracts or {},
        "nodes": nodes,
        "edges": [[d, n["id"]] for n in nodes for d in n["depends_on"]],
        "waves": [ids], "critical_path": ids[:1],
        "loop": loop_settings(**(loop or {})),
    }
    plan["assists"] = {"mutation_agent": plan["loop"]["recovery"]["mutation_agent"],  # as a build writes it
                       "summary_agent": plan["loop"]["context"]["summary_agent"],
                       "summarize_every": plan["loop"]["context"]["summarize_every"]}
    (build / "plan.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    return planfile.load(plan)


def loop_settings(**sections) -> dict:
    """harness.yaml `loop:` as a build writes it into plan.json: the defaults, with the given
    sections' keys changed (`loop_settings(alerts={"milestone_every": 2})`)."""
    from harnessc.compiler.ir import Loop

    data = Loop().model_dump(mode="json")
    for key, value in sections.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return data


def env(**extra) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def at_noon() -> dict:
    """env() with a time zone where it is about noon now: an agent's daily limit, which
    resets at local midnight, then resets hours after any test ends, whenever the suite runs
    (a task waits for a reset within its max_time instead of failing)."""
    return env(TZ=f"HCT{time.gmtime().tm_hour - 12:+d}")  # POSIX: HCT+11 is UTC-11


CLI = [PY, "-c", "from harnessc.cli import main; main()"]


def harnessc(root: Path, *args: str, timeout: float = 120, prelude: str = "", **kw) -> subprocess.CompletedProcess:
    """harnessc -C root ..., started in root as a user would (its hints then need no -C).
    `prelude`: Python run in that process first (a wait the test is not about, shortened)."""
    if Path(root).is_dir():
        kw.setdefault("cwd", root)
    cli = [PY, "-c", prelude + "\n" + CLI[-1]] if prelude else CLI
    return subprocess.run([*cli, "-C", str(root), *args], capture_output=True, text=True,
                          timeout=timeout, env=kw.pop("env", None) or env(), **kw)


# The breaker's 60 s cool-down (routing/health.py), for tests that wait it out to see what the
# half-open probe call does, not how long the breaker stays open.
SHORT_BREAKER = "import harnessc.runtime.routing.health as health; health.BREAKER_COOLDOWN = 0.5"

# The transient-error backoff (1 s, doubling: agents/errors.py), for tests of which errors are
# retried and how they are recorded, not of how long a retry waits.
SHORT_BACKOFF = "import harnessc.runtime.agents.errors as errors; errors.BACKOFF_BASE = 0.05"


# Runs argv and writes its peak resident memory (KiB, wait4's ru_maxrss) to a file. A child
# forked straight from the test process starts with that process's peak (Linux copies the
# high-water mark across fork and exec), so the measured one is forked from this small one.
_PEAK = ("import os, subprocess, sys\n"
         "p = subprocess.Popen(sys.argv[2:])\n"
         "_, status, usage = os.wait4(p.pid, 0)\n"
         "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
         "sys.exit(os.waitstatus_to_exitcode(status))\n")


def peak_rss(argv: list[str], record: Path, **kw) -> tuple[subprocess.CompletedProcess, int]:
    """Run argv (subprocess.run's keywords); its result and its own peak memory in bytes."""
    res = subprocess.run([PY, "-c", _PEAK, str(record), *argv], **kw)
    return res, int(record.read_text()) * 1024


def spawn(root: Path, *args: str, **kw) -> subprocess.Popen:
    if Path(root).is_dir():
        kw.setdefault("cwd", root)
    return subprocess.Popen([*CLI, "-C", str(root), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=kw.pop("env", None) or env(), **kw)


def git(root: Path, *args: str) -> str:
    """Run git in `root` (raises on failure); its output."""
    res = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if res.returncode:
        error = subprocess.CalledProcessError(res.returncode, ["git", *args], res.stdout, res.stderr)
        error.add_note(f"git's stderr: {res.stderr.strip()}")
        raise error
    return res.stdout


def git_repo(root: Path, commit: bool = True) -> None:
    """Make `root` a git repository with an identity and `.harness/` ignored; with `commit`,
    everything in it is the first commit ("start")."""
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "T")
    if commit:
        (root / ".gitignore").write_text(".harness/\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "start")
