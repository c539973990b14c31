"""executor ray, a worker's side without a cluster: the kept checkouts of a node's cache
(executor/bundle.py NodeCache) and the change an attempt brings back. Real git."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from harnessc.runtime.executor import bundle
from harnessc.runtime.executor.bundle import NodeCache, bundle_commit, change_of, snapshot

from .helpers import git, git_repo


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A project's base commit, a node cache holding it, and a checkout of it found clean
    once (its snapshot kept); racy means changed within the last 0.2 s here."""
    monkeypatch.setattr(bundle, "RACY_NS", 200_000_000)
    root = tmp_path / "p"
    root.mkdir()
    (root / "README.md").write_text("project\n")
    (root / "src").mkdir()
    (root / "src" / "a.txt").write_text("aaaa\n")
    git_repo(root)
    sha = git(root, "rev-parse", "HEAD").strip()
    cache = NodeCache(tmp_path / "cache")
    repo = cache.from_bundle(sha, lambda: bundle_commit(root, sha))
    top = cache.checkout(repo, sha, b"")
    for _ in range(5):  # git's status rewrites a fresh checkout's index (a time or two): it too must be older
        time.sleep(0.3)  # its files older than the racy window
        assert cache.change(top, sha) == (b"", True)  # git said so; then its snapshot is kept
        if top in cache.clean:
            break
    assert top in cache.clean
    cache.release(repo, top, sha)
    return cache, repo, sha


def again(cache, repo, sha):
    """The next attempt's checkout: the kept one, clean at `sha` (no git)."""
    top = cache.kept(repo, sha, b"")
    assert top is not None
    return top


def test_a_kept_checkout_whose_files_are_as_they_were_is_clean_without_git(checkout):
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    before = bundle.git_calls
    assert cache.change(top, sha) == (b"", True)
    assert bundle.git_calls == before


def test_a_file_rewritten_with_its_size_and_mtime_kept_is_a_change(checkout):
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    path = top / "src" / "a.txt"
    st = path.stat()
    path.write_text("bbbb\n")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: its ctime moved
    change, clean = cache.change(top, sha)
    assert not clean and b"+bbbb" in change


@pytest.mark.parametrize("edit", ["new file", "new ignored file", "removed", "mode"])
def test_every_kind_of_edit_is_seen(checkout, edit):
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    if edit == "new file":
        (top / "src" / "new.txt").write_text("n\n")
    elif edit == "new ignored file":
        (top / ".harness").mkdir()
        (top / ".harness" / "x").write_text("x")
    elif edit == "removed":
        (top / "README.md").unlink()
    else:
        (top / "src" / "a.txt").chmod(0o755)
    change, clean = cache.change(top, sha)
    assert not clean
    assert bool(change) == (edit != "new ignored file")  # an ignored file is no change, but the checkout is reset


def test_an_agent_that_commits_its_work_brings_it_back(checkout):
    """The checkout's HEAD moved: git status sees nothing against it, the change against the base is the commit's."""
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    (top / "src" / "a.txt").write_text("committed\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.com"}
    subprocess.run(["git", "commit", "-qam", "mine"], cwd=top, check=True, env=env)
    change, clean = cache.change(top, sha)
    assert not clean and b"+committed" in change
    # and without a snapshot to go by: git alone says so too
    change, clean = change_of(top, sha)
    assert not clean and b"+committed" in change
    cache.release(repo, top, None)
    top = cache.checkout(repo, sha, b"")  # reset to the base for the next attempt
    assert (top / "src" / "a.txt").read_text() == "aaaa\n"


def test_a_checkout_just_written_has_no_snapshot(tmp_path):
    (tmp_path / "f").write_text("x")
    assert snapshot(tmp_path) is None  # changed within the racy window: git is asked


def test_a_checkout_with_more_files_than_the_limit_has_no_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "RACY_NS", 0)
    monkeypatch.setattr(bundle, "SNAPSHOT_LIMIT", 3)
    for i in range(3):
        (tmp_path / f"f{i}").write_text("x")
    assert snapshot(tmp_path) is not None
    (tmp_path / "f3").write_text("x")
    assert snapshot(tmp_path) is None


