"""`sandbox: true`: a command agent under real bubblewrap (runtime/children/sandbox.py).

A hostile agent tries to write outside its checkout - the user's files by absolute path,
$HOME, the shared .git/hooks and .git/config, the user's branch - and fails, while its
checkout and its private TMPDIR take its writes and the task still verifies and lands.
Skipped, with the reason, where bubblewrap is missing or cannot make its namespaces; the
refusal where it is unavailable is tested everywhere (a PATH without bwrap).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import inproc
import pytest

from harnessc import providers
from harnessc.runtime.agents.base import AgentError, Request
from harnessc.runtime.agents.command import CommandAgent
from harnessc.runtime.children import sandbox

from . import virtual
from .helpers import PY, env, git, git_repo, harnessc, node, write_project

WHY_NOT = sandbox.problem()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=f"no sandbox here: {WHY_NOT}")

# Tries every write named in the config it is given; reports what each did in
# out/report.json (in its checkout: lands with the task) and prints the promise.
HOSTILE = """\
import json, os, pathlib, subprocess, sys
cfg = json.loads(pathlib.Path(sys.argv[1]).read_text())
report = {}
def attempt(name, fn):
    try:
        fn()
        report[name] = "written"
    except OSError as e:
        report[name] = "refused: " + (e.strerror or str(e))
def append(path, text):
    with open(path, "a") as f:
        f.write(text)
attempt("users_file", lambda: append(cfg["users_file"], "agent was here\\n"))
attempt("home", lambda: append(os.path.join(os.environ["HOME"], "agent-was-here"), "x"))
attempt("hook", lambda: append(os.path.join(cfg["git"], "hooks", "post-commit"), "#!/bin/sh\\ntrue\\n"))
attempt("git_config", lambda: append(os.path.join(cfg["git"], "config"), "# agent was here\\n"))
attempt("harness_state", lambda: append(cfg["state"], "x"))
if cfg["break_git"]:  # what would break the repository for harnessc too, were it written
    attempt("alternates", lambda: append(os.path.join(cfg["git"], "objects", "info", "alternates"), "/tmp\\n"))
if cfg["break_git"] and os.path.isfile(".git"):  # an attempt's worktree: its admin directory's pointer
    admin = pathlib.Path(".git").read_text().split(":", 1)[1].strip()
    attempt("commondir", lambda: append(os.path.join(admin, "commondir"), "x"))
