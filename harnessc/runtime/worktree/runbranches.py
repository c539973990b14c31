"""`harnessc clean`'s integration branches: a run that isolates tasks leaves
`harnessc/run/<id>` behind. `clean` deletes this project's (the runs its state records) once
the branch you are on holds them (as `git branch -d` would), `--branches` the rest too. Never
the branch a run in progress lands on, or one checked out in some worktree. A branch is
deleted only at the commit it was listed at (`update-ref -d <ref> <old>`): one moved since
stays."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ... import gitcmd
from ...gitrepo import find
from ...workspace import Workspace
from .landing import BRANCH_PREFIX, INTEGRATION_KEY


@dataclass
class Branches:
    removed: list[str] = field(default_factory=list)  # branch names (harnessc/run/<id>), or would be
    kept: list[str] = field(default_factory=list)  # not merged into your branch (without --branches)


def clean_branches(root: Path, everything: bool = False, dry_run: bool = False) -> Branches:
    """Delete (or, dry_run, list) this project's integration branches merged into HEAD, all
    of them with `everything`. Nothing outside a git repository or before any run."""
    from ..store.lock import holder
    from ..store.state import NoState, StateStore

    workspace = Workspace(root)
    try:
        store = StateStore(workspace, create=False)
    except NoState:
        return Branches()
    try:
        runs, last, record = set(store.run_starts()), store.last_run(), store.meta_get(INTEGRATION_KEY)
    finally:
        store.close()
    busy: set[str] = set()
    if holder(workspace):  # the run in progress: its own branch, or the earlier one it resumed
        busy.add(BRANCH_PREFIX + last["id"] if last else "")
        try:
            busy.add(json.loads(record or "{}").get("branch") or "")
        except (ValueError, AttributeError):
            pass
    try:
        git = find(Path(root)).git()  # the repository's git directory named, its config only
        listed = git.run("for-each-ref", "--format=%(objectname) %(refname)", BRANCH_PREFIX, worktree=False)
        merged = set(git.run("for-each-ref", "--merged=HEAD", "--format=%(refname)", BRANCH_PREFIX,
                             worktree=False).split())
        checked_out = {line[len("branch "):] for line in
                       git.run("worktree", "list", "--porcelain", worktree=False).splitlines()
                       if line.startswith("branch ")}
    except gitcmd.GitFailed:
        return Branches()  # not a repository, no commit: nothing of ours in git
    out = Branches()
    for line in listed.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.removeprefix(BRANCH_PREFIX) not in runs or ref in busy or ref in checked_out:
            continue  # another project's, or in use
        name = ref.removeprefix("refs/heads/")
        if ref not in merged and not everything:
            out.kept.append(name)
            continue
        if not dry_run:
            try:
                git.run("update-ref", "-d", ref, sha, worktree=False)
            except gitcmd.GitFailed:
                continue  # moved since it was listed: left as it is
        out.removed.append(name)
    return out