def test_a_job_the_standard_pickler_cannot_take_travels_by_cloudpickle():
    """run_packed's payloads: pickled in C when they can be, else by cloudpickle (a lambda);
    the worker reads either with pickle.loads."""
    import pickle

    from harnessc.runtime.executor.remote import pack

    plain = {"base": "0" * 40, "change": b"\x00diff", "n": 1}
    assert pickle.loads(pack(plain)) == plain
    odd = pickle.loads(pack({"f": lambda x: x + 1}))
    assert odd["f"](1) == 2


def test_a_filter_an_agent_configures_in_its_kept_checkout_never_runs_in_harnessc_s_git(checkout, tmp_path):
    """The agent of the last attempt wrote a clean/smudge filter, an fsmonitor and a hook into
    its checkout's own .git/config: the worker's git (the change it brings back, the reset
    for the next attempt) runs none of them, and the change is still found."""
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    mark = tmp_path / "MARK"
    for key, value in (("filter.evil.clean", f"sh -c 'touch {mark}; cat'"),
                       ("filter.evil.smudge", f"sh -c 'touch {mark}; cat'"),
                       ("core.fsmonitor", f"sh -c 'touch {mark}'"), ("core.hooksPath", str(tmp_path))):
        subprocess.run(["git", "config", key, value], cwd=top, check=True)
    (tmp_path / "post-checkout").write_text(f"#!/bin/sh\ntouch {mark}\n")
    (tmp_path / "post-checkout").chmod(0o755)
    (top / ".gitattributes").write_text("* filter=evil\n")
    (top / "src" / "a.txt").write_text("changed by the agent\n")
    change, clean = cache.change(top, sha)
    assert not clean and b"changed by the agent" in change
    cache.release(repo, top, None)
    again_top = cache.checkout(repo, sha, change)  # reset to sha, the change applied: no filter, no hook
    assert (again_top / "src" / "a.txt").read_text() == "changed by the agent\n"
    assert not mark.exists()


@pytest.mark.parametrize("planted", ["hook", "config", "exclude", "alternates"])
def test_what_an_agent_plants_in_its_checkouts_git_never_reaches_the_next_agent(checkout, tmp_path, planted):
    """A kept checkout is handed to the next attempt of the worker: an agent that planted a
    hook (run by the next agent's own `git commit`), a setting, an exclude or an alternate in
    its checkout's .git leaves a checkout that is dropped, and the next attempt gets a fresh one."""
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    mark = tmp_path / "MARK"
    git_dir = top / ".git"
    if planted == "hook":
        hook = git_dir / "hooks" / "pre-commit"
        hook.write_text(f"#!/bin/sh\ntouch {mark}\n")
        hook.chmod(0o755)
    elif planted == "config":
        subprocess.run(["git", "config", "core.hooksPath", str(tmp_path)], cwd=top, check=True)
        (tmp_path / "pre-commit").write_text(f"#!/bin/sh\ntouch {mark}\n")
        (tmp_path / "pre-commit").chmod(0o755)
    elif planted == "exclude":
        (git_dir / "info" / "exclude").write_text("src/\n")
    else:
        (git_dir / "objects" / "info" / "alternates").write_text(str(tmp_path / "elsewhere") + "\n")
    nested = top / "sub"
    nested.mkdir()
    subprocess.run(["git", "init", "-q", str(nested)], check=True)  # a repository of its own inside
    cache.release(repo, top, sha)  # its files as they were: kept as clean at sha
    assert cache.kept(repo, sha, b"") is None  # not handed on: dropped
    assert not top.exists()
    nxt = cache.checkout(repo, sha, b"")
    assert nxt != top and not (nxt / "sub").exists()
    assert bundle.git_state(nxt) == cache.made[nxt]
    # the next agent commits in its checkout: nothing planted runs
    (nxt / "src" / "b.txt").write_text("b\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@a"}
    subprocess.run(["git", "add", "-A"], cwd=nxt, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "work"], cwd=nxt, check=True, env=env)
    assert not mark.exists()
    assert "src/b.txt" in subprocess.run(["git", "show", "--stat", "HEAD"], cwd=nxt, check=True,
                                         capture_output=True, text=True, env=env).stdout


def test_a_kept_checkout_an_agent_left_alone_is_still_handed_on(checkout):
    cache, repo, sha = checkout
    top = again(cache, repo, sha)
    cache.release(repo, top, sha)
    assert cache.kept(repo, sha, b"") == top