moved = subprocess.run(["git", "update-ref", cfg["branch"], "HEAD"], capture_output=True, text=True)
report["move_branch"] = "written" if moved.returncode == 0 else "refused: " + moved.stderr.strip()[-200:]
tmp = os.environ.get("TMPDIR", "/tmp")
attempt("tmpdir", lambda: append(os.path.join(tmp, "scratch"), "x"))
report["tmpdir_path"] = tmp
report["tmpdir_is_private"] = tmp not in ("/tmp", "/var/tmp") and pathlib.Path(tmp).name.startswith("harnessc-sandbox-")
pathlib.Path("out").mkdir(exist_ok=True)
attempt("checkout", lambda: pathlib.Path("out", "made.txt").write_text("made\\n"))
pathlib.Path("out", "report.json").write_text(json.dumps(report, indent=1))
print("done <promise>DONE</promise>")
"""


def hostile_project(root: Path, isolation: str | None = "worktree", sandboxed: bool = True) -> dict:
    home = root.parent / (root.name + "-home")
    home.mkdir()
    bot = {"provider": "command", "command": [PY, str(root / "agent.py"), str(root / "agent.json")]}
    if sandboxed:
        bot["sandbox"] = True
    settings = {"routing": {"agent": "bot"}, "completion_promise": "DONE",
                "accept": [{"id": "made", "argv": ["test", "-f", "out/made.txt"], "timeout": 60}]}
    if isolation:
        settings["isolation"] = isolation
    write_project(root, [node("a", **settings)], agents={"bot": bot}, concurrency=1)
    (root / "agent.py").write_text(HOSTILE)
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)
    (root / "agent.json").write_text(json.dumps({
        "users_file": str(root / "notes.txt"), "git": str(root / ".git"),
        "state": str(root / ".harness" / "build" / "plan.json"),
        "branch": git(root, "symbolic-ref", "HEAD").strip(), "break_git": sandboxed}))
    return env(HOME=str(home))


def landed_report(root: Path) -> dict:
    branch = git(root, "for-each-ref", "--format=%(refname)", "refs/heads/harnessc/run/").split()[0]
    return json.loads(git(root, "show", f"{branch}:out/report.json"))


@needs_bwrap
def test_a_sandboxed_agent_writes_its_checkout_and_tmpdir_and_nothing_of_the_users(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root)
    start = git(root, "rev-parse", "HEAD").strip()
    config = (root / ".git" / "config").read_text()
    res = virtual.harnessc(root, "run", "--no-build", env=e)
    assert res.returncode == 0, res.stdout + res.stderr
    report = landed_report(root)
    for name in ("users_file", "home", "hook", "git_config", "harness_state", "move_branch", "alternates",
                 "commondir"):
        assert report[name].startswith("refused"), (name, report)
    assert "Read-only file system" in report["users_file"]
    assert report["checkout"] == report["tmpdir"] == "written" and report["tmpdir_is_private"] is True
    # nothing of the user's changed; the verified change landed and the branch followed it
    assert (root / "notes.txt").read_text() == "mine\n"
    assert not list((tmp_path / "p-home").iterdir())
    assert not (root / ".git" / "hooks" / "post-commit").exists()
    assert (root / ".git" / "config").read_text() == config
    assert git(root, "log", "--format=%s", "-1").startswith("harnessc: a:")
    assert git(root, "rev-parse", "HEAD~1").strip() == start
    assert (root / "out" / "made.txt").read_text() == "made\n"
    assert not os.path.exists(report["tmpdir_path"])  # its private TMPDIR went with the call


def test_without_the_sandbox_the_same_agent_reaches_the_users_files(tmp_path):
    """What the sandbox stops: the same agent, `sandbox` unset, writes the user's file by its
    absolute path, $HOME and the shared .git (so the test above fails without it). The
    tripwire puts the shared .git back and lands none of its attempts; the rest stays written."""
    root = tmp_path / "p"
    e = hostile_project(root, sandboxed=False)
    config = (root / ".git" / "config").read_text()
    res = virtual.harnessc(root, "run", "--no-build", env=e)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "tampered with" in out and "Traceback" not in out, out
    assert (root / "notes.txt").read_text().startswith("mine\nagent was here\n")  # by absolute path
    assert list((tmp_path / "p-home").iterdir())  # its $HOME
    assert not (root / ".git" / "hooks" / "post-commit").exists()  # put back
    assert (root / ".git" / "config").read_text() == config


@needs_bwrap
def test_in_a_shared_tree_the_project_is_writable_and_its_git_directory_and_state_are_not(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    res = virtual.harnessc(root, "run", "--no-build", env=e)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["checkout"] == report["tmpdir"] == "written"
    assert report["users_file"] == "written"  # the project is its checkout here
    for name in ("home", "hook", "git_config", "harness_state", "move_branch", "alternates"):
        assert report[name].startswith("refused"), (name, report)


def _worktree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    work = root / ".harness" / "worktrees" / "r1" / "1-1"
    work.parent.mkdir(parents=True)
    git(root, "worktree", "add", "-q", "--detach", str(work), "HEAD")
    return root, work


def _call(agent: CommandAgent, work: Path | None, **kw) -> object:
    return asyncio.run(agent.call(Request(task_id="t", prompt="go", workdir=work, **kw)))


def _agent(root: Path, argv: list[str], **settings) -> CommandAgent:
    config = providers.agent_config("bot", {"provider": "command", "command": argv, "sandbox": True, **settings})
    return CommandAgent("bot", config, root)


@needs_bwrap
def test_a_commit_inside_the_attempts_worktree_works_and_the_users_branch_does_not_move(tmp_path):
    root, work = _worktree(tmp_path)
    branch = git(root, "symbolic-ref", "HEAD").strip()
    script = f"echo new > b.txt && git add b.txt && git commit -qm agent && git log --format=%s -1; git update-ref {branch} HEAD"
    agent = _agent(root, ["sh", "-c", script])
    with pytest.raises(AgentError) as e:  # the update-ref is refused, so the script exits 128
        _call(agent, work)
    assert "Read-only file system" in str(e.value)
    assert git(work, "log", "--format=%s", "-1").strip() == "agent"
    assert git(root, "log", "--format=%s", branch).strip() == "start"


@needs_bwrap
def test_a_timeout_kills_everything_the_sandboxed_agent_started(tmp_path):
    root, work = _worktree(tmp_path)
    tag = str(900000 + os.getpid() % 99999)
    # a child in its own session too: the marker and the PID namespace's end reach it
    agent = _agent(root, ["sh", "-c", f"setsid sleep {tag} & sleep {tag}"], timeout=1)
    with pytest.raises(AgentError) as e:
        _call(agent, work)
    assert "timed out" in str(e.value) and "'sh'" in str(e.value)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).endswith(f"sleep\0{tag}\0")]
    assert left == []


@needs_bwrap
def test_a_timeout_in_a_run_leaves_no_process_of_the_sandboxed_agent(tmp_path):
    """The same inside a run, where the run's lifeline and subreaper are on."""
    root = tmp_path / "p"
    tag = str(800000 + os.getpid() % 99999)
    agent = {"provider": "command", "command": ["sh", "-c", f"setsid sleep {tag} & sleep {tag}"],
             "sandbox": True, "timeout": 1}
    write_project(root, [node("a", routing={"agent": "bot"}, retry={"max_retries": 0})], agents={"bot": agent})
    res = virtual.harnessc(root, "run", "--no-build")
    assert res.returncode != 0 and "timed out" in res.stdout, res.stdout + res.stderr
    assert [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).endswith(f"sleep\0{tag}\0")] == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text("utf-8", "replace")
    except OSError:
        return ""


