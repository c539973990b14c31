"""Protected checks (runtime/protect.py): an agent cannot make its accept command pass by
changing the check. Real specs built by `harnessc build`, real git, real command agents; harnessc
itself runs in-process in virtual time (virtual.harnessc)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from . import virtual
from .helpers import PY, git, git_repo

# The agent does what agent.cfg says for its iteration: {"1": {"path": "text" | None}, ...}
# (or for "<task><iteration>"); None deletes the file. It prints the promise whatever it did.
AGENT = """\
import ast, os, pathlib, subprocess, sys
it, task = os.environ["HARNESSC_ITERATION"], os.environ["HARNESSC_TASK"]
cfg = ast.literal_eval(pathlib.Path(sys.argv[1]).read_text())
for path, text in cfg.get(task + it, cfg.get(it, {})).items():
    p = pathlib.Path(path)
    if path == "run":  # commands to run after the writes above
        continue
    if text is None:
        p.unlink()
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
for argv in cfg.get(task + it, cfg.get(it, {})).get("run", []):
    subprocess.run(argv, check=True)
print("done <promise>DONE</promise>")
"""
TEST = "import sys; sys.path.insert(0, '.')\nimport auth\nassert auth.login() == 'ok', 'login is broken'\n"
CHEAT = "print('all good')\n"
HONEST = "def login():\n    return 'ok'\n"


def make(root: Path, steps: dict, props: str = "", isolation: str = "worktree", defaults: str = "",
         accept: str = f"{PY} tests/test_auth.py") -> None:
    root.mkdir(parents=True)
    (root / "roadmap.md").write_text(textwrap.dedent(f"""\
        ## Tasks

        - [ ] **login**: Make login work
          - agent: bot
          - completion_promise: DONE
          - accept: {accept}
          - isolation: {isolation}
        """) + props)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot: {{provider: command, command: [{PY}, {root / 'agent.py'}, {root.parent / 'agent.cfg'}]}}\n"
        f"defaults:\n  max_retries: 3\n  retry_delays: [0]\n{defaults}")
    (root / "agent.py").write_text(AGENT)
    (root.parent / "agent.cfg").write_text(repr(steps))
    (root / "tests").mkdir()
    (root / "tests" / "test_auth.py").write_text(TEST)
    (root / "auth.py").write_text("def login():\n    return 'no'\n")
    git_repo(root)
    (root / ".gitignore").write_text(".harness/\n__pycache__/\n")
    git(root, "commit", "-qam", "ignore caches")


def run(root: Path):
    return virtual.harnessc(root, "run", "--jobs", "1")


def attempts(root: Path) -> list[dict]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT iteration, status, errors, prompt FROM attempts ORDER BY id").fetchall()
    return [{"iteration": i, "status": s, "errors": json.loads(e or "[]"), "prompt": p} for i, s, e, p in rows]


def state(root: Path) -> str:
    return sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT state FROM tasks WHERE id = 'login'").fetchone()[0]


def test_an_agent_that_rewrites_the_test_its_accept_runs_is_rejected_and_an_honest_attempt_lands(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"tests/test_auth.py": CHEAT}, "2": {"auth.py": HONEST}})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = attempts(root)
    assert first["status"] == "rejected"
    assert any("protected: tests/test_auth.py (named in the accept command)" in e for e in first["errors"])
    assert "protected: tests/test_auth.py" in second["prompt"]  # the next prompt says so
    assert second["status"] == "succeeded"
    # what landed is the honest change; the test is as it was
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["auth.py"]
    assert (root / "tests" / "test_auth.py").read_text() == TEST
    kept = list((root / ".harness" / "rejected" / "login").rglob("test_auth.py"))
    assert [p.read_text() for p in kept] == [CHEAT]


def test_an_agent_that_only_cheats_fails_and_nothing_lands(tmp_path):
    root = tmp_path / "p"
    cheat = {str(i): {"tests/test_auth.py": None} for i in range(1, 6)}  # deletes the test every time
    make(root, cheat)
    r = run(root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert state(root) == "failed"
    a = attempts(root)
    assert "succeeded" not in {x["status"] for x in a} and all(x["errors"][0].startswith("protected:") for x in a)
    assert git(root, "log", "--format=%s").split("\n")[0] == "ignore caches"
    assert (root / "tests" / "test_auth.py").read_text() == TEST


def test_allow_edit_lifts_the_protection(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"tests/test_auth.py": TEST.replace("'ok'", "'no'")}},
         props="  - allow_edit: tests/test_auth.py\n")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [a["status"] for a in attempts(root)] == ["succeeded"]
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["tests/test_auth.py"]


def test_protect_globs_and_ci_configuration_are_protected_too(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"docs/api.md": "changed", "auth.py": HONEST},
                "2": {".github/workflows/x.yml": "on: push", "auth.py": HONEST},
                "3": {"auth.py": HONEST}},
         props="  - protect: docs/**\n")
    (root / "docs").mkdir()
    (root / "docs" / "api.md").write_text("api\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "docs")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "rejected", "succeeded"]
    assert any("protected: docs/api.md (protect: in roadmap.md)" in e for e in a[0]["errors"])
    assert any("protected: .github/workflows/x.yml (CI configuration)" in e for e in a[1]["errors"])
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["auth.py"]


def test_write_scope_rejects_a_change_outside_it(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"auth.py": HONEST, "README.md": "rewritten"}, "2": {"auth.py": HONEST}},
         props="  - write_scope: auth.py, src/**\n")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "succeeded"]
    assert any("outside write_scope (auth.py, src/**): README.md" in e for e in a[0]["errors"])
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["auth.py"]
    assert not (root / "README.md").exists()


def test_a_shared_tree_keeps_the_agents_version_aside_and_puts_the_test_back(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"tests/test_auth.py": CHEAT}, "2": {"auth.py": HONEST}}, isolation="none")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = attempts(root)
    assert first["status"] == "rejected" and second["status"] == "succeeded"
    assert any("protected: tests/test_auth.py (named in the accept command)" in e for e in first["errors"])
    assert (root / "tests" / "test_auth.py").read_text() == TEST
    assert (root / ".harness" / "rejected" / "login" / "tests" / "test_auth.py").read_text() == CHEAT
    assert (root / "auth.py").read_text() == HONEST
    copies = root / ".harness" / "protected"  # light files: copies in memory, none on disk
    assert not copies.exists() or list(copies.rglob("*")) in ([], [copies / "login"])  # none left


def test_a_shared_tree_restores_a_deleted_spec_file(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"harness.yaml": None, "auth.py": HONEST}, "2": {}}, isolation="none")
    spec = (root / "harness.yaml").read_text()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    first = attempts(root)[0]
    assert any("protected: harness.yaml (a spec file)" in e for e in first["errors"])
    assert (root / "harness.yaml").read_text() == spec


# Iteration 1 fails its check honestly; between attempts "a person" edits the test (the
# agent.cfg's "person" step runs as the retry delay's stand-in: the accept command writes it).
def test_a_persons_edit_between_attempts_is_not_undone(tmp_path):
    root = tmp_path / "p"
    person = TEST + "# the person's\n"
    agent_version = TEST + "# the agent's\n"
    # the accept command is a script that, on its first run, plays the person: it edits the test
    make(root, {"1": {}, "2": {"tests/test_auth.py": agent_version}, "3": {"auth.py": HONEST}},
         isolation="none", accept=f"{PY} check.py")
    (root / "check.py").write_text(textwrap.dedent(f"""\
        import pathlib, runpy, sys
        mark = pathlib.Path({str(tmp_path / 'edited')!r})
        if not mark.exists():
            mark.write_text("x")
            pathlib.Path("tests/test_auth.py").write_text({person!r})
            sys.exit(1)
        runpy.run_path("tests/test_auth.py")
        """))
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text() + "  - protect: tests/**\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "check")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "rejected", "succeeded"]
    assert any("also by someone else" in e for e in a[1]["errors"])
    # nothing was put back: the file is what it is now (the agent's, over the person's edit)
    assert (root / "tests" / "test_auth.py").read_text() == agent_version
    assert not (root / ".harness" / "rejected" / "login" / "tests" / "test_auth.py").exists()


def test_a_test_a_dependency_wrote_after_the_build_is_protected_too(tmp_path):
    root = tmp_path / "p"
    make(root, {"tests1": {"tests/test_new.py": TEST}, "login1": {"tests/test_new.py": CHEAT},
                "login2": {"auth.py": HONEST}}, accept=f"{PY} tests/test_new.py",
         props="  - depends_on: tests\n")
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text().replace(
        "## Tasks\n", "## Tasks\n\n- [ ] **tests**: Write the test\n  - agent: bot\n  - completion_promise: DONE\n"
        "  - isolation: worktree\n  - accept: true\n"))
    git(root, "commit", "-qam", "two tasks")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = [x for x in attempts(root)]
    assert [x["status"] for x in a] == ["succeeded", "rejected", "succeeded"]
    assert any("protected: tests/test_new.py (named in the accept command)" in e for e in a[1]["errors"])
    assert (root / "tests" / "test_new.py").read_text() == TEST


def test_a_change_the_agent_commits_itself_or_a_mode_change_is_caught_too(tmp_path):
    root = tmp_path / "p"
    commit = ["git", "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qam", "mine"]
    make(root, {"1": {"tests/test_auth.py": CHEAT, "run": [commit]},
                "2": {"run": [["chmod", "+x", "tests/test_auth.py"]]},
                "3": {"auth.py": HONEST}})
    start = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "rejected", "succeeded"]
    assert all(any(e.startswith("protected: tests/test_auth.py") for e in x["errors"]) for x in a[:2])
    assert git(root, "diff", "--name-only", start, "HEAD").split() == ["auth.py"]
    assert git(root, "ls-files", "-s", "tests/test_auth.py").startswith("100644")


def test_an_agent_that_removes_its_checkouts_git_file_gets_no_write_into_your_tree(tmp_path):
    root = tmp_path / "p"
    make(root, {str(i): {"tests/test_auth.py": CHEAT, ".git": None} for i in range(1, 5)})
    (root / "tests" / "test_auth.py").write_text(TEST + "# yours, not committed\n")
    r = run(root)
    assert (root / "tests" / "test_auth.py").read_text() == TEST + "# yours, not committed\n"
    assert r.returncode == 1, r.stdout + r.stderr
    assert state(root) == "failed"
    assert any("tampered with .git" in e for e in attempts(root)[0]["errors"])
    assert git(root, "log", "--format=%s").split("\n")[0] == "ignore caches"


# The agent leaves the test alone but plants bytecode for it: compiled from a test that passes,
# stamped with the real test's modification time and size, where Python looks for it.
FORGE = """\
import importlib.util, os, pathlib, py_compile, tempfile
real = pathlib.Path("tests/test_auth.py").resolve()
st = real.stat()
cheat = "print('all good')\\n"
cheat += "#" * (st.st_size - len(cheat) - 1) + "\\n"
src = pathlib.Path(tempfile.mkdtemp()) / "test_auth.py"
src.write_text(cheat)
os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
py_compile.compile(str(src), cfile=importlib.util.cache_from_source(str(real)), doraise=True)
"""


def test_bytecode_planted_for_a_protected_test_never_runs_in_its_place(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"forge.py": FORGE, "run": [[PY, "forge.py"], ["rm", "forge.py"]]}, "2": {"auth.py": HONEST}},
         accept=f"{PY} run_tests.py tests/test_auth.py")
    (root / "run_tests.py").write_text("import importlib, sys\nsys.path[:0] = ['.', 'tests']\n"
                                       "importlib.import_module(sys.argv[1].split('/')[-1][:-3])\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "runner")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "succeeded"]  # the real test ran, and failed
    assert "login is broken" in json.dumps(a[0]["errors"])


def test_a_score_command_and_the_file_it_names_are_protected(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"auth.py": HONEST, "bench.py": "print(1000)\n"}, "2": {"auth.py": HONEST}},
         props=f"  - score: {PY} bench.py\n  - min_score: 1\n")
    (root / "bench.py").write_text("print(1)\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "bench")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "succeeded"]
    assert any("protected: bench.py (named in the score command)" in e for e in a[0]["errors"])
    assert (root / "bench.py").read_text() == "print(1)\n"


def test_an_ignored_file_planted_under_a_protected_glob_is_caught(tmp_path):
    root = tmp_path / "p"
    ignore = "\n".join([".harness/", "__pycache__/", "tests/conftest.py", ""])
    make(root, {"1": {"tests/conftest.py": "# would make every test pass\n", "tests/__pycache__/x.pyc": "",
                      "auth.py": HONEST, "run": [["sh", "-c", f"printf '{ignore}' > .gitignore"]]},
                "2": {"auth.py": HONEST}},
         props="  - protect: tests/**\n")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    a = attempts(root)
    assert [x["status"] for x in a] == ["rejected", "succeeded"]
    assert any("protected: tests/conftest.py (protect: in roadmap.md)" in e for e in a[0]["errors"])
    assert not any("__pycache__" in e for e in a[0]["errors"])  # a test runner's cache is no change


# Two tasks at once in the shared tree: a's agent changes the script b's accept runs while b's
# agent is running. Who changed it cannot be told: it is put back, and b hears a ran too.
WAITER = """\
import os, pathlib, sys, time
marks = pathlib.Path(sys.argv[1])
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
if task == "b" and it == "1":
    (marks / "b-started").write_text("x")
    for _ in range(1200):
        if (marks / "a-wrote").exists():
            break
        time.sleep(0.05)
