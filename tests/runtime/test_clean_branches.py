"""`harnessc clean` removes the integration branches harnessc/run/<id> your branch already
holds, `--branches` the rest too, never the branch a run in progress lands on
(runtime/worktree/runbranches.py). Real git, real runs of a command agent."""

from __future__ import annotations

import time

from . import virtual
from .helpers import git, spawn
from .test_isolation import project, run, run_id


def branches(root) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/harnessc/").split()


def test_clean_removes_merged_run_branches_and_branches_the_rest_but_never_a_running_runs(tmp_path):
    root = tmp_path / "p"
    marks = tmp_path / "p-marks"
    project(root, {"a": [], "b": [], "c": [], "d": []}, {"await_mark": {"d": ["go"]}}, concurrency=1)
    ids = []
    for task in ("a", "c", "b"):
        if task == "b":  # the user's untracked file where b lands: the user's branch stays behind
            (root / "out").mkdir(exist_ok=True)
            (root / "out" / "b.txt").write_text("the user's own b\n")
        r = run(root, "--select", task)
        assert r.returncode == 0, r.stdout + r.stderr
        ids.append(run_id(root))
    assert branches(root) == sorted(f"harnessc/run/{i}" for i in ids)

    r = virtual.harnessc(root, "clean")
    assert r.returncode == 0, r.stdout + r.stderr
    assert branches(root) == [f"harnessc/run/{ids[2]}"]  # b's work is not on the user's branch
    assert f"removed branch harnessc/run/{ids[0]} (merged into your branch)" in r.stdout
    assert f"kept 1 integration branch your branch does not hold: harnessc/run/{ids[2]}" in r.stdout
    assert f"harnessc/run/{ids[2]}" in virtual.harnessc(root, "clean", "--branches", "--dry-run").stdout
    assert branches(root) == [f"harnessc/run/{ids[2]}"]
    r = virtual.harnessc(root, "clean", "--branches")
    assert r.returncode == 0 and branches(root) == [], r.stdout + r.stderr

    (root / "out" / "b.txt").unlink()
    proc = spawn(root, "run", "--no-build", "--select", "d")
    try:
        for _ in range(1200):  # d's agent waits for the mark: the run holds its branch
            if branches(root) and (root / ".harness" / "worktrees").is_dir():
                break
            time.sleep(0.05)
        held = branches(root)
        assert len(held) == 1
        r = virtual.harnessc(root, "clean", "--branches")
        assert r.returncode == 0, r.stdout + r.stderr
        assert branches(root) == held
    finally:
        (marks / "go").write_text("x")
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