def _no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with git and sh and no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "test"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_where_no_sandbox_can_start_the_run_refuses_the_agent_before_any_call(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    e["PATH"] = _no_bwrap_path(tmp_path)
    res = virtual.harnessc(root, "run", "--no-build", env=e)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "agent 'bot' cannot be used: it asks for the sandbox" in out and "no `bwrap` is on PATH" in out
    assert "install bubblewrap" in out and "Traceback" not in out
    assert not (root / "out").exists()  # never run without it
    assert (root / "notes.txt").read_text() == "mine\n"


def test_the_agent_itself_refuses_to_run_unconfined(tmp_path, monkeypatch):
    """Where the pre-flight did not look (a remote worker): the call fails before starting."""
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    marker = tmp_path / "ran"
    agent = _agent(tmp_path, ["sh", "-c", f"touch {marker}"])
    with pytest.raises(AgentError) as e:
        _call(agent, None)
    assert e.value.kind == "invalid_request" and "install bubblewrap" in str(e.value)
    assert not marker.exists()


def test_a_bwrap_that_cannot_make_namespaces_is_no_sandbox(tmp_path, monkeypatch):
    """Root in a container may not be allowed user namespaces: the probe says so in one line."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel"
                    " does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    why = sandbox.problem()
    assert why is not None and "cannot create its namespaces" in why and "No permissions" in why


def test_doctor_says_whether_the_sandbox_is_available(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    here = json.loads(inproc.harnessc("-C", str(root), "doctor", "--output", "json", env=e).stdout)
    assert here["sandbox"]["ok"] is (WHY_NOT is None)
    e["PATH"] = _no_bwrap_path(tmp_path)
    missing = inproc.harnessc("-C", str(root), "doctor", env=e)
    assert "no `bwrap` is on PATH" in missing.stdout and "install bubblewrap" in missing.stdout
    assert missing.returncode != 0  # an agent that asks for it cannot be used
    assert "sandbox: not available" in missing.stdout


# ------------------------------------------------------------------ Codex's own sandbox and ours

ALIAS_WARNING = ('WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper '
                 'binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/x/home"))\n')


def _fake_codex(tmp_path: Path, stderr: str = ALIAS_WARNING) -> Path:
    from .test_cli_agents import CODEX_OK, fake_cli

    return fake_cli(tmp_path / "bin", "codex", stdout=CODEX_OK, stderr=stderr)


def _codex(tmp_path: Path, exe: Path, **settings) -> object:
    from harnessc.runtime.agents.cli import CodexAgent

    config = providers.agent_config("cx", {"provider": "codex", "command": [str(exe)], "permissions": "edit",
                                           **settings})
    return CodexAgent("cx", config, tmp_path)


def test_codex_whose_own_sandbox_ran_nothing_fails_the_call_saying_why(tmp_path, monkeypatch):
    """Codex 0.171 with a bwrap on PATH and CODEX_HOME under /tmp: every command it ran failed
    inside its own sandbox, and it exited 0. The attempt fails, naming the cause and the ways out."""
    exe = _fake_codex(tmp_path)
    (tmp_path / "bin" / "bwrap").symlink_to("/bin/true")  # a bwrap on its PATH, real or not
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(AgentError) as e:
        _call(_codex(tmp_path, exe), None)
    message = str(e.value)
    assert e.value.kind == "invalid_request"
    assert "codex's own sandbox ran no command" in message and "codex-linux-sandbox" in message
    assert "CODEX_HOME" in message and "sandbox: true" in message
    assert e.value.usage.input_tokens == 1000  # what the call used is still charged


def test_codex_with_full_permissions_or_no_warning_is_not_refused(tmp_path, monkeypatch):
    exe = _fake_codex(tmp_path)
    (tmp_path / "bin" / "bwrap").symlink_to("/bin/true")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert _call(_codex(tmp_path, exe, permissions="full"), None).text  # its sandbox is off
    quiet = _fake_codex(tmp_path / "q", stderr="")
    assert _call(_codex(tmp_path, quiet), None).text


@needs_bwrap
def test_codex_under_our_sandbox_runs_without_its_own(tmp_path, monkeypatch):
    exe = _fake_codex(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    resp = _call(_codex(tmp_path, exe, sandbox=True), None)
    assert resp.text  # the alias warning means nothing here: Codex's sandbox is not used
    from .test_cli_agents import seen

    argv = seen(exe)["argv"]
    assert "--dangerously-bypass-approvals-and-sandbox" in argv and "-s" not in argv
    assert (home / ".codex").is_dir()  # its state directory, writable in the sandbox


def test_doctor_names_a_codex_whose_own_sandbox_would_run_nothing(tmp_path):
    root = tmp_path / "p"
    exe = _fake_codex(tmp_path)
    (tmp_path / "bin" / "bwrap").symlink_to("/bin/true")
    write_project(root, [node("a", routing={"agent": "cx"})],
                  agents={"cx": {"provider": "codex", "command": [str(exe)], "permissions": "edit"}})
    e = env(HOME=str(tmp_path), CODEX_HOME=str(tmp_path / "codex-home"), TMPDIR=str(tmp_path),
            PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    res = inproc.harnessc("-C", str(root), "doctor", env=e)
    assert res.returncode != 0 and "its own sandbox would run no command" in res.stdout, res.stdout
    e["CODEX_HOME"] = str(tmp_path.parent)  # outside TMPDIR: nothing to say
    assert "its own sandbox" not in inproc.harnessc("-C", str(root), "doctor", env=e).stdout


# The real Codex CLI driven through its tool loop by a stand-in model server on 127.0.0.1: the
# first answer asks it to run a command that writes cx_ops.py (and tries the user's file by its
# absolute path), the second, after the command's output, ends the turn with the promise.
CODEX = os.environ.get("HARNESSC_TEST_CODEX") or shutil.which("codex")
needs_codex = pytest.mark.skipif(CODEX is None, reason="the real Codex CLI is not installed "
                                 "(npm install -g @openai/codex, or set HARNESSC_TEST_CODEX to its path)")


def _tool_loop_server(command: str):
    from aiohttp import web

    from .fakeapi import ThreadedFakeAPI

    class ToolLoop(ThreadedFakeAPI):
        def routes(self, app: web.Application) -> None:
            app.router.add_post("/v1/responses", self._turn)

        async def _turn(self, request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            ran = [i for i in body.get("input", []) if isinstance(i, dict) and i.get("type") == "function_call_output"]
            tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
            if not ran:
                args = ({"cmd": command} if "exec_command" in tools else {"command": ["bash", "-lc", command]})
                item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "status": "completed",
                        "name": "exec_command" if "exec_command" in tools else "shell", "arguments": json.dumps(args)}
            else:
                item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "annotations": [],
                                     "text": "ran it <promise>DONE</promise>\n" + json.dumps(ran)[:2000]}]}
            usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                     "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
            done = {"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-test",
                    "status": "completed", "output": [item], "usage": usage}
            events = [("response.created", {"response": {**done, "status": "in_progress", "output": []}}),
                      ("response.output_item.done", {"output_index": 0, "item": item}),
                      ("response.completed", {"response": done})]
            text = "".join(f"event: {n}\ndata: {json.dumps({'type': n, 'sequence_number': i, **d})}\n\n"
                           for i, (n, d) in enumerate(events))
            return web.Response(text=text, content_type="text/event-stream")

    return ToolLoop()


def _codex_project(root: Path, server: str, codex_home: Path, **settings) -> dict:
    agent = {"provider": "codex", "command": [CODEX], "model": "gpt-test", "permissions": "edit",
             "base_url": server + "/v1", "api_key_env": "OPENAI_API_KEY", **settings}
    tasks = [node(t, routing={"agent": "cx"}, completion_promise="DONE", isolation="worktree",
                  retry={"max_retries": 0},
                  accept=[{"id": "made", "argv": ["test", "-f", "cx_ops.py"], "timeout": 60}])
             for t in ("a", "b")]
    write_project(root, tasks, agents={"cx": agent}, concurrency=1)
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)
    codex_home.mkdir(exist_ok=True)
    return env(OPENAI_API_KEY="sk-test-not-a-key", CODEX_HOME=str(codex_home))


COMMAND = "printf 'X = 1\\n' > cx_ops.py; echo agent >> {notes} || true"


@needs_codex
def test_real_codex_with_its_home_under_tmp_and_bwrap_on_path_says_its_sandbox_refused(tmp_path):
    """The issue's check: before, tasks failed only on their accept commands (no cx_ops.py)."""
    if shutil.which("bwrap") is None:
        pytest.skip("needs a bwrap on PATH, as on the machine where Codex's sandbox refused")
    root = tmp_path / "p"
    with _tool_loop_server(COMMAND.format(notes=root / "notes.txt")) as api:
        e = _codex_project(root, api.base_url, tmp_path / "codex-home")
        res = harnessc(root, "run", "--no-build", env=e, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "invalid_request: codex's own sandbox" in out, out
    assert "set CODEX_HOME outside the temporary directory" in out
    log = harnessc(root, "log", "a", env=e).stdout  # the attempt's error in full
    assert "codex's own sandbox ran no command" in log and "codex-linux-sandbox" in log
    assert "missing" not in out or "cx_ops.py" not in out
    assert (root / "notes.txt").read_text() == "mine\n"


@needs_codex
def test_real_codex_with_its_home_outside_tmp_writes_its_worktree_under_its_own_sandbox(tmp_path):
    """Codex's workspace-write lets it write its worktree, /tmp and $TMPDIR (a project under
    /tmp is writable to it): the user's file here lies outside all three."""
    home = Path(tempfile.mkdtemp(prefix="harnessc-test-codex-", dir="/var/tmp"))
    try:
        root = tmp_path / "p"
        theirs = home / "users-file.txt"
        theirs.write_text("mine\n")
        with _tool_loop_server(COMMAND.format(notes=theirs)) as api:
            e = _codex_project(root, api.base_url, home / "codex")
            res = harnessc(root, "run", "--no-build", env=e, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        assert (root / "cx_ops.py").read_text() == "X = 1\n"  # landed
        assert theirs.read_text() == "mine\n"  # its sandbox kept it to its worktree
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_codex
@needs_bwrap
def test_real_codex_under_our_sandbox_with_its_home_under_tmp_lands_and_touches_nothing_else(tmp_path):
    root = tmp_path / "p"
    with _tool_loop_server(COMMAND.format(notes=root / "notes.txt")) as api:
        e = _codex_project(root, api.base_url, tmp_path / "codex-home", sandbox=True)
        res = harnessc(root, "run", "--no-build", env=e, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (root / "cx_ops.py").read_text() == "X = 1\n"
    assert (root / "notes.txt").read_text() == "mine\n"
    assert git(root, "log", "--format=%s", "-2").count("harnessc: ") == 2


# ------------------------------------------------------------------ harness.yaml

def test_defaults_sandbox_reaches_command_and_cli_agents_and_an_api_agent_cannot_ask(tmp_path):
    (tmp_path / "roadmap.md").write_text("# P\n\n## Tasks\n\n- [ ] **a**: Do it\n  - accept: true\n")
    (tmp_path / "harness.yaml").write_text(
        "defaults:\n  sandbox: true\n"
        "agents:\n"
        "  bot: {provider: command, command: [echo, hi]}\n"
        "  free: {provider: command, command: [echo, hi], sandbox: false}\n"
        "  cx: {provider: codex}\n"
        "  sonnet: {provider: anthropic, model: claude-sonnet-4-6}\n")
    res = virtual.harnessc(tmp_path, "build")
    assert res.returncode == 0, res.stdout + res.stderr
    agents = json.loads((tmp_path / ".harness" / "build" / "plan.json").read_text())["agents"]
    assert agents["bot"]["sandbox"] is True and agents["cx"]["sandbox"] is True
    assert agents["free"]["sandbox"] is False and "sandbox" not in agents["sonnet"]
    (tmp_path / "harness.yaml").write_text(
        "agents:\n  sonnet: {provider: anthropic, model: claude-sonnet-4-6, sandbox: true}\n")
    res = virtual.harnessc(tmp_path, "lint")
    assert res.returncode == 1 and "harness.yaml:2:" in res.stdout + res.stderr and "error[HC430]" in res.stdout + res.stderr
