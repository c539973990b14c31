"""executor ray: every attempt runs on a real multi-node Ray cluster on this machine (one
`ray.cluster_utils.Cluster` for the module), and lands exactly as with the local executor.

Runs are in-process (session.execute), connected to the module's cluster; the agents are
real command agents (Python scripts) and the demo's simulate agents."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from harnessc.planfile import Plan  # noqa: E402
from harnessc.runtime import session  # noqa: E402
from harnessc.runtime.executor import ExecutorError  # noqa: E402
from harnessc.runtime.executor.rayconfig import ExecutorSettings  # noqa: E402
from harnessc.runtime.scheduler import RunOptions  # noqa: E402
from harnessc.runtime.session import execute  # noqa: E402

from .helpers import PY, REPO, env, git, git_repo, harnessc, node, spawn, write_project  # noqa: E402
from .test_explore import AGENT as EXPLORE_AGENT  # noqa: E402  (stuck at once; branch 2 finds the way)

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

# A coding agent: writes text, a binary file and an executable script; task "b" needs two
# iterations (its accept command wants part1 and part2; the first iteration writes part1
# only), so its change must carry over from one worker to the next. WAIT makes it wait for
# a file named <marks>/go (writing <marks>/started-<task> first); SLEEP_CHILD starts a
# grandchild that sleeps (its argv carries the marker) and waits for it.
AGENT = """\
import os, pathlib, subprocess, sys, time, hashlib
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
cfg = eval(pathlib.Path(sys.argv[1]).read_text())
marks = pathlib.Path(cfg.get("marks", "."))
if task in cfg.get("wait", []) and not (marks / "go").exists():
    (marks / f"started-{task}-{os.getpid()}").write_text(it)
    while not (marks / "go").exists():
        time.sleep(0.05)
if cfg.get("sleep_child"):
    (marks / f"sleeping-{task}").write_text("x")
    subprocess.run([sys.executable, "-c", "import time; time.sleep(300)", cfg["sleep_child"]])
out = pathlib.Path("out"); out.mkdir(exist_ok=True)
(out / f"{task}.txt").write_text(f"made by {task}\\n")
(out / f"{task}.bin").write_bytes(bytes(range(256)) + task.encode())
script = pathlib.Path("tools", f"{task}.sh"); script.parent.mkdir(exist_ok=True)
script.write_text("#!/bin/sh\\necho " + task + "\\n"); script.chmod(0o755)
if task == "c":
    with open("README.md", "a") as f:
        f.write("c was here\\n")
if task == "b":
    pathlib.Path("part" + it).write_text(it)
if cfg.get("raylet"):  # the raylet above this process: which node of the cluster ran it
    pid = os.getppid()
    while pid > 1 and pathlib.Path(f"/proc/{pid}/comm").read_text().strip() != "raylet":
        pid = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    (out / f"{task}.raylet").write_text(str(pid))
secret = os.environ.get("HARNESSC_TEST_SECRET_TOKEN")
if secret:
    (out / f"{task}.secret-hash").write_text(hashlib.sha256(secret.encode()).hexdigest())