if task == "a":
    for _ in range(1200):
        if (marks / "b-started").exists():
            break
        time.sleep(0.05)
    pathlib.Path("check_b.py").write_text("print('changed by a')\\n")
    (marks / "a-wrote").write_text("x")
print("done <promise>DONE</promise>")
"""


def test_a_shared_tree_puts_back_a_check_changed_while_another_tasks_agent_ran(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    task = "- [ ] **{0}**: Task {0}\n  - agent: bot\n  - completion_promise: DONE\n  - accept: {1}\n"
    (root / "roadmap.md").write_text("## Tasks\n\n" + task.format("a", "true") + task.format("b", f"{PY} check_b.py"))
    (root / "harness.yaml").write_text(f"agents:\n  bot: {{provider: command, command: [{PY}, {root / 'agent.py'}, {marks}]}}\n"
                                       "defaults:\n  max_retries: 3\n  retry_delays: [0]\n")
    (root / "agent.py").write_text(WAITER)
    (root / "check_b.py").write_text("print('the check')\n")
    r = virtual.harnessc(root, "run", "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, status, errors FROM attempts WHERE task_id = 'b' ORDER BY id").fetchall()
    assert [s for _, s, _ in rows] == ["rejected", "succeeded"]
    assert "protected: check_b.py (named in the accept command)" in rows[0][2]
    assert "the agents of a ran at the same time" in rows[0][2]
    assert (root / "check_b.py").read_text() == "print('the check')\n"
    assert (root / ".harness" / "rejected" / "b" / "check_b.py").read_text() == "print('changed by a')\n"


def test_a_shared_guard_hashes_in_a_thread_only_what_is_not_light(tmp_path):
    """A guard with nothing to compare runs on the event loop, and so does one whose tree's last
    snapshot hashed a few small files (in a worker thread each step fought the loop for the
    GIL); the first snapshot in a tree, and one of many or large files, go to a thread. An
    isolated attempt's guard reads nothing before the call (its base is the reference)."""
    from harnessc.runtime import protect

    from .helpers import node, write_project

    plan = write_project(tmp_path, [node("a"), node("b", accept=[{"argv": [PY, "check.py"], "id": None}])])
    (tmp_path / "check.py").write_text("print('ok')\n")
    light, named = (protect.guard(plan, n, tmp_path) for n in plan.nodes)
    assert (light.reads_before, light.reads_after) == (False, False)
    assert light.before() is None and light.after() == [] and not light.reads_before
    assert (named.reads_before, named.reads_after) == (True, True)  # nothing hashed in this tree yet
    named.before()
    assert (named.reads_before, named.reads_after) == (False, False)  # check.py: one small file
    (tmp_path / "check.py").write_text("#" * (protect.LIGHT_BYTES + 1))
    assert named.after() != []  # the change is caught (and check.py put back)...
    assert named.reads_after  # ...and that snapshot was heavy: the next step goes to a thread
    assert (tmp_path / "check.py").read_text() == "print('ok')\n"
    assert (protect.WorktreeGuard.reads_before, protect.WorktreeGuard.reads_after) == (False, True)


