"""Nothing harnessc writes, deletes, locks or reads in .harness/ goes through a link out of the
project: each attack of issue 7 through the real CLI, and the confined operations themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harnessc.workspace import UnsafePath, Workspace, WorkspaceError

from . import virtual


@pytest.fixture
def project(tmp_path) -> Path:
    """A starter project (`harnessc init`), built once."""
    root = tmp_path / "p"
    r = virtual.harnessc(tmp_path, "init", str(root))
    assert r.returncode == 0, r.stderr
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    """A directory outside the project with a file that must survive."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    (d / "keep.md").write_text("precious\n")
    return d


def refused(r, link: str) -> None:
    """The one-line error of a refused link, exit 2, no traceback."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("harnessc: error: refusing to "), r.stderr
    assert f"through a symbolic link: {link} -> " in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def replace_by_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def test_build_refuses_a_linked_prompts_directory(project, outside):
    replace_by_link(project / ".harness/build/prompts", outside)
    refused(virtual.harnessc(project, "build"), ".harness/build/prompts")
    assert sorted(os.listdir(outside)) == ["keep.md"]  # nothing deleted, nothing written there


def test_build_refuses_a_linked_build_directory(project, outside):
    replace_by_link(project / ".harness/build", outside)
    refused(virtual.harnessc(project, "build"), ".harness/build")
    assert sorted(os.listdir(outside)) == ["keep.md"]  # no plan.json, no prompts/


def test_build_refuses_a_linked_harness_directory(project, outside):
    replace_by_link(project / ".harness", outside)
    refused(virtual.harnessc(project, "build"), ".harness")
    refused(virtual.harnessc(project, "run"), ".harness")
    assert sorted(os.listdir(outside)) == ["keep.md"]


def test_build_refuses_a_linked_plan_and_prompt(project, outside):
    (project / ".harness/build/plan.json").unlink()
    (project / ".harness/build/plan.json").symlink_to(outside / "keep.md")
    refused(virtual.harnessc(project, "build"), ".harness/build/plan.json")
    prompt = project / ".harness/build/prompts/research-001.md"
    prompt.unlink()
    prompt.symlink_to(outside / "keep.md")
    refused(virtual.harnessc(project, "build"), ".harness/build/prompts/research-001.md")
    assert (outside / "keep.md").read_text() == "precious\n"


def test_run_refuses_a_linked_run_lock(project, outside):
    (project / ".harness").mkdir(exist_ok=True)
    (project / ".harness/run.lock").symlink_to(outside / "keep.md")
    refused(virtual.harnessc(project, "run"), ".harness/run.lock")
    assert (outside / "keep.md").read_text() == "precious\n"  # not truncated


def test_run_refuses_a_hard_linked_run_lock(project, outside):
    os.link(outside / "keep.md", project / ".harness/run.lock")
    r = virtual.harnessc(project, "run")
    assert r.returncode == 2 and "refusing to lock through a hard link: .harness/run.lock" in r.stderr, r.stderr
    assert (outside / "keep.md").read_text() == "precious\n"


def test_stop_refuses_a_linked_stop_file(project, outside):
    (project / ".harness/stop").symlink_to(outside / "keep.md")
    refused(virtual.harnessc(project, "stop"), ".harness/stop")
    assert (outside / "keep.md").read_text() == "precious\n"  # not overwritten


def test_run_refuses_a_linked_state_db_and_wal(project, outside):
    (project / ".harness/state.db").symlink_to(outside / "state.db")
    refused(virtual.harnessc(project, "run"), ".harness/state.db")
    assert sorted(os.listdir(outside)) == ["keep.md"]  # no database created out there
    (project / ".harness/state.db").unlink()
    (project / ".harness/state.db-wal").symlink_to(outside / "keep.md")
    refused(virtual.harnessc(project, "run"), ".harness/state.db-wal")
    assert (outside / "keep.md").read_text() == "precious\n"


def test_run_refuses_a_linked_runs_directory(project, outside):
    (project / ".harness/runs").symlink_to(outside)
    refused(virtual.harnessc(project, "run"), ".harness/runs")
    assert sorted(os.listdir(outside)) == ["keep.md"]


@pytest.mark.parametrize("name", ["roadmap.md", "contracts.yaml", "harness.yaml", ".schemas", ".gitignore"])
def test_init_force_never_writes_through_a_link(tmp_path, outside, name):
    root = tmp_path / "p"
    root.mkdir()
    target = outside if name == ".schemas" else outside / "keep.md"
    (root / name).symlink_to(target)
    r = virtual.harnessc(tmp_path, "init", "--force", str(root))
    refused(r, name)
    assert sorted(os.listdir(outside)) == ["keep.md"]
    assert (outside / "keep.md").read_text() == "precious\n"


# ---------------------------------------------------------------- the operations themselves


def test_operations_stay_in_the_project(tmp_path, outside):
    ws = Workspace(tmp_path)
    ws.write_atomic(ws.plan, "{}\n")
    assert ws.read_text(ws.plan) == "{}\n"
    with ws.open_write(ws.events("r1"), "a") as f:
        f.write("one\n")
    with ws.open_write(ws.events("r1"), "a") as f:
        f.write("two\n")
    assert ws.read_text(ws.events("r1")) == "one\ntwo\n"
    ws.unlink(ws.plan)
    ws.unlink(ws.plan)  # missing_ok
    with pytest.raises(FileNotFoundError):
        ws.read_bytes(ws.plan)
    # A link at the end is removed itself, never followed.
    (tmp_path / ".harness/stop").symlink_to(outside / "keep.md")
    ws.unlink(ws.stop)
    assert not (tmp_path / ".harness/stop").is_symlink() and (outside / "keep.md").exists()
    # A FIFO is not a regular file: refused, not waited on.
    os.mkfifo(ws.stop)
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.read_bytes(ws.stop)
    # A plain file where a directory belongs: the OS reason, named.
    (tmp_path / ".harness/inbox").write_text("x")
    with pytest.raises(WorkspaceError, match=r"cannot write \.harness/inbox: Not a directory"):
        ws.make_dir(ws.inbox / "sub")
    (tmp_path / ".harness/cassettes").symlink_to(outside)
    with pytest.raises(UnsafePath, match=r"read through a symbolic link: \.harness/cassettes -> "):
        ws.read_bytes(ws.cassettes / "keep.md")
    assert sorted(os.listdir(outside)) == ["keep.md"]


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    ws = Workspace(tmp_path)
    ws.write_atomic(ws.plan, "old\n")
    with pytest.raises(RuntimeError):
        with ws.atomic_file(ws.plan) as f:
            f.write(b"half")
            raise RuntimeError("the disk filled up")
    assert ws.read_text(ws.plan) == "old\n"
    assert os.listdir(ws.build) == ["plan.json"]  # the temporary file is gone