print("done <promise>DONE</promise>")
"""

FAKE_SECRET = "sk-test-ray-0123456789abcdefSECRET"


@pytest.fixture(scope="module")
def cluster():
    """A head (no CPU for attempts) and two worker nodes, each with 2 slots."""
    from ray.cluster_utils import Cluster

    # its own dashboard port: under xdist another worker may run a cluster of its own
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": True,
                                                      "dashboard_port": free_port()})
    c.add_node(num_cpus=2, resources={"n1": 2, "w": 2})
    c.add_node(num_cpus=2, resources={"n2": 2, "w": 2})
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, configure_logging=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def on_ray(cluster, monkeypatch):
    """Runs with executor="ray" get these settings (raycfg's harness.yaml `executor:` aside)."""
    settings = {"value": ExecutorSettings(address=cluster.address, num_cpus_per_attempt=1, resources={"w": 1})}

    def resolve(plan, executor=None, ray_address=None):
        return settings["value"] if executor == "ray" else None

    monkeypatch.setattr(session, "resolve_executor", resolve)
    return settings


def coding_project(root: Path, tasks: dict[str, list[str]], cfg: dict | None = None, **kw) -> Plan:
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    nodes = []
    for t, deps in tasks.items():
        extra = dict(kw.get(t, {}))
        if t == "b":
            extra.setdefault("accept", [{"id": "parts", "argv": ["sh", "-c", "test -f part1 && test -f part2"],
                                         "timeout": 60}])
        nodes.append(node(t, depends_on=list(deps), **{**bot, **extra}))
    agents = {"bot": {"provider": "command", "command": [PY, str(root / "agent.py"), str(root / "agent.cfg")],
                      "pass_env": ["HARNESSC_TEST_SECRET_TOKEN"]}}
    plan = write_project(root, nodes, agents=agents, concurrency=kw.get("concurrency", 3))
    (root / "agent.py").write_text(AGENT)
    marks = root.parent / (root.name + "-marks")
    marks.mkdir(exist_ok=True)
    (root / "agent.cfg").write_text(repr({"marks": str(marks), **(cfg or {})}))
    (root / "README.md").write_text("project\n")
    git_repo(root)
    return plan


def run(root: Path, plan: Plan, **opts):
    return execute(root, plan, RunOptions(**opts))


def db(root: Path):
    con = sqlite3.connect(root / ".harness" / "state.db")
    con.row_factory = sqlite3.Row
    return con


def task_states(root: Path) -> dict[str, tuple]:
    return {r["id"]: (r["state"], r["output"]) for r in db(root).execute("SELECT id, state, output FROM tasks")}


def landed_tree(root: Path, run_id: str) -> list[str]:
    """The integration branch's files: mode, blob and path of each (agent.cfg names the
    project's own directory: left out)."""
    return [line for line in git(root, "ls-tree", "-r", f"harnessc/run/{run_id}").splitlines()
            if not line.endswith("\tagent.cfg")]


def subjects(root: Path, run_id: str) -> list[str]:
    return git(root, "log", "--format=%s", f"harnessc/run/{run_id}").splitlines()


def same_project_twice(tmp_path: Path, make) -> tuple[Path, Path, Plan, Plan]:
    a, b = tmp_path / "local" / "p", tmp_path / "ray" / "p"
    return a, b, make(a), make(b)


def test_a_coding_project_lands_the_same_commits_files_modes_and_states_as_locally(tmp_path, on_ray):
    tasks = {"a": [], "b": [], "c": ["a"]}
    here, there, plan_here, plan_there = same_project_twice(tmp_path, lambda r: coding_project(r, tasks))
    local = run(here, plan_here, isolation="worktree")
    remote = run(there, plan_there, executor="ray")
    assert local.exit_code == remote.exit_code == 0, (local.message, remote.message)
    assert sorted(subjects(here, local.run_id)) == sorted(subjects(there, remote.run_id))
    tree = landed_tree(there, remote.run_id)
    assert tree == landed_tree(here, local.run_id)
    assert any(line.startswith("100755 ") and line.endswith("tools/a.sh") for line in tree)  # the mode came back
    assert "c was here" in git(there, "show", f"harnessc/run/{remote.run_id}:README.md")
    assert git(there, "show", f"harnessc/run/{remote.run_id}:part1") == "1"  # iteration 1's file, kept
    assert task_states(here) == task_states(there)
    iterations = {r["id"]: r["iterations"] for r in db(there).execute("SELECT id, iterations FROM tasks")}
    assert iterations["b"] == 2
    assert sorted(os.listdir(there / ".harness" / "outputs")) == sorted(os.listdir(here / ".harness" / "outputs"))
    # the agents ran on the workers: nothing of theirs in the driver's tree but what landed
    assert not (there / "out").exists() or git(there, "status", "--porcelain") == ""


def test_the_demo_lands_the_same_states_and_outputs_as_locally(tmp_path, on_ray):
    def demo(root: Path) -> Plan:
        from harnessc.runtime import plan as planmod

        shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))  # not a demo run's state
        git_repo(root)
        return planmod.ensure_plan(root, False, say=lambda m: None)

    here, there, plan_here, plan_there = same_project_twice(tmp_path, demo)
    local = run(here, plan_here, isolation="worktree")
    remote = run(there, plan_there, executor="ray")
    assert local.exit_code == remote.exit_code == 0, (local.message, remote.message)
    assert task_states(here) == task_states(there)
    for name in os.listdir(here / ".harness" / "outputs"):
        mine = json.loads((here / ".harness" / "outputs" / name).read_text())
        theirs = json.loads((there / ".harness" / "outputs" / name).read_text())
        assert mine.get("output") == theirs.get("output"), name
    # data-001's accept command ran on a worker: its check is recorded with the attempt
    checks = [json.loads(r["checks"] or "[]") for r in db(there).execute(
        "SELECT checks FROM attempts WHERE task_id='data-001' AND status='succeeded'")]
    assert checks and checks[0][0]["returncode"] == 0


