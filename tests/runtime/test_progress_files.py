"""File evidence: git snapshots of the working tree (runtime/loop/files.py) and which task changed
what when tasks run at the same time (runtime/loop/attribution.py)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from git import Repo

from harnessc import planfile
from harnessc.gitcmd import GitFailed
from harnessc.runtime.loop.attribution import Attribution, naming
from harnessc.runtime.loop.files import GitSnapshots

from .helpers import git_repo, node


def repo(path):
    git_repo(path, commit=False)


def test_a_git_add_that_fails_on_one_file_still_gives_a_snapshot(tmp_path):
    """`git add --ignore-errors` exits non-zero when a file cannot be read (an unreadable file,
    which root in CI cannot make): the snapshot keeps what it added, else every iteration of
    the task would look like no file changed."""
    repo(tmp_path)
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / ".harness").mkdir()
    files = GitSnapshots(Repo(tmp_path), tmp_path, tmp_path / ".harness" / "idx")
    before = files.snapshot()
    real = files._git

    def flaky(*args, **kw):
        if args[0] == "add":
            real(*args, **kw)
            raise GitFailed("add", 1, 'error: open("locked.txt"): Permission denied')
        return real(*args, **kw)

    files._git = flaky
    (tmp_path / "b.txt").write_text("b\n")
    delta = files.changes(before, files.snapshot())
    assert delta.per_path == {"b.txt": (1, 0, True)}
    files.close()


def test_a_project_inside_a_repository_sees_only_its_own_files(tmp_path):
    """The project (where roadmap.md is) may be a directory of a larger repository: only its
    files are evidence, and never its .harness/ (harnessc's own writes)."""
    repo(tmp_path)
    project = tmp_path / "proj"
    (project / ".harness").mkdir(parents=True)
    (project / "a.txt").write_text("a\n")
    (tmp_path / "outside.txt").write_text("o\n")
    files = GitSnapshots(Repo(project, search_parent_directories=True), project, project / ".harness" / "idx")
    before = files.snapshot()
    (tmp_path / "outside.txt").write_text("changed\n")  # another part of the repository
    (project / ".harness" / "state.db").write_text("x" * 100)  # harnessc's own
    assert files.changes(before, files.snapshot()).per_path == {}
    (project / "a.txt").write_text("a\nb\nc\n")
    assert files.changes(before, files.snapshot()).per_path == {"proj/a.txt": (2, 0, False)}
    files.close()


def test_lines_new_files_deletions_and_commits_between_any_two_snapshots(tmp_path):
    """Snapshots list what differs from the run's base tree; any two of them compare without
    a git process: lines from the blobs, new and deleted files, commits walked from HEAD."""
    repo(tmp_path)
    (tmp_path / "keep.txt").write_text("1\n2\n3\n")
    (tmp_path / "gone.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "init"], check=True)
    (tmp_path / ".harness").mkdir()
    files = GitSnapshots(Repo(tmp_path), tmp_path, tmp_path / ".harness" / "idx")
    s0 = files.snapshot()
    (tmp_path / "keep.txt").write_text("1\ntwo\n3\n4\n")
    s1 = files.snapshot()
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "new.txt").write_text("n\n")
    (tmp_path / "keep.txt").write_text("1\ntwo\n3\n4\n5\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "two", "--allow-empty"], check=True)
    s2 = files.snapshot()
    assert files.changes(s0, s1).per_path == {"keep.txt": (2, 1, False)}
    d12 = files.changes(s1, s2)
    assert d12.per_path == {"keep.txt": (1, 0, False), "gone.txt": (0, 1, False), "new.txt": (1, 0, True)}
    assert d12.commits == 2 and files.changes(s0, s1).commits == 0
    assert files.changes(s0, s2).per_path["keep.txt"] == (3, 1, False)
    (tmp_path / "keep.txt").write_text("1\n2\n3\n")  # back as in the base
    assert files.changes(s2, files.snapshot()).per_path["keep.txt"] == (1, 3, False)
    files.close()


def test_a_returned_change_gives_the_evidence_snapshots_of_the_worktree_give(tmp_path):
    """executor ray: the evidence between two whole changes (binary diffs against one base,
    as workers return them) is the evidence snapshots of a tree holding them give: paths,
    lines, new files (a quoted name, a binary file, a mode, a deletion, a file gone back to
    its base), within the project, its caches aside."""
    from harnessc.runtime.executor.bundle import change_of
    from harnessc.runtime.loop import returned

    repo(tmp_path)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "keep.txt").write_text("1\n2\n3\n")
    (project / "gone.txt").write_text("x\n")
    (project / "run.sh").write_text("echo\n")
    (tmp_path / "outside.txt").write_text("o\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "init"], check=True)
    base = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (project / ".harness").mkdir()
    files = GitSnapshots(Repo(project, search_parent_directories=True), project, project / ".harness" / "idx")

    def step(edit):
        edit()
        diff, _ = change_of(tmp_path, base)
        subprocess.run(["git", "-C", str(tmp_path), "reset", "-q"], check=True)  # change_of's intent-to-add
        return files.snapshot(), diff

    steps = [step(lambda: None)]
    steps.append(step(lambda: ((project / "keep.txt").write_text("1\ntwo\n3\n4\n"),
                               (project / "naïve name.txt").write_text("n\n"),
                               (tmp_path / "outside.txt").write_text("changed\n"))))
    steps.append(step(lambda: ((project / "gone.txt").unlink(), (project / "run.sh").chmod(0o755),
                               (project / "blob.bin").write_bytes(bytes(range(256))),
                               (project / "__pycache__").mkdir(), (project / "__pycache__" / "m.pyc").write_text("c"))))
    steps.append(step(lambda: ((project / "keep.txt").write_text("1\n2\n3\n"), (project / "gone.txt").write_text("x\n"))))
    for (s0, d0), (s1, d1) in zip(steps, steps[1:]):
        local = files.changes(s0, s1).per_path
        remote = returned.changes(d0, d1, prefix="proj/")
        assert remote == returned.filesmod.total("git", local), (local, remote)
        assert remote.files >= 1
    assert returned.changes(steps[1][1], steps[2][1], prefix="proj/").paths == \
        ["proj/blob.bin", "proj/gone.txt", "proj/run.sh"]
    files.close()


def ledger(root, *nodes_, jobs=2):
    plan_nodes = [planfile._node(n) for n in nodes_]
    return Attribution(root, root / ".harness" / "loop" / "run.index", plan_nodes, jobs), plan_nodes


def test_a_change_while_two_tasks_work_is_decided_by_context_owner_or_answer(tmp_path):
    """Two loop tasks at once: what one writes while the other works is not the other's."""
    repo(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "seed.py").write_text("seed\n")
    (tmp_path / ".harness").mkdir()
    att, (a, b) = ledger(tmp_path, node("a", completion_promise="DONE"),
                         node("b", completion_promise="DONE", context=["src/seed.py"]))

    async def scenario():
        await att.begin(a)
        await att.begin(b)
        (tmp_path / "src" / "b1.py").write_text("x\n")  # b's context directory
        (tmp_path / "notes.txt").write_text("n\n")  # nobody's context, nobody names it
        fa = await att.measure("a", "thinking about things")
        fb = await att.measure("b", "wrote some code")
        assert (fa.files, fa.others, fa.shared) == (0, 1, 1), fa
        assert (fb.files, fb.paths, fb.shared) == (1, ["src/b1.py"], 1), fb
        # b alone from here: its next segment starts where its last ended
        await att.end("a", measure=False)
        await att.begin(b)
        (tmp_path / "notes.txt").write_text("n\nm\n")
        fb = await att.measure("b", "")
        assert (fb.files, fb.added) == (1, 1), fb  # alone: b's, and b owns it now
        await att.begin(a)  # a back (a retry): both work again
        await att.begin(b)
        (tmp_path / "notes.txt").write_text("n\nm\no\n")
        (tmp_path / "readme.md").write_text("r\n")
        fa = await att.measure("a", "I updated readme.md")
        fb = await att.measure("b", "")
        assert (fa.paths, fa.others) == (["readme.md"], 1), fa  # notes.txt: b owns it; readme.md: named
        assert (fb.paths, fb.others) == (["notes.txt"], 1), fb
        assert att.commit_paths("b") == {"src/b1.py", "notes.txt"}
        assert att.commit_paths("a") == {"readme.md"}

    try:
        asyncio.run(scenario())
    finally:
        att.close()


def test_a_change_before_or_after_another_tasks_work_is_not_its(tmp_path):
    """A task sees only what changed inside its own segment: an earlier task's finished work
    is no rival's, and a later task's start is after it."""
    repo(tmp_path)
    (tmp_path / ".harness").mkdir()
    att, (a, b) = ledger(tmp_path, node("a", completion_promise="DONE"), node("b", completion_promise="DONE"))

    async def scenario():
        await att.begin(a)
        (tmp_path / "early.txt").write_text("a's\n")
        await att.begin(b)  # after a's write: b's start already has it
        (tmp_path / "late.txt").write_text("b's\n")
        fb = await att.measure("b", "")
        fa = await att.measure("a", "")
        assert fa.paths == ["early.txt"] and fa.shared == 1, fa  # late.txt: both saw it, nobody said
        assert fb.paths == [] and fb.shared == 1, fb

    try:
        asyncio.run(scenario())
    finally:
        att.close()


def test_a_snapshot_with_nothing_changed_is_the_last_one_and_a_change_is_seen(tmp_path):
    """When `git add` writes no index (nothing changed), the last listing is reused; any
    change, even one that keeps the file's size, is still seen."""
    repo(tmp_path)
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / ".harness").mkdir()
    files = GitSnapshots(Repo(tmp_path), tmp_path, tmp_path / ".harness" / "idx")
    s0 = files.snapshot()
    (tmp_path / "a.txt").write_text("two\n")
    s1 = files.snapshot()
    s2 = files.snapshot()
    assert s2.blobs == s1.blobs and files.changes(s1, s2).per_path == {}
    (tmp_path / "a.txt").write_text("six\n")  # same size
    s3 = files.snapshot()
    assert files.changes(s2, s3).per_path == {"a.txt": (1, 1, False)}
    assert files.changes(s0, s3).per_path == {"a.txt": (1, 1, False)}
    files.close()


def test_naming_counts_how_much_of_a_path_a_text_spells():
    """The whole path (from the project, the repository, or absolute under the project) is
    all of its parts; a word that is another path with the same file name names nothing."""
    path = "proj/pkga/ops.py"  # as a snapshot lists it: the project is proj/ in its repository
    assert naming("Write pkga/ops.py.", path, "proj/") == 2
    assert naming("see ./proj/pkga/ops.py", path, "proj/") == 2
    assert naming("wrote /work/proj/pkga/ops.py", path, "proj/", root=Path("/work/proj")) == 2
    assert naming("fix ops.py, then test", path, "proj/") == 1
    assert naming("Write pkgb/ops.py.", path, "proj/") == 0
    assert naming("wrote /elsewhere/pkga/ops.py", path, "proj/", root=Path("/work/proj")) == 0
    assert naming("operations", path, "proj/") == 0 and naming("", path) == 0
    assert naming("edit b/c.py", "a/b/c.py") == 2 and naming("edit a/b/c.py", "a/b/c.py") == 3
    assert naming("kept ops.py.bak", "ops.py") == 0 and naming("see `ops.py`.", "ops.py") == 1
    assert naming('wrote "docs/my notes.md"', "docs/my notes.md") == 2


def test_a_full_path_in_a_goal_beats_a_file_name_in_another(tmp_path):
    """Three tasks at once, two files named ops.py: each goes to the task whose goal spells
    its whole path, not to the tasks whose goals name only ops.py or another ops.py; a file
    whose name alone two goals name is shared by those two."""
    repo(tmp_path)
    (tmp_path / ".harness").mkdir()
    for d in ("pkga", "pkgb", "pkgc"):
        (tmp_path / d).mkdir()
    att, (a, b, c) = ledger(tmp_path, node("a", completion_promise="DONE", goal="Write pkga/ops.py."),
                            node("b", completion_promise="DONE", goal="Write pkgb/ops.py, then fix ops.py."),
                            node("c", completion_promise="DONE", goal="Tidy every ops.py."), jobs=3)

    async def scenario():
        for n in (a, b, c):
            await att.begin(n)
        (tmp_path / "pkga" / "ops.py").write_text("a\n")
        (tmp_path / "pkgb" / "ops.py").write_text("b\n")
        (tmp_path / "pkgc" / "ops.py").write_text("c\n")  # b and c name ops.py, a names another
        fa = await att.measure("a", "")
        fb = await att.measure("b", "")
        fc = await att.measure("c", "")
        assert (fa.paths, fa.others, fa.shared) == (["pkga/ops.py"], 2, 0), fa
        assert (fb.paths, fb.others) == (["pkgb/ops.py", "pkgc/ops.py"], 1), fb
        assert (fc.paths, fc.others) == (["pkgc/ops.py"], 2), fc
        assert att.claim == {"pkga/ops.py": {"a"}, "pkgb/ops.py": {"b"}, "pkgc/ops.py": {"b", "c"}}

    try:
        asyncio.run(scenario())
    finally:
        att.close()


def test_an_answer_naming_the_full_path_beats_one_naming_the_file_name(tmp_path):
    """Rule 4 ranks the answers the same way: the whole path over the file name."""
    repo(tmp_path)
    (tmp_path / ".harness").mkdir()
    (tmp_path / "pkgb").mkdir()
    att, (a, b) = ledger(tmp_path, node("a", completion_promise="DONE"), node("b", completion_promise="DONE"))

    async def scenario():
        await att.begin(a)
        await att.begin(b)
        await att.measure("b", "I will write pkgb/ops.py")  # b's last answer, when a's is decided
        await att.begin(b)
        (tmp_path / "pkgb" / "ops.py").write_text("b\n")
        fa = await att.measure("a", "I read ops.py")
        fb = await att.measure("b", "I wrote pkgb/ops.py")
        assert (fa.paths, fa.others) == ([], 1), fa
        assert fb.paths == ["pkgb/ops.py"], fb

    try:
        asyncio.run(scenario())
    finally:
        att.close()
