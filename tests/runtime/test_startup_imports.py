"""Start-up cost: what `run`, `lint` and `build` import (issue 18 part 3). A 1-task anthropic
run spends most of its start-up importing the SDK, so a run imports only what its plan needs:
a simulate-only plan loads no SDK, no HTTP client and no compiler parser; lint and build never
load an SDK, and lint loads only the checking path (imports are most of its time). Checked in a
fresh interpreter, from sys.modules after the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .helpers import REPO, env, node, write_project

SDKS = {"anthropic", "openai", "httpx", "httpx2", "aiohttp"}
# What a simulate-only run of a built plan has no use for: the SDKs, pydantic (the IR is the
# compiler's), lark (the roadmap parser: the plan is built), GitPython (not a repository),
# OpenTelemetry and protobuf (no `telemetry:`, no OTEL_EXPORTER_OTLP_ENDPOINT: off, at no cost).
NOT_FOR_A_SIMULATE_RUN = SDKS | {"pydantic", "pydantic_core", "lark", "git", "opentelemetry", "google", "requests"}

SCRIPT = """
import json, sys
from harnessc.cli import cli
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def imported(*args: str) -> set[str]:
    """Every module in sys.modules after `harnessc ARGS` (a package's parents are there too)."""
    quiet = {k: v for k, v in env().items() if not k.startswith("OTEL_")}  # telemetry off
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=120,
                         env=quiet)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_simulate_run_imports_no_sdk_no_http_client_and_no_compiler(tmp_path: Path) -> None:
    write_project(tmp_path, [node("t1"), node("t2", depends_on=["t1"])])
    modules = imported("-C", str(tmp_path), "run", "--no-build")
    assert "harnessc" in modules and "sqlite3" in modules  # it ran
    assert not modules & NOT_FOR_A_SIMULATE_RUN, modules & NOT_FOR_A_SIMULATE_RUN