def test_with_clone_url_workers_clone_the_repository_and_fetch_each_base(tmp_path, cluster, on_ray):
    root = tmp_path / "p"
    plan = coding_project(root, {"a": [], "c": ["a"]})
    on_ray["value"] = ExecutorSettings(address=cluster.address, resources={"w": 1}, clone_url=root.as_uri())
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    assert sorted(subjects(root, r.run_id)) == ["harnessc: a: Task a", "harnessc: c: Task c", "start"]
    assert "c was here" in git(root, "show", f"harnessc/run/{r.run_id}:README.md")
    assert not git(root, "for-each-ref", "refs/harnessc/bundle/")  # nothing was bundled


def test_a_task_with_resources_runs_on_the_node_that_offers_them(tmp_path, cluster, on_ray):
    raylets = {name: node.all_processes["raylet"][0].process.pid for node in cluster.worker_nodes
               for name in ("n1", "n2") if name in (node._ray_params.resources or {})}
    assert raylets.keys() == {"n1", "n2"}
    root = tmp_path / "p"
    plan = coding_project(root, {"a": [], "c": []}, {"raylet": True},
                          a={"resources": {"n2": 1}}, c={"resources": {"n1": 1}})
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    ran_on = {t: int(git(root, "show", f"harnessc/run/{r.run_id}:out/{t}.raylet")) for t in ("a", "c")}
    assert ran_on == {"a": raylets["n2"], "c": raylets["n1"]}


def test_a_task_asking_for_a_resource_no_node_offers_fails_naming_it(tmp_path, on_ray):
    root = tmp_path / "p"
    plan = coding_project(root, {"a": [], "c": []}, a={"resources": {"gpu_box": 1}})
    r = run(root, plan, executor="ray")  # Ray alone would queue the attempt for ever
    assert r.exit_code == 1, r.message
    states = task_states(root)
    assert states["a"][0] == "failed" and states["c"][0] == "succeeded"
    error = db(root).execute("SELECT error FROM tasks WHERE id='a'").fetchone()[0]
    assert "no alive node of the Ray cluster offers the resource 'gpu_box'" in error, error


def test_a_node_removed_mid_run_loses_no_task_and_lands_none_twice(tmp_path, cluster, on_ray):
    doomed = cluster.add_node(num_cpus=3, resources={"doomed": 3})
    cluster.wait_for_nodes()
    on_ray["value"] = ExecutorSettings(address=cluster.address, resources={"doomed": 1})
    root = tmp_path / "p"
    marks = tmp_path / "p-marks"
    plan = coding_project(root, {"a": [], "b": [], "c": [], "d": ["a"]}, {"wait": ["b", "c"]}, concurrency=3)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(r=run(root, plan, executor="ray")))
    worker.start()
    try:
        wait_for(lambda: len([p for p in os.listdir(marks) if p.startswith("started-")]) >= 2)
        # d (after a) done too: then b and c, waiting for "go", are all the node holds
        wait_for(lambda: task_states(root)["d"][0] == "succeeded")
        cluster.add_node(num_cpus=3, resources={"doomed": 3})  # where the lost attempts go
        cluster.remove_node(doomed)
        time.sleep(1)
        (marks / "go").write_text("x")
    finally:
        worker.join(120)
    r = result["r"]
    assert r.exit_code == 0, r.message
    landed = subjects(root, r.run_id)
    assert sorted(landed) == sorted(["harnessc: a: Task a", "harnessc: b: Task b", "harnessc: c: Task c",
                                     "harnessc: d: Task d", "start"])  # each once
    lost = [r["task_id"] for r in db(root).execute("SELECT task_id FROM attempts WHERE status='interrupted'")]
    assert sorted(set(lost)) == ["b", "c"]
    assert all(s == "succeeded" for s, _ in task_states(root).values())
    assert db(root).execute("SELECT count(*) FROM events WHERE kind='attempt_lost'").fetchone()[0] >= 2


def test_abort_leaves_no_agent_process_on_any_node(tmp_path, on_ray):
    marker = f"harnessc-ray-abort-{os.getpid()}-{time.time_ns()}"
    root = tmp_path / "p"
    marks = tmp_path / "p-marks"
    plan = coding_project(root, {"a": [], "b": [], "c": []}, {"sleep_child": marker})
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(r=run(root, plan, executor="ray")))
    worker.start()
    try:
        wait_for(lambda: len([p for p in os.listdir(marks) if p.startswith("sleeping-")]) >= 3)
        wait_for(lambda: len(marked(marker)) >= 3)
        (root / ".harness" / "stop").write_text("abort")
    finally:
        worker.join(120)
    assert result["r"].status == "aborted", result["r"].message
    # A worker Ray force-killed after the grace leaves its groups to its lifeline watcher,
    # which ends them as it sees the worker's pipe close: moments, not the agent's 300 s.
    wait_for(lambda: marked(marker) == [], timeout=15)
    states = {t: s for t, (s, _) in task_states(root).items()}
    assert set(states.values()) == {"pending"}


