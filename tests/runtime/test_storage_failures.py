"""A full disk and a read-only project, for real: `unshare -rm` gives the test its own mount
namespace (as root, or unprivileged where user namespaces are allowed), where a small tmpfs
on .harness fills up and a read-only bind mount covers the project. chmod would not do: the
tests run as root in CI. Each command must end with one clear line naming the path and the
OS reason, exit 2, and leave the state as it was."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from .helpers import CLI, env, harnessc


@lru_cache(maxsize=1)
def namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not namespaces_work(),
                                reason="needs `unshare -rm` (mount namespaces) to fill a disk or mount read-only")


def in_namespace(tmp_path: Path, setup: str, *commands: list[str]) -> list[subprocess.CompletedProcess]:
    """Run `setup` (mounts) then each harnessc command in one private mount namespace; their
    results, read back from files outside the mounts."""
    out = tmp_path / "results"
    out.mkdir(exist_ok=True)
    lines = ["set -e", setup, "set +e"]
    for i, argv in enumerate(commands):
        cmd = " ".join(shlex.quote(a) for a in [*CLI, *argv])
        lines.append(f"{cmd} >{out}/{i}.out 2>{out}/{i}.err; echo $? >{out}/{i}.rc")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", "\n".join(lines)], capture_output=True,
                          text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return [subprocess.CompletedProcess(argv, int((out / f"{i}.rc").read_text()),
                                        (out / f"{i}.out").read_text(), (out / f"{i}.err").read_text())
            for i, argv in enumerate(commands)]


def fill(harness: Path, leave_kb: int) -> str:
    """Shell lines filling the tmpfs at `harness` up to `leave_kb` KiB free."""
    return (f"free=$(df -k {harness} | tail -1 | awk '{{print $4}}')\n"
            f"dd if=/dev/zero of={harness}/filler bs=4k count=$(( (free - {leave_kb}) / 4 )) 2>/dev/null || true")


def one_line_error(r: subprocess.CompletedProcess, message: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == f"harnessc: error: {message}\n", r.stderr


def many_tasks(root: Path, n: int = 60) -> None:
    root.mkdir()
    (root / "roadmap.md").write_text("# P\n\n## Tasks\n\n" + "".join(
        f"- [ ] **t-{i:03d}**: Task {i}\n  - completion_promise: DONE\n\n" for i in range(n)))


def digest(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_full_disk_during_build_keeps_plan_and_prompts(tmp_path):
    root = tmp_path / "p"
    assert harnessc(tmp_path, "init", str(root)).returncode == 0
    harness = root / ".harness"
    harness.mkdir()
    build = " ".join(shlex.quote(a) for a in [*CLI, "-C", str(root), "build"])
    script = "\n".join([
        f"mount -t tmpfs -o size=1m tmpfs {harness}",
        f"{build} >/dev/null",
        fill(harness, 0),
        f"sed -i 's/Survey the market/Survey the whole market/' {root / 'roadmap.md'}",
        f"{build} >{tmp_path}/build.out 2>{tmp_path}/build.err || echo $? >{tmp_path}/build.rc",
        f"rm {harness}/filler",
        f"cp -r {harness}/build {tmp_path}/after-failure",
    ])
    in_namespace(tmp_path, script)
    assert (tmp_path / "build.rc").read_text() == "2\n"
    assert (tmp_path / "build.err").read_text() == (
        "harnessc: error: cannot write .harness/build/prompts/research-001.md: No space left on device\n")
    kept = tmp_path / "after-failure"
    assert sorted(digest(kept)) == ["plan.json", "prompts/_system.md", "prompts/research-001.md",
                                    "prompts/summary-001.md"]  # no half-written or temporary file
    assert "Survey the market" in (kept / "prompts/research-001.md").read_text()  # the old prompt, whole
    assert "Survey the whole market" not in (kept / "plan.json").read_text()  # the old plan


def test_full_disk_during_run_is_one_line_and_the_next_run_resumes(tmp_path):
    root = tmp_path / "p"
    many_tasks(root)
    harness = root / ".harness"
    harness.mkdir()
    run = " ".join(shlex.quote(a) for a in [*CLI, "-C", str(root), "run"])
    status = " ".join(shlex.quote(a) for a in [*CLI, "-C", str(root), "status", "--json"])
    script = "\n".join([
        f"mount -t tmpfs -o size=8m tmpfs {harness}",  # the rerun needs room for all 60 tasks
        " ".join(shlex.quote(a) for a in [*CLI, "-C", str(root), "build"]) + " >/dev/null",
        fill(harness, 260),  # room for state.db and a few tasks, not for 60
        f"{run} >{tmp_path}/run.out 2>{tmp_path}/run.err || echo $? >{tmp_path}/run.rc",
        f"rm {harness}/filler",
        f"{run} >{tmp_path}/rerun.out 2>&1 || echo $? >{tmp_path}/rerun.rc",
        f"{status} >{tmp_path}/status.json",
    ])
    in_namespace(tmp_path, script)
    assert (tmp_path / "run.rc").read_text() == "2\n"
    err = (tmp_path / "run.err").read_text()
    assert err.endswith("harnessc: error: .harness/state.db failed during the run (No space left on device);"
                        " the run stopped and what was committed is kept: fix the cause, then"
                        " `harnessc run` resumes\n"), err
    assert "Traceback" not in err and "internal error" not in err and "never retrieved" not in err
    assert not (tmp_path / "rerun.rc").exists(), (tmp_path / "rerun.out").read_text()
    tasks = json.loads((tmp_path / "status.json").read_text())["tasks"]
    assert {t["state"] for t in tasks} == {"succeeded"} and len(tasks) == 60


def test_read_only_project(tmp_path):
    root = tmp_path / "p"
    assert harnessc(tmp_path, "init", str(root)).returncode == 0
    assert harnessc(root, "run").returncode == 0
    before = digest(root)
    results = in_namespace(
        tmp_path, f"mount --bind {root} {root} && mount -o remount,bind,ro {root}",
        ["-C", str(root), "build"], ["-C", str(root), "run"], ["-C", str(root), "stop"],
        ["-C", str(root), "status"], ["-C", str(root), "reset", "--all"])
    build, run, stop, status, reset = results
    one_line_error(build, "cannot write .harness/build/plan.json: Read-only file system")
    one_line_error(run, "cannot lock .harness/run.lock: Read-only file system")
    one_line_error(stop, "cannot write .harness/stop: Read-only file system")
    one_line_error(status, "cannot open .harness/state.db: Read-only file system")
    one_line_error(reset, "cannot lock .harness/run.lock: Read-only file system")
    assert digest(root) == before