def test_lint_and_build_import_no_sdk(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(REPO / "specs" / "demo", tmp_path / "demo", ignore=shutil.ignore_patterns(".harness"))
    for command in ("lint", "build"):
        modules = imported("-C", str(tmp_path / "demo"), command)
        assert "harnessc" in modules and not modules & SDKS, (command, modules & SDKS)
    assert (tmp_path / "demo" / ".harness" / "build" / "plan.json").is_file()


# What `harnessc lint` of a project without templates or isolation has no use for (lint's time
# is mostly imports: each of these was a few ms of it). Build's half of the compiler: the
# pydantic IR, plan.json's records, prompts and their Jinja templates, the plan's output. The
# runtime and its SQLite, asyncio and rich output; the report's matplotlib; `explain`'s texts.
# Real lark (the parsers are stand-alone tables), jsonschema (lint checks schemas itself),
# GitPython (no isolation). And two stdlib modules it once drifted into: logging (lark's
# stand-alone runtime logs nothing) and hashlib (OpenSSL; only a run names files by hash).
# The agents' typed settings (providers/config.py: ten dataclasses, a tenth of lint's time):
# lint checks harness.yaml against its schema, and only a run reads agents into records.
# The other commands' modules (cli.py imports a command's module when it is used), and a
# run's outcome and summaries (outcome.py; lint's exit codes are exitcodes.py's).
NOT_FOR_LINT = SDKS | {
    "pydantic", "pydantic_core", "jinja2", "harnessc.compiler.ir", "harnessc.planfile", "harnessc.providers.config",
    "harnessc.compiler.plan", "harnessc.compiler.prompts", "harnessc.compiler.output", "harnessc.compiler.promptfiles",
    "harnessc.runtime", "sqlite3", "asyncio", "rich", "harnessc.runreport", "matplotlib", "harnessc.explain",
    "lark", "jsonschema", "git", "logging", "hashlib",
    "harnessc.commands.running", "harnessc.commands.state", "harnessc.commands.steering", "harnessc.commands.importing",
    "harnessc.outcome",
}


def test_lint_imports_only_what_checking_needs(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(REPO / "specs" / "demo", tmp_path / "demo", ignore=shutil.ignore_patterns(".harness"))
    modules = imported("-C", str(tmp_path / "demo"), "lint")
    assert {"harnessc.compiler.check", "yaml"} <= modules  # it linted
    assert not modules & NOT_FOR_LINT, sorted(modules & NOT_FOR_LINT)


def test_a_run_with_telemetry_on_imports_opentelemetry(tmp_path: Path) -> None:
    """The other side of the check above: it sees OpenTelemetry when a run traces."""
    import pytest

    pytest.importorskip("opentelemetry.sdk")
    write_project(tmp_path, [node("t1")])
    path = tmp_path / ".harness" / "build" / "plan.json"
    plan = json.loads(path.read_text())
    plan["telemetry"] = {"otlp_endpoint": "http://127.0.0.1:9", "content": False}  # discard: nothing listens
    path.write_text(json.dumps(plan))
    assert "opentelemetry" in imported("-C", str(tmp_path), "run", "--no-build")


GC_SCRIPT = """
import gc, json, sys
from harnessc.cli import cli
seen = []  # each cyclic collection: whether the compiler was being imported or run by then
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append("harnessc.compiler" in sys.modules))
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(seen))
"""


def test_lint_and_build_run_the_compiler_without_cyclic_collections(tmp_path: Path) -> None:
    """Both end their process: a collection while the compiler is imported and runs would
    only rescan what its imports built (~40, and one at exit: 7% of lint's instructions)."""
    import shutil

    shutil.copytree(REPO / "specs" / "demo", tmp_path / "demo", ignore=shutil.ignore_patterns(".harness"))
    for command in ("lint", "build"):
        out = subprocess.run([sys.executable, "-c", GC_SCRIPT, "-C", str(tmp_path / "demo"), command],
                             capture_output=True, text=True, timeout=120, env=env())
        assert out.returncode == 0, out.stderr
        assert True not in json.loads(out.stdout.strip().splitlines()[-1]), command


def test_a_command_run_of_loop_tasks_outside_git_imports_no_jinja_and_no_gitpython(tmp_path: Path) -> None:
    """Loop tasks (a completion promise) of a `command` agent, with the built-in templates, in
    a directory no repository holds: their prompts are the built-in ones written out in Python
    (no Jinja), and their file evidence is hashed (no GitPython to find there is no repository)."""
    nodes = [node("t1", completion_promise="DONE", routing={"agent": "cmd"}),
             node("t2", completion_promise="DONE", routing={"agent": "cmd"})]
    write_project(tmp_path, nodes, agents={"cmd": {"provider": "command", "command": [
        sys.executable, "-c", "import sys; sys.stdin.read(); print('<promise>DONE</promise>')"]}})
    modules = imported("-C", str(tmp_path), "run", "--no-build")
    assert "harnessc.runtime.loop.files" in modules  # its file evidence was taken
    unwanted = modules & (SDKS | {"jinja2", "git"})
    assert not unwanted, unwanted
    assert json.loads((tmp_path / ".harness" / "outputs" / "t2.json").read_text())["state"] == "succeeded"


# What the commands that read a run (status, show, log, runs, stats, memory) have no use for: they are
# called constantly (watch loops, scripts, the suite), and a run's half cost them ~0.35 s of CPU
# a call. The scheduler and its task steps, the compiler (plan.json is read by planfile.py), the
# agents and their SDKs, checkouts and isolation, the loop's file evidence, memory's refreshes.
NOT_FOR_READING = SDKS | {
    "harnessc.runtime.scheduler", "harnessc.runtime.session", "harnessc.runtime.iteration",
    "harnessc.runtime.approaches", "harnessc.runtime.context", "harnessc.runtime.verify", "harnessc.runtime.plan",
    "harnessc.compiler", "harnessc.runtime.agents.base", "harnessc.runtime.executor", "harnessc.runtime.worktree",
    "harnessc.runtime.loop.progress", "harnessc.runtime.memory.summary", "pydantic", "jinja2", "lark", "git", "yaml",
}


def test_the_commands_that_read_a_run_import_none_of_its_half(tmp_path: Path) -> None:
    import shutil

    demo = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", demo, ignore=shutil.ignore_patterns(".harness"))
    assert "harnessc.runtime.scheduler" in imported("-C", str(demo), "run")  # the other side: a run has it
    assert (demo / ".harness" / "outputs" / "brief-001.json").is_file()  # it ran
    report, memory = "harnessc.runtime.observe.report", "harnessc.runtime.memory.store"
    for args, reader in ((["status"], report), (["status", "--output", "json"], report), (["show", "qualify-001"], report),
                         (["log", "qualify-001"], report), (["runs"], report), (["stats"], report), (["memory"], memory)):
        modules = imported("-C", str(demo), *args)
        assert reader in modules, args  # it read the run
        assert not modules & NOT_FOR_READING, (args, sorted(modules & NOT_FOR_READING))