def test_forwarded_secrets_reach_the_agent_and_nothing_of_ray_shows_them(tmp_path, on_ray, monkeypatch):
    monkeypatch.setenv("HARNESSC_TEST_SECRET_TOKEN", FAKE_SECRET)
    root = tmp_path / "p"
    plan = coding_project(root, {"a": [], "c": []})
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    digest = hashlib.sha256(FAKE_SECRET.encode()).hexdigest()
    assert git(root, "show", f"harnessc/run/{r.run_id}:out/a.secret-hash") == digest  # it got there
    from ray.util import state

    at = on_ray["value"].address  # not the machine's last cluster (/tmp/ray): another test's or run's
    shown = json.dumps([state.list_tasks(at, detail=True, limit=10000), state.list_actors(at, detail=True),
                        state.list_jobs(at), state.list_workers(at, detail=True)], default=str)
    assert FAKE_SECRET not in shown and "ray-0123456789" not in shown
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    for path in session.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert FAKE_SECRET.encode() not in path.read_bytes(), path


def test_a_node_without_git_fails_the_attempt_naming_the_node(tmp_path, on_ray):
    """A Cluster node cannot be started with its own PATH: the remote function runs in a real
    worker whose PATH (runtime_env, for this test only) holds every program of this machine's
    but git."""
    from harnessc.runtime.executor.remote import run_attempt

    bare = tmp_path / "bin"
    bare.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if os.path.isdir(d):
            for name in os.listdir(d):
                if name != "git" and not (bare / name).exists():
                    (bare / name).symlink_to(Path(d, name))
    fn = ray.remote(max_retries=0)(run_attempt).options(resources={"w": 1},
                                                        runtime_env={"env_vars": {"PATH": str(bare)}})
    out = ray.get(fn.remote({"base": "0" * 40, "source": {"url": "file:///nowhere"}}), timeout=120)
    assert "git is not installed on Ray node" in out["failure"]
    assert "(node " in out["failure"] and out["node"] in out["failure"]


def test_an_agent_cli_missing_on_the_worker_fails_the_task_naming_the_node(tmp_path, on_ray):
    root = tmp_path / "p"
    plan = coding_project(root, {"a": []})
    data = json.loads((root / ".harness" / "build" / "plan.json").read_text())
    data["agents"]["bot"]["command"] = ["harnessc-no-such-cli-on-workers"]
    (root / ".harness" / "build" / "plan.json").write_text(json.dumps(data))
    from harnessc import planfile

    r = run(root, planfile.load(data), executor="ray")
    assert r.exit_code == 1
    error = db(root).execute("SELECT error FROM tasks WHERE id='a'").fetchone()[0]
    assert "command not found: 'harnessc-no-such-cli-on-workers'" in error and "on Ray node" in error


def test_an_address_nobody_answers_at_refuses_the_run_before_any_task(tmp_path, on_ray):
    on_ray["value"] = ExecutorSettings(address="127.0.0.1:1")
    root = tmp_path / "p"
    plan = coding_project(root, {"a": []})
    with pytest.raises(ExecutorError, match="could not connect to the Ray cluster at 127.0.0.1:1"):
        run(root, plan, executor="ray")
    assert db(root).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert db(root).execute("SELECT count(*) FROM attempts").fetchone()[0] == 0


def demo_copies(tmp_path: Path) -> tuple[Path, Path]:
    here, there = tmp_path / "local", tmp_path / "ray"
    for root in (here, there):
        shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))  # not a demo run's state
        git_repo(root)
    return here, there


