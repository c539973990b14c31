"""File evidence outside git (runtime/loop/files.py HashedSnapshots): files are hashed in chunks,
a file over MAX_HASHED_BYTES is never read, and a symbolic link is never followed."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from harnessc.runtime.loop.files import MAX_HASHED_BYTES, HashedSnapshots


def bytes_read() -> int:
    """What this process has read through read(2) so far (Linux's /proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


needs_proc_io = pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="Linux /proc/self/io")


@needs_proc_io
def test_a_file_over_the_cap_is_not_read_and_its_change_still_seen(tmp_path: Path) -> None:
    big = tmp_path / "data.bin"
    with open(big, "wb") as f:
        f.truncate(MAX_HASHED_BYTES * 4)  # sparse: no disk used, 64 MiB to read
    (tmp_path / "small.txt").write_text("x\n")
    files = HashedSnapshots(tmp_path)
    before = bytes_read()
    first = files.snapshot()
    assert bytes_read() - before < MAX_HASHED_BYTES // 4
    assert set(first.blobs) == {"data.bin", "small.txt"}
    with open(big, "r+b") as f:
        f.truncate(MAX_HASHED_BYTES * 5)
    second = files.snapshot()
    assert bytes_read() - before < MAX_HASHED_BYTES // 4
    assert files.changes(first, second).per_path == {"data.bin": (0, 0, False)}


def test_a_file_under_the_cap_is_hashed_in_chunks(tmp_path: Path) -> None:
    content = os.urandom(1 << 20) * 12  # 12 MiB, under the cap
    assert len(content) < MAX_HASHED_BYTES
    (tmp_path / "model.bin").write_bytes(content)
    files = HashedSnapshots(tmp_path)
    tracemalloc.start()
    try:
        snap = files.snapshot()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # never the whole file in memory
    assert snap.blobs["model.bin"] == hashlib.sha256(content).hexdigest()


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("one\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "inner.txt").write_text("one\n")
    (project / "link.txt").symlink_to(outside / "secret.txt")
    (project / "linkdir").symlink_to(outside / "dir")
    (project / "own.txt").write_text("mine\n")
    files = HashedSnapshots(project)
    files.watch(["linkdir/inner.txt"])  # a context file reached through a linked directory
    first = files.snapshot()
    assert "linkdir/inner.txt" not in first.blobs
    (outside / "secret.txt").write_text("two, and longer\n")  # what the link points to changes
    (outside / "dir" / "inner.txt").write_text("two, and longer\n")
    second = files.snapshot()
    assert files.changes(first, second).per_path == {}
    (project / "link.txt").unlink()
    (project / "link.txt").symlink_to(outside / "dir" / "inner.txt")  # the link itself changes
    third = files.snapshot()
    assert files.changes(second, third).per_path == {"link.txt": (0, 0, False)}


def test_watched_context_files_are_read_once_and_only_inside_the_project(tmp_path: Path) -> None:
    """A task's context files are watched: one the walk leaves out (a dot-directory, a cache)
    is hashed too, one the walk lists is read once under its own name, and one outside the
    project or through a linked directory is not read."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / ".config").mkdir(parents=True)
    (project / "node_modules").mkdir()
    (project / "src").mkdir()
    outside.mkdir()
    (project / ".config" / "settings.toml").write_text("a = 1\n")
    (project / "node_modules" / "lib.js").write_text("x\n")
    (project / "src" / "main.py").write_text("print(1)\n")
    (outside / "secret.txt").write_text("s\n")
    (project / "linked").symlink_to(outside)
    files = HashedSnapshots(project)
    files.watch([".config/settings.toml", "node_modules/lib.js", "src/main.py", "../outside/secret.txt",
                 "linked/secret.txt", str(outside / "secret.txt"), "src/missing.py"])
    first = files.snapshot()
    assert set(first.blobs) == {".config/settings.toml", "node_modules/lib.js", "src/main.py"}
    assert first.blobs["src/main.py"] == hashlib.sha256(b"print(1)\n").hexdigest()
    (project / ".config" / "settings.toml").write_text("a = 2\n")
    (project / "src" / "missing.py").write_text("now here\n")
    (outside / "secret.txt").write_text("changed\n")
    second = files.snapshot()
    assert files.changes(first, second).per_path == {".config/settings.toml": (0, 0, False),
                                                     "src/missing.py": (0, 0, True)}


def test_a_fifo_is_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # opening it for reading would wait for a writer for ever
    (tmp_path / "a.txt").write_text("a\n")
    snap = HashedSnapshots(tmp_path).snapshot()
    assert set(snap.blobs) == {"a.txt", "pipe"}
    assert snap.blobs["a.txt"] == hashlib.sha256(b"a\n").hexdigest()


def test_a_small_tree_is_read_on_the_loop_thread_and_a_slow_one_in_a_worker(tmp_path: Path, monkeypatch) -> None:
    """Outside git, once a snapshot was quick the next ones are taken on the event loop's
    thread (a hand-off costs more); once one was slow they go back to a worker thread. The
    evidence is the same either way."""
    import asyncio
    import threading

    from harnessc import planfile
    from harnessc.runtime.loop import files as filesmod
    from harnessc.runtime.loop.attribution import Attribution

    from .helpers import node

    where: list[str] = []
    real = HashedSnapshots.snapshot

    def spy(self):
        where.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(HashedSnapshots, "snapshot", spy)
    monkeypatch.setattr(filesmod, "QUICK_SNAPSHOT", 60.0)  # every snapshot is quick (no timing in a test)
    (tmp_path / "a.txt").write_text("a\n")
    task = planfile._node(node("t", completion_promise="DONE"))
    att = Attribution(tmp_path, tmp_path / ".harness" / "loop" / "run.index", [task], jobs=2)

    async def segment(path: str) -> list[str]:
        await att.begin(task)
        (tmp_path / path).write_text(path)
        changes = await att.measure("t")
        return changes.paths

    async def scenario() -> tuple[list, list, str]:
        first = await segment("b.txt")  # the first snapshot: how long it takes is not known yet
        second = await segment("c.txt")  # a task alone: its segment starts where the last ended
        monkeypatch.setattr(filesmod, "QUICK_SNAPSHOT", 0.0)  # now every snapshot is slow
        third = await segment("d.txt")
        return [first, second, third], list(where), threading.current_thread().name

    try:
        paths, seen, loop_thread = asyncio.run(scenario())
    finally:
        att.close()
    assert paths == [["b.txt"], ["c.txt"], ["d.txt"]]
    assert len(seen) == 4 and seen[0] != loop_thread and seen[1:3] == [loop_thread] * 2 and seen[3] != loop_thread