def test_a_shared_guard_keeps_light_copies_in_memory_and_heavy_ones_on_disk(tmp_path):
    """A light snapshot's copies are the bytes it hashed, held by the guard: no directory and
    file per task (their creation cost a run of no-op tasks more than the rest of the guard);
    a heavy one's are files under .harness/protected/<task>/, gone when the task ends. Either
    way the agent's change is put back."""
    from harnessc.runtime import protect

    from .helpers import node, write_project

    plan = write_project(tmp_path, [node("a", accept=[{"argv": [PY, "check.py"], "id": None}])])
    (tmp_path / "check.py").write_text("print('ok')\n")
    store = tmp_path / ".harness" / "protected"
    guard = protect.guard(plan, plan.nodes[0], tmp_path)
    guard.before()
    assert not store.exists()  # light: nothing written
    (tmp_path / "check.py").write_text("print('cheat')\n")
    assert guard.after() != [] and (tmp_path / "check.py").read_text() == "print('ok')\n"

    heavy = "#" * (protect.LIGHT_BYTES + 1) + "\n"
    (tmp_path / "check.py").write_text(heavy)
    guard.close()
    guard = protect.guard(plan, plan.nodes[0], tmp_path)  # (an edit between attempts is a person's: left)
    guard.before()
    assert len(list((store / "a").iterdir())) == 1  # heavy: its copy on disk
    (tmp_path / "check.py").write_text("print('cheat')\n")
    assert guard.after() != [] and (tmp_path / "check.py").read_text() == heavy
    guard.close()
    assert list((store / "a").iterdir()) == []


