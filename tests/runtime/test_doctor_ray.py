"""`harnessc doctor` with the ray executor: Ray importable (and its version), the cluster's
address reachable, and on each alive node of a real multi-node cluster git and the agents'
executables, the node named."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from .helpers import PY, env, harnessc, node, write_project

BASE_PATH = os.pathsep.join([os.path.dirname(PY), "/usr/bin", "/bin"])  # python, git; no agent CLI


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def project(root: Path) -> Path:
    write_project(root, [node("a", routing={"agent": "cmd"})],
                  agents={"cmd": {"provider": "command", "command": ["hc-doctor-agent", "{prompt}"]}})
    return root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_an_unreachable_address_is_a_problem(tmp_path):
    port = closed_port()
    r = harnessc(project(tmp_path), "doctor", "--ray-address", f"127.0.0.1:{port}", env=env(PATH=BASE_PATH))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"executor: address: 127.0.0.1:{port} is unreachable (connection refused)" in r.stdout
    assert "executor: ray: ray 2." in r.stdout  # Ray and its version
    r = harnessc(tmp_path, "doctor", "--output", "json", "--ray-address", f"ray://127.0.0.1:{port}", env=env(PATH=BASE_PATH))
    checks = json.loads(r.stdout)["executor"]
    assert [(c["check"], c["ok"]) for c in checks] == [("ray", True), ("address", False)]
    assert checks[1]["detail"] == f"127.0.0.1:{port} is unreachable (connection refused)"


def test_doctor_says_ray_is_missing(tmp_path):
    sitecustomize = tmp_path / "hide" / "sitecustomize.py"  # `import ray` fails, as when not installed
    sitecustomize.parent.mkdir()
    sitecustomize.write_text("import sys\nsys.modules['ray'] = None\n")
    e = env(PATH=BASE_PATH)
    e["PYTHONPATH"] = os.pathsep.join([str(sitecustomize.parent), e.get("PYTHONPATH", "")])
    r = harnessc(project(tmp_path / "p"), "doctor", "--executor", "ray", env=e)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "executor: ray: executor ray needs Ray: pip install 'harnessc[ray]'" in r.stdout
    assert "Traceback" not in r.stderr


def test_no_executor_lines_with_the_local_executor(tmp_path):
    r = harnessc(project(tmp_path), "doctor", "--output", "json", env=env(PATH=BASE_PATH))
    assert json.loads(r.stdout)["executor"] == []


@pytest.mark.xdist_group("ray")  # one cluster at a time (test_ray_executor.py has the other)
def test_each_node_is_checked_for_git_the_agents_cli_and_its_harnessc(tmp_path):
    """One cluster of four nodes (a cluster's start is most of the test): the head's workers
    find all they need; another's find no agent CLI on PATH; a third's import no harnessc (a
    sitecustomize hides it), a fourth's an older one. Doctor names each node with its problem."""
    from ray.cluster_utils import Cluster

    bindir = tmp_path / "bin"
    executable(bindir / "hc-doctor-agent", "#!/bin/sh\necho 1.0\n")
    with_cli = os.pathsep.join([str(bindir), BASE_PATH])
    hide = tmp_path / "hide"
    executable(hide / "sitecustomize.py", "import sys\nsys.modules['harnessc'] = None\n")
    older = tmp_path / "older"  # a module in sys.modules: the editable install's finder comes first
    executable(older / "sitecustomize.py", "import sys, types\nsys.modules['harnessc'] = types.ModuleType('harnessc')\n"
                                           "sys.modules['harnessc'].__version__ = '0.0.1'\n")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "env_vars": {"PATH": with_cli}})
    try:
        bare = cluster.add_node(num_cpus=1, env_vars={"PATH": BASE_PATH})
        without = cluster.add_node(num_cpus=1, env_vars={"PATH": with_cli, "PYTHONPATH": str(hide)})
        old = cluster.add_node(num_cpus=1, env_vars={"PATH": with_cli, "PYTHONPATH": str(older)})
        r = harnessc(project(tmp_path / "p"), "doctor", "--ray-address", cluster.address, env=env(PATH=with_cli))
        workers = [ln for ln in r.stdout.splitlines() if ln.startswith("executor: worker: ")]
        assert len(workers) == 4, r.stdout + r.stderr
        missing = [ln for ln in workers if "no hc-doctor-agent (agent cmd) on it" in ln]
        assert len(missing) == 1 and f"({bare.node_id[:8]})" in missing[0], workers
        assert any(f"({without.node_id[:8]}): no harnessc 0.1.0 (pip install" in ln for ln in workers), workers
        assert any(f"({old.node_id[:8]}): harnessc 0.0.1 on it, this one is 0.1.0" in ln for ln in workers), workers
        (head,) = [ln for ln in workers if f"({cluster.head_node.node_id[:8]})" in ln]
        assert head.endswith(": harnessc 0.1.0, git, hc-doctor-agent found"), workers
        assert r.returncode == 1
    finally:
        cluster.shutdown()