def test_run_without_an_address_starts_a_local_cluster_and_leaves_none_of_it(tmp_path, cluster):
    """The real CLI, RAY_ADDRESS unset: `run --executor ray` starts its own cluster (not the
    module's, which is up and is the one a plain ray.init() would join), lands what a local
    run lands, and shuts its cluster down."""
    here, there = demo_copies(tmp_path)
    clean = {k: v for k, v in env().items() if k != "RAY_ADDRESS"}
    local = harnessc(here, "run", "--isolation", "worktree", env=clean)
    assert local.returncode == 0, local.stdout + local.stderr
    proc, session, seen = ray_run_watching_its_session(there, clean)
    assert {"raylet", "gcs_server"} <= seen, seen  # it was this run's own cluster
    assert in_session(session) == []
    assert task_states(here) == task_states(there)
    for name in os.listdir(here / ".harness" / "outputs"):
        mine = json.loads((here / ".harness" / "outputs" / name).read_text())
        theirs = json.loads((there / ".harness" / "outputs" / name).read_text())
        assert mine.get("output") == theirs.get("output"), name


def test_run_without_an_address_joins_the_cluster_RAY_ADDRESS_names(tmp_path, cluster):
    _, there = demo_copies(tmp_path)
    proc, _, seen = ray_run_watching_its_session(there, env(RAY_ADDRESS=cluster.address))
    assert seen == set()  # no cluster of its own
    drivers = [job["DriverPid"] for job in ray._private.state.jobs()]
    assert proc.pid in drivers, drivers  # it was a driver of the module's cluster
    assert "failed" not in {s for s, _ in task_states(there).values()}


# ------------------------------------------------------------------ helpers