def test_a_same_size_change_with_its_time_put_back_is_caught_though_the_hash_is_reused(tmp_path):
    """Snapshots do not hash bytes again that equal those last hashed at that path (a large
    roadmap.md, twice per task), but they read every file every time: a change of the same size
    whose modification time the agent put back is still caught, and put back."""
    import os

    from harnessc.runtime import protect

    from .helpers import node, write_project

    plan = write_project(tmp_path, [node("a", accept=[{"argv": [PY, "check.py"], "id": None}]), node("b")])
    check = tmp_path / "check.py"
    check.write_text("print('ok')\n")
    first = protect.guard(plan, plan.nodes[0], tmp_path)
    first.before()
    assert first.after() == []  # nothing changed: the second snapshot's hash was the first's
    st = check.stat()
    guard = protect.guard(plan, plan.nodes[0], tmp_path)
    guard.before()
    check.write_text("print('no')\n")  # the same size...
    os.utime(check, ns=(st.st_atime_ns, st.st_mtime_ns))  # ...and the same time
    assert guard.after() != [] and check.read_text() == "print('ok')\n"


def test_a_simulate_call_in_a_shared_tree_is_not_guarded(tmp_path, monkeypatch):
    """simulate writes no file: in a shared tree its call is not compared (the guard read every
    protected file before and after it, which cost a no-op task more than its call); its
    accept command still runs and passes. A command agent's call is guarded as ever (the
    tests above)."""
    from harnessc.runtime import protect
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    from .helpers import node, write_project

    calls = []
    monkeypatch.setattr(protect.SharedGuard, "before", lambda self: calls.append(("before", self.tid)))
    monkeypatch.setattr(protect.SharedGuard, "after", lambda self, attempt=None: calls.append(("after", self.tid)) or [])
    plan = write_project(tmp_path, [node("a", accept=[{"argv": [PY, "check.py"], "id": None}])],
                         agents={"rehearsal": {"provider": "simulate", "latency": 0}})
    (tmp_path / "check.py").write_text("open('checked', 'w').write('yes')\n")
    result = execute(tmp_path, plan, RunOptions(jobs=1))
    assert result.exit_code == 0, result.message
    assert (tmp_path / "checked").read_text() == "yes"  # verified by its check
    assert calls == []


def test_a_checks_bytecode_cache_is_removed_after_it_and_off_the_event_loop(tmp_path, monkeypatch):
    """The fresh cache of each check (above) holds thousands of files after a pytest run:
    removing them must not hold the loop every other task's calls share."""
    import asyncio
    import os
    import shutil
    import tempfile
    import threading

    from harnessc.planfile import AcceptCommand
    from harnessc.runtime import verify

    removed: list[tuple[str, bool]] = []
    remove = shutil.rmtree

    def rmtree(path, ignore_errors=False):
        removed.append((path, threading.current_thread() is threading.main_thread()))
        remove(path, ignore_errors)

    monkeypatch.setattr(verify.shutil, "rmtree", rmtree)
    script = "import os, pathlib; pathlib.Path(os.environ['PYTHONPYCACHEPREFIX'], 'x.pyc').write_text('c')"
    cmd = AcceptCommand(id="c", argv=[PY, "-c", script], timeout=60)
    res = asyncio.run(verify.run_accept(cmd, tmp_path, None))
    assert res.ok, res.describe()
    (path, on_loop), = removed
    assert path.startswith(tempfile.gettempdir()) and not os.path.exists(path)
    assert not on_loop, "the cache was removed on the event loop's thread"
