"""harness.yaml `executor:` and roadmap `resources:` into plan.json and back, the run's
executor settings (`run --executor` / `--ray-address` over the plan's), and the one-line
error when Ray is not installed. (The Ray runtime itself is tested in tests/runtime/.)"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harnessc import planfile
from harnessc.runtime.executor import ExecutorError
from harnessc.runtime.executor.rayconfig import ExecutorSettings, require_ray, resolve_executor

from conftest import REPO
from inproc import harnessc as in_process

DEMO = REPO / "specs" / "demo"
RAY_SETTINGS = ("executor:\n  kind: ray\n  address: \"10.0.0.5:6379\"\n  num_cpus_per_attempt: 0.5\n"
                "  resources: {harnessc_worker: 1.0}\n  placement: all\n"
                "  clone_url: git@github.com:acme/app.git\n")


def harnessc(root: Path, *args: str, prelude: str = "") -> subprocess.CompletedProcess:
    """`harnessc -C root ARGS`: in this process (tests/inproc.py), or with a `prelude` (e.g. to
    hide ray) in a fresh interpreter that runs it first."""
    if not prelude:
        return in_process("-C", str(root), *args, env={k: v for k, v in os.environ.items() if k != "HARNESSC_DEBUG"})
    code = f"{prelude}\nimport sys\nfrom harnessc.cli import main\nsys.argv = ['harnessc', *sys.argv[1:]]\nmain()\n"
    env = {k: v for k, v in os.environ.items() if k != "HARNESSC_DEBUG"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code, "-C", str(root), *args], capture_output=True, text=True,
                          timeout=180, env=env)


def git_project(root: Path) -> Path:
    """`root` as a git repository with everything committed (executor: ray needs a commit)."""
    for args in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "T"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / ".gitignore").write_text(".harness/\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    return root


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".harness"))
    return root


def _plan(root: Path) -> planfile.Plan:
    return planfile.loads((root / ".harness/build/plan.json").read_text())


# ------------------------------------------------------------------ the plan


def test_executor_and_resources_reach_the_plan_and_read_back(demo: Path) -> None:
    assert harnessc(demo, "build").returncode == 0
    before = _plan(demo)
    assert before.executor is None and all(n.resources is None for n in before.nodes)  # local: no record
    (demo / "harness.yaml").write_text((demo / "harness.yaml").read_text() + RAY_SETTINGS)
    text = (demo / "roadmap.md").read_text().replace(
        "  - completion_promise: DATA_OK\n", "  - completion_promise: DATA_OK\n  - resources: {gpu_box: 1, big_disk: 0.5}\n")
    (demo / "roadmap.md").write_text(text)
    git_project(demo)
    r = harnessc(demo, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    raw = json.loads((demo / ".harness/build/plan.json").read_text())
    assert raw["executor"] == {"kind": "ray", "address": "10.0.0.5:6379", "num_cpus_per_attempt": 0.5,
                               "resources": {"harnessc_worker": 1}, "placement": "all",
                               "clone_url": "git@github.com:acme/app.git"}
    plan = _plan(demo)
    assert isinstance(plan.executor, planfile.Executor) and plan.executor == raw["executor"]
    assert plan.node("data-001").resources == {"gpu_box": 1, "big_disk": 0.5}
    assert all(n.resources is None for n in plan.nodes if n.id != "data-001")
    # where attempts run is not what their result must be: results stay fresh
    assert {n.id: n.fingerprint for n in plan.nodes} == {n.id: n.fingerprint for n in before.nodes}
    # the records write back the same text
    out = bytearray()
    planfile.dump(plan, out.extend)
    assert planfile.loads(bytes(out).decode()) == plan and plan.executor == planfile.loads(bytes(out).decode()).executor


def test_the_string_shorthand_ray_is_kind_ray_with_the_defaults(demo: Path) -> None:
    (demo / "harness.yaml").write_text((demo / "harness.yaml").read_text() + "executor: ray\n")
    git_project(demo)
    r = harnessc(demo, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _plan(demo).executor == {"kind": "ray", "address": None, "num_cpus_per_attempt": 1, "resources": {},
                                    "placement": "commands", "clone_url": None}


def test_executor_ray_needs_a_git_repository_for_every_task(demo: Path) -> None:
    (demo / "harness.yaml").write_text((demo / "harness.yaml").read_text() + "executor: ray\n")
    r = harnessc(demo, "lint")
    assert r.returncode == 1
    assert "harness.yaml:12:1: error[HC417]: executor: ray needs a git repository" in r.stdout, r.stdout
    assert "or use executor: local" in r.stdout


# ------------------------------------------------------------------ resolve_executor


def _ray_plan(**settings) -> planfile.Plan:
    executor = planfile.Executor(**{"kind": "ray", "address": None, "num_cpus_per_attempt": 1, "resources": {},
                                    "placement": "commands", "clone_url": None, **settings})
    return planfile.Plan(1, "x", {}, {}, None, {}, {}, {}, 1, {}, [], [], [], [], executor=executor)


LOCAL_PLAN = planfile.Plan(1, "x", {}, {}, None, {}, {}, {}, 1, {}, [], [], [], [])


def test_resolve_executor_local_unless_the_plan_or_a_flag_says_ray() -> None:
    assert resolve_executor(LOCAL_PLAN) is None
    assert resolve_executor(LOCAL_PLAN, "local") is None
    assert resolve_executor(_ray_plan(), "local") is None  # the flag wins over harness.yaml
    assert resolve_executor(LOCAL_PLAN, "ray") == ExecutorSettings()  # Ray's defaults: a local cluster
    assert resolve_executor(LOCAL_PLAN, ray_address="auto") == ExecutorSettings(address="auto")  # implies ray


def test_resolve_executor_keeps_the_plans_settings_and_the_address_flag_wins() -> None:
    plan = _ray_plan(address="head:6379", num_cpus_per_attempt=2, resources={"gpu_box": 1}, placement="all",
                     clone_url="https://example.com/a.git")
    settings = resolve_executor(plan)
    assert settings == ExecutorSettings("ray", "head:6379", 2, {"gpu_box": 1}, "all", "https://example.com/a.git")
    assert resolve_executor(plan, "ray", "ray://other:10001").address == "ray://other:10001"
    # a task's own resources add to the executor's, and win for a name both give
    assert settings.resources_for({"gpu_box": 2, "big_disk": 1}) == {"gpu_box": 2, "big_disk": 1}
    assert settings.resources_for(None) == {"gpu_box": 1}


@pytest.mark.parametrize("executor, address, words", [
    ("local", "head:6379", "--ray-address needs the ray executor"),
    (None, "head", "--ray-address 'head' has no port"),
    ("ray", "http://head:8265", "has the scheme http://"),
    ("fargate", None, "unknown executor 'fargate'"),
])
def test_resolve_executor_refuses_what_cannot_be_meant(executor, address, words) -> None:
    with pytest.raises(ExecutorError) as e:
        resolve_executor(LOCAL_PLAN, executor, address)
    assert words in e.value.message and e.value.hint


def test_require_ray_gives_the_module() -> None:
    ray = require_ray()
    assert ray.__name__ == "ray"


# ------------------------------------------------------------------ the CLI

# (in this process) `import ray` raises ImportError, as when it is not installed
def hide_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)


NO_RAY = "harnessc: error: executor ray needs Ray: pip install 'harnessc[ray]'\n"


def test_run_executor_ray_without_ray_is_one_line_and_exit_2(demo: Path, monkeypatch) -> None:
    assert harnessc(demo, "build").returncode == 0
    hide_ray(monkeypatch)
    r = harnessc(demo, "run", "--executor", "ray")
    assert (r.returncode, r.stderr) == (2, NO_RAY), r.stdout + r.stderr
    assert not (demo / ".harness/state.db").exists()  # refused before anything started


def test_harness_yaml_executor_ray_without_ray_is_refused_too(demo: Path, monkeypatch) -> None:
    (demo / "harness.yaml").write_text((demo / "harness.yaml").read_text() + "executor: ray\n")
    git_project(demo)
    assert harnessc(demo, "build").returncode == 0
    hide_ray(monkeypatch)
    r = harnessc(demo, "run")
    assert (r.returncode, r.stderr) == (2, NO_RAY), r.stdout + r.stderr
    # and --executor local runs on this machine without Ray
    r = harnessc(demo, "run", "--executor", "local")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ray_too_old_is_refused(demo: Path, monkeypatch) -> None:
    assert harnessc(demo, "build").returncode == 0
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(__name__="ray", __version__="2.9.3"))
    r = harnessc(demo, "run", "--executor", "ray")
    assert r.returncode == 2
    assert r.stderr.startswith("harnessc: error: executor ray needs Ray 2.50 or later; this one is 2.9.3\n"), r.stderr


# ray.init raising what Ray raises when the cluster's Ray or Python differs: Ray's own check
# (ray._private.utils.check_version_info) builds the exception from the cluster's metadata
MISMATCH = """
import ray, ray._private.utils as ray_utils
def init(*args, **kwargs):
    ray_utils.check_version_info({"ray_version": "2.49.0", "python_version": "3.10.12"}, "10.0.0.7:6379")