def live(matches) -> list[tuple[int, str]]:
    """Live processes (pid, name), other than this one, whose argv `matches` (every node of
    the cluster is this machine)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if matches(argv) and "State:\tZ" not in status:
            found.append((int(pid), status.split("\n", 1)[0].removeprefix("Name:").strip()))
    return found


def in_session(session: "re.Pattern[bytes]") -> list[tuple[int, str]]:
    """Live processes whose argv names a Ray session directory `session` matches."""
    return live(session.search)


def ray_run_watching_its_session(root: Path, environ: dict):
    """`run --executor ray` in `root` to its end (exit 0), noting the names of the processes
    of the Ray session it started, if any (Ray names a session after its driver's pid)."""
    proc = spawn(root, "run", "--executor", "ray", env=environ)
    session = re.compile(rb"session_[0-9_-]+_%d(?![0-9])" % proc.pid)
    seen: set[str] = set()
    while proc.poll() is None:
        seen |= {name for _, name in in_session(session)}
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, out + err
    return proc, session, seen


def wait_for(check, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def free_port() -> int:
    """A port nobody listens on, outside the kernel's ephemeral range (where Ray's own
    components, and every outgoing connection on the machine, take theirs: a port from there
    may be taken again between this check and the dashboard's bind) and Ray's worker ports."""
    import random
    import socket

    low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    candidates = [p for p in range(20000, 30000) if not low <= p <= high] or list(range(20000, 30000))
    for port in random.sample(candidates, 50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port between 20000 and 30000")


def marked(marker: str) -> list[int]:
    """Live processes whose argv holds `marker`."""
    return [pid for pid, _ in live(lambda argv: marker.encode() in argv)]


def test_an_answer_whose_remote_check_cannot_be_placed_is_rejected_not_a_crash(tmp_path, on_ray):
    """An API-like agent answers on the driver (placement: commands); its checks go to a
    worker, and none can take them: the answer is unverified (the task fails saying why),
    never an internal error of the run."""
    root = tmp_path / "p"
    nodes = [node("a", routing={"agent": "sim"}, isolation="worktree", resources={"gpu_box": 1}),
             node("c", routing={"agent": "sim"}, isolation="worktree")]
    plan = write_project(root, nodes, agents={"sim": {"provider": "simulate"}})
    (root / "README.md").write_text("project\n")
    git_repo(root)
    r = run(root, plan, executor="ray")
    assert r.exit_code == 1, r.message
    states = task_states(root)
    assert states["a"][0] == "failed" and states["c"][0] == "succeeded"
    error = db(root).execute("SELECT error FROM tasks WHERE id='a'").fetchone()[0]
    assert "could not verify the answer" in error and "gpu_box" in error, error


# Iteration 1 leaves its mark everywhere (an untracked file, an ignored one, a tracked file
# deleted and one changed) and gives no promise; iteration 2 finds its own change carried
# over, undoes it and finishes. Whatever an attempt finds at its start that is not its
# task's own goes to out/<task>.leak; where it ran to out/<task>.where<iteration>.
LEAK_AGENT = """\
import os, pathlib
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
here, out, scratch = pathlib.Path("."), pathlib.Path("out"), pathlib.Path("scratch")
seen = [p.name for p in here.glob("wip-*") if p.name != "wip-" + task]
seen += [str(p) for p in scratch.rglob("*")]
own = (here / ("wip-" + task)).exists() and not (here / "keep.txt").exists() and \\
    (here / "README.md").read_text() == "project\\n" + task + "\\n"
fresh = not (here / ("wip-" + task)).exists() and (here / "keep.txt").read_text() == "keep\\n" and \\
    (here / "README.md").read_text() == "project\\n"
if not (fresh if it == "1" else own):
    seen.append(f"iteration {it} did not start from its own change")
out.mkdir(exist_ok=True)
if seen:
    (out / (task + ".leak")).write_text(repr(seen))
(out / (task + ".where" + it)).write_text(os.getcwd())
scratch.mkdir(exist_ok=True)
(scratch / task).write_text(it)
if it == "1":
    (here / ("wip-" + task)).write_text(task)
    (here / "keep.txt").unlink()
    with open("README.md", "a") as f:
        f.write(task + "\\n")
    print("not yet")
else:
    (here / ("wip-" + task)).unlink(missing_ok=True)
    (here / "keep.txt").write_text("keep\\n")
    (here / "README.md").write_text("project\\n")
    print("<promise>DONE</promise>")
"""


def test_a_reused_checkout_carries_nothing_from_one_attempt_into_the_next(tmp_path, on_ray):
    # one attempt at a time on one node (it has 2 of n1): its worker keeps one checkout and
    # reuses it, for the same task's next iteration and for the other tasks
    on_ray["value"] = ExecutorSettings(address=on_ray["value"].address, num_cpus_per_attempt=1, resources={"n1": 2})
    root = tmp_path / "p"
    tasks = ["p", "q", "r", "s"]
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    plan = write_project(root, [node(t, **bot) for t in tasks], concurrency=1,
                         agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py")]}})
    (root / "agent.py").write_text(LEAK_AGENT)
    (root / "README.md").write_text("project\n")
    (root / "keep.txt").write_text("keep\n")
    git_repo(root, commit=False)
    (root / ".gitignore").write_text(".harness/\nscratch/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")

    result = run(root, plan, executor="ray")

    assert result.exit_code == 0, result.message
    ref = f"harnessc/run/{result.run_id}"
    files = git(root, "ls-tree", "-r", "--name-only", ref).split()
    assert not [f for f in files if f.endswith(".leak")], {f: git(root, "show", f"{ref}:{f}")
                                                          for f in files if f.endswith(".leak")}
    assert not [f for f in files if f.startswith(("wip-", "scratch/"))]
    assert git(root, "show", f"{ref}:keep.txt") == "keep\n"
    assert git(root, "show", f"{ref}:README.md") == "project\n"
    wheres = [git(root, "show", f"{ref}:out/{t}.where{i}") for t in tasks for i in (1, 2)]
    assert len(wheres) == 8
    assert len(set(wheres)) < len(wheres)  # checkouts were reused (else this proves nothing)


def test_a_loop_task_whose_attempts_change_nothing_costs_the_driver_no_worktree(tmp_path, on_ray, monkeypatch):
    """A worktree on the driver is made only for a change that comes back: a loop task's
    no-op attempt (the promise, no file touched) has none, a changing one has its own."""
    from harnessc.runtime.worktree.worktrees import Worktrees

    made: list[str] = []
    make = Worktrees.make

    def recording(self, attempt):
        made.append(attempt.path.name)
        return make(self, attempt)

    monkeypatch.setattr(Worktrees, "make", recording)
    root = tmp_path / "p"
    script = 'if [ "$HARNESSC_TASK" = c ]; then echo c > c.txt; fi; echo "<promise>DONE</promise>"'
    loop = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    plan = write_project(root, [node(t, **loop) for t in ("a", "b", "c")],
                         agents={"bot": {"provider": "command", "command": ["sh", "-c", script]}})
    (root / "README.md").write_text("project\n")
    git_repo(root)
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    assert {t: s for t, (s, _) in task_states(root).items()} == dict.fromkeys("abc", "succeeded")
    assert git(root, "show", f"harnessc/run/{r.run_id}:c.txt") == "c\n"
    assert made == [f"{[n.id for n in plan.nodes].index('c') + 1}-1"]  # .harness/worktrees/<run>/<n>-<k>


# one more file a call (part<n>.txt, n*3 lines; part1.bin binary), the same words every time
# until it claims at 4, a file removed at 3
QUIET_AGENT = """\
import os, pathlib
n = int(os.environ["HARNESSC_ITERATION"])
src = pathlib.Path("src"); src.mkdir(exist_ok=True)
(src / f"part{n}.txt").write_text("".join(f"line {i}\\n" for i in range(n * 3)))
if n == 1:
    (src / "part1.bin").write_bytes(bytes(range(256)))
if n == 3:
    pathlib.Path("README.md").unlink()
print("ok" + (" <promise>DONE</promise>" if n >= 4 else ""))
"""


def test_a_loop_tasks_file_evidence_is_the_change_each_call_brings_back_as_locally(tmp_path, on_ray):
    """Its worker returns the whole change; the iteration's evidence is what that call added
    to it, as an isolated run on this machine measures it in the worktree: identical words
    with files changing is progress, not stuck."""
    def make(root: Path) -> Plan:
        task = node("q", routing={"agent": "bot"}, completion_promise="DONE", isolation="worktree",
                    limits={"stuck_after": 2}, loop={"progress_threshold": None, "recovery": ["fail"]})
        plan = write_project(root, [task], agents={"bot": {"provider": "command",
                                                           "command": [PY, str(root / "agent.py")]}})
        (root / "agent.py").write_text(QUIET_AGENT)
        (root / "README.md").write_text("project\nabout\n")
        git_repo(root)
        return plan

    here, there, plan_here, plan_there = same_project_twice(tmp_path, make)
    local = run(here, plan_here, isolation="worktree")
    remote = run(there, plan_there, executor="ray")
    assert local.exit_code == remote.exit_code == 0, (local.message, remote.message)

    def evidence(root: Path) -> list[dict]:
        rows = db(root).execute("SELECT progress FROM attempts WHERE task_id='q' ORDER BY id")
        return [json.loads(p)["files"] for (p,) in rows]

    there_files = evidence(there)
    assert [f["paths"] for f in there_files] == [["src/part1.bin", "src/part1.txt"], ["src/part2.txt"],
                                                 ["README.md", "src/part3.txt"], ["src/part4.txt"]], there_files
    assert [(f["added"], f["removed"], f["new"]) for f in there_files] == [(3, 0, 2), (6, 0, 1), (9, 2, 1), (12, 0, 1)]
    assert there_files == evidence(here)


def test_a_stuck_loop_task_explores_on_workers_and_its_next_call_starts_from_the_chosen_branch(tmp_path, on_ray):
    """The stuck point had no change (no worktree on the driver yet); the branches run on
    workers; the task's next call, on a worker, finds the chosen branch's files."""
    root = tmp_path / "p"
    task = node("t", routing={"agent": "bot"}, completion_promise="DONE", isolation="worktree",
                limits={"stuck_after": 1, "max_iterations": 10},
                loop={"progress_threshold": None, "recovery": ["explore", "human"]})
    plan = write_project(root, [task], concurrency=1,
                         agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py")]}})
    (root / "agent.py").write_text(EXPLORE_AGENT)
    git_repo(root)
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    explored = [json.loads(d or "{}") for (d,) in db(root).execute("SELECT data FROM events WHERE kind='explored'")]
    assert len(explored) == 1 and explored[0]["chosen"] == 2, explored
    assert git(root, "show", f"harnessc/run/{r.run_id}:way.txt") == "the way\n"
    statuses = [s for (s,) in db(root).execute("SELECT status FROM attempts WHERE task_id='t' ORDER BY id")]
    assert statuses == ["stuck", "progress", "progress", "progress", "succeeded"]


def test_placement_reads_the_nodes_once_and_again_before_refusing_an_attempt(tmp_path, cluster, on_ray, monkeypatch):
    """The driver's placement check reuses its read of the cluster's nodes (here for the
    whole run), and reads them again before it refuses an attempt: a node that joined
    since takes the attempt asking for what only it offers."""
    from harnessc.runtime.executor import ray as rayexec

    monkeypatch.setattr(rayexec, "NODES_TTL", float("inf"))
    reads = []
    nodes = ray.nodes
    monkeypatch.setattr(ray, "nodes", lambda: reads.append(1) or nodes())
    root = tmp_path / "p"
    marks = tmp_path / "p-marks"
    plan = coding_project(root, {"a": [], "c": [], "d": [], "e": ["a"]}, {"wait": ["a"], "raylet": True},
                          e={"resources": {"late": 1}})
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(r=run(root, plan, executor="ray")))
    worker.start()
    late = None
    try:
        wait_for(lambda: any(p.startswith("started-a") for p in os.listdir(marks)))
        late = cluster.add_node(num_cpus=1, resources={"late": 1, "w": 1})
        cluster.wait_for_nodes()
        raylet = late.all_processes["raylet"][0].process.pid
        (marks / "go").write_text("x")
    finally:
        worker.join(120)
        if late is not None:
            cluster.remove_node(late)
    r = result["r"]
    assert r.exit_code == 0, r.message
    assert all(s == "succeeded" for s, _ in task_states(root).values())
    ran_on = int(git(root, "show", f"harnessc/run/{r.run_id}:out/e.raylet"))
    assert ran_on == raylet
    assert len(reads) == 2  # the run's first check; e's, before refusing it


# Task t starts a sleeper (and waits for it), unless the worker that ran its first attempt
# was killed already; the sleeper's argv carries a tag made from argv[1]. Task u waits for
# argv[1]/go: the run goes on meanwhile (its end would kill what it adopted).
ORPHAN_AGENT = """\
import os, pathlib, subprocess, sys, time
marks = pathlib.Path(sys.argv[1])
if os.environ["HARNESSC_TASK"] == "u":
    while not (marks / "go").exists():
        time.sleep(0.05)
elif not (marks / "worker-killed").exists():
    tag = "sleeper-" + str(marks).replace("/", "_")
    subprocess.run([sys.executable, "-c", "import time; time.sleep(300)", tag])
print("<promise>DONE</promise>")
"""


def test_a_worker_killed_mid_attempt_leaves_nothing_of_its_agent_running(tmp_path, on_ray):
    """A worker that dies (a force cancel, a crash) takes its agent's whole process group
    with it, grandchildren included (a parent-death signal reached only the agent), and the
    attempt runs again."""
    root, marks = tmp_path / "p", tmp_path / "marks"
    marks.mkdir()
    tag = "sleeper-" + str(marks).replace("/", "_")
    bot = {"provider": "command", "command": [PY, str(root / "agent.py"), str(marks)]}
    loop = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    plan = write_project(root, [node("t", **loop), node("u", **loop)], agents={"bot": bot})
    (root / "agent.py").write_text(ORPHAN_AGENT)
    git_repo(root)
    result: dict = {}
    driver = threading.Thread(target=lambda: result.update(r=run(root, plan, executor="ray")))
    driver.start()
    try:
        wait_for(lambda: marked(tag))
        sleeper = marked(tag)[0]
        agent = parent(sleeper)
        (marks / "worker-killed").write_text("x")
        os.kill(parent(agent), signal.SIGKILL)  # the Ray worker running the attempt
        wait_for(lambda: not marked(tag), timeout=30)  # while the run goes on
    finally:
        (marks / "go").write_text("x")
        driver.join(120)
        for pid in marked(tag):
            os.kill(pid, signal.SIGKILL)
    r = result["r"]
    assert r.exit_code == 0, r.message
    statuses = [s for (s,) in db(root).execute("SELECT status FROM attempts WHERE task_id='t' ORDER BY id")]
    assert statuses == ["interrupted", "succeeded"]


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_what_an_agent_commits_on_a_worker_lands_as_locally(tmp_path, on_ray, monkeypatch):
    """The change a worker brings back is its base against the checkout's files, whatever
    the agent committed there (test_agent_commits.py's agent: a task named `secret` commits
    the key it was given, `root` makes an unrelated root, `several` commits and amends on a
    branch of its own); the driver commits it with the same checks: the key is withheld."""
    from .test_agent_commits import AGENT as COMMITTING_AGENT, SECRET

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    root = tmp_path / "p"
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    plan = write_project(root, [node(t, **bot) for t in ("secret", "root", "several")], concurrency=3,
                         agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py")],
                                         "pass_env": ["OPENAI_API_KEY"]}})
    (root / "agent.py").write_text(COMMITTING_AGENT)
    (root / "old.txt").write_text("old\n")
    git_repo(root)
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root, plan, executor="ray")
    assert r.exit_code == 0, r.message
    ref = f"harnessc/run/{r.run_id}"
    assert SECRET not in git(root, "log", "-p", "--all")
    changed = {line.split()[0]: git(root, "show", "--name-only", "--format=", line.split()[0]).split()
               for line in git(root, "log", "--format=%H %s", f"{base}..{ref}").splitlines()}
    assert sorted(changed.values()) == [["a.txt", "b.txt", "c.txt", "d.txt"], ["code.py", "more.py"], ["new.txt"]]
    assert all(len(git(root, "log", "-1", "--format=%P", sha).split()) == 1 for sha in changed)
    assert ".env (it holds the value of a secret" in (root / ".harness" / "alerts.log").read_text()
