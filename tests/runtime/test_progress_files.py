"""File evidence (runtime/progress.py): git snapshots of the working tree."""

from __future__ import annotations

import subprocess

from git import Repo
from git.exc import GitCommandError

from harnessc.runtime.progress import GitFiles


def test_a_git_add_that_fails_on_one_file_still_gives_a_snapshot(tmp_path):
    """`git add --ignore-errors` exits non-zero when a file cannot be read (an unreadable file,
    which root in CI cannot make): the snapshot keeps what it added, else every iteration of
    the task would look like no file changed."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / ".harness").mkdir()
    files = GitFiles(Repo(tmp_path), tmp_path, tmp_path / ".harness" / "idx")
    before = files.snapshot()
    real = files._git

    def flaky(*args):
        if args[0] == "add":
            real(*args)
            raise GitCommandError(["git", *args], 1, b"error: open(\"locked.txt\"): Permission denied")
        return real(*args)

    files._git = flaky
    (tmp_path / "b.txt").write_text("b\n")
    after = files.snapshot()
    changes = files.changes(before, after)
    assert (changes.files, changes.new, changes.paths) == (1, 1, ["b.txt"])
    files.close()


def test_a_project_inside_a_repository_sees_only_its_own_files(tmp_path):
    """The project (where roadmap.md is) may be a directory of a larger repository: only its
    files are evidence, and never its .harness/ (harnessc's own writes)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    project = tmp_path / "proj"
    (project / ".harness").mkdir(parents=True)
    (project / "a.txt").write_text("a\n")
    (tmp_path / "outside.txt").write_text("o\n")
    files = GitFiles(Repo(project, search_parent_directories=True), project, project / ".harness" / "idx")
    before = files.snapshot()
    (tmp_path / "outside.txt").write_text("changed\n")  # another part of the repository
    (project / ".harness" / "state.db").write_text("x" * 100)  # harnessc's own
    assert files.changes(before, files.snapshot()).files == 0
    (project / "a.txt").write_text("a\nb\nc\n")
    changes = files.changes(before, files.snapshot())
    assert (changes.files, changes.added, changes.removed, changes.paths) == (1, 2, 0, ["proj/a.txt"])
    files.close()