ray.init = init
"""


def test_a_cluster_of_another_ray_version_is_one_line_and_exit_2(demo: Path) -> None:
    pytest.importorskip("ray")
    git_project(demo)
    assert harnessc(demo, "build").returncode == 0
    r = harnessc(demo, "run", "--ray-address", "auto", prelude=MISMATCH)
    assert r.returncode == 2, r.stdout + r.stderr
    error, hint = r.stderr.splitlines()
    assert error.startswith("harnessc: error: the Ray cluster at auto runs another Ray or Python version "
                            "than this harnessc: The cluster was started with: Ray: 2.49.0 Python: 3.10.12 "
                            "This process on 10.0.0.7:6379 was started with: Ray: "), error
    assert hint.startswith("  hint: install the cluster's Ray and Python versions here"), hint


@pytest.mark.parametrize("args, words", [
    (["--executor", "local", "--ray-address", "head:6379"], "--ray-address needs the ray executor"),
    (["--ray-address", "head"], "--ray-address 'head' has no port"),
    (["--executor", "kubernetes"], "Invalid value for '--executor'"),
])
def test_run_flags_that_cannot_work_are_usage_errors(demo: Path, args, words) -> None:
    r = harnessc(demo, "run", "--dry-run", *args)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_run_flags_reach_the_runtime(demo: Path) -> None:
    r = harnessc(demo, "run", "--executor", "local")
    assert r.returncode == 0, r.stdout + r.stderr
    with sqlite3.connect(demo / ".harness/state.db") as db:
        (options,) = db.execute("SELECT options FROM runs").fetchone()
    options = json.loads(options)
    assert options["executor"] == "local" and options["ray_address"] is None
