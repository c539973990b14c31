"""Landing verified changes: the run's integration branch, merge and re-verify when it moved,
and the user's branch following by fast-forward only.

The integration branch `harnessc/run/<run-id>` starts at the commit the run started on
(a run that resumes one whose results the user's branch does not hold yet goes on on that
run's branch). One landing at a time: a change whose base is the branch's tip lands as it
is; otherwise `git merge-tree` merges it (no working tree involved), the merged commit is
checked out in the task's worktree and its checks run again there, and only a clean merge
that passes lands. Every landing moves the branch with a compare-and-swap `update-ref`.

The user's branch follows only through `git merge --ff-only` in the user's tree, when HEAD
is still that branch, still at the commit harnessc last set, and no landed path is there as
an untracked, ignored or modified file. Once that is not so, it stops following for the
run; the run's end says `git merge harnessc/run/<id>`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import gitcmd
from ...gitrepo import Repo
from .commitmsg import headline, message_bytes

BRANCH_PREFIX = "refs/heads/harnessc/run/"
INTEGRATION_KEY = "isolation.integration"  # state.db meta: the integration branch's record
LANDING_KEY = "isolation.landing."  # + task id: its landing (pending, then landed)
TASK_TRAILER = "Harnessc-Task"
RUN_TRAILER = "Harnessc-Run"
PATH_CHUNK = 500  # paths per git command (argv length)
_OBJECT_ID = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?\n?")  # a loose ref's content: SHA-1 or SHA-256


@dataclass
class Landed:
    sha: str  # the integration branch's new tip (the task's landed commit)
    merged: bool  # the branch had moved: the change was merged and checked again
    paths: list[str]


@dataclass
class Conflict:
    paths: list[str]
    why: str  # "merge" (the change does not merge) or "checks" (they fail on the merged tree)
    tip: str  # the integration tip it conflicted with
    errors: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)  # the commits on the branch since its base (subjects)


@dataclass
class Integration:
    branch: str  # refs/heads/harnessc/run/<id>
    start: str  # where it started (this run's tasks without dependencies start here)
    user_branch: str
    last_set: str  # the commit harnessc last set the user's branch to (or found it at)
    following: bool = True
    left_because: str = ""  # why the user's branch stopped following
    ended: bool = False  # the run that landed on it came to its end (a killed one did not)

    @property
    def name(self) -> str:
        return self.branch.removeprefix("refs/heads/")

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def message(task_id: str, title: str, verified: str, attempt: int, agent: str, run_id: str) -> str:
    """A landed commit's message: `harnessc: <id>: <title>` (a long title cut, whole in the
    body: commitmsg.py), the verification, and trailers a resumed run finds it by."""
    subject, whole = headline(f"harnessc: {task_id}: ", title)
    return (f"{subject}\n\n{whole}Verified: {verified}\nAttempt {attempt} on agent {agent}, "
            f"run {run_id}.\n\n{TASK_TRAILER}: {task_id}\n{RUN_TRAILER}: {run_id}\n")


class Landing:
    def __init__(self, repo: Repo, hooks: bool = False):
        self.repo = repo
        self.git = repo.git(hooks)  # the user's tree (its git directory named): its refs, its fast-forward
        self._common: Path | None = None  # the repository's common git directory, where its refs are

    # ------------------------------------------------------------------ the branch

    def open(self, run_id: str, saved: str | None) -> tuple[Integration, bool]:
        """(the integration branch for this run, whether it resumes an earlier run's): an
        earlier run's goes on when it still exists and that run was killed, or it holds
        results the user's branch does not."""
        old = _integration(saved)
        if old is not None:
            tip = self.tip(old.branch)
            if tip and (not old.ended or not self._contains(self.repo.head, tip)):
                old.ended = False
                if old.user_branch != self.repo.branch or not self._set_by_us(old, tip):
                    old.following = False
                    old.left_because = old.left_because or "your branch moved since the run it resumes"
                else:
                    old.last_set = self.repo.head  # a fast-forward the killed run made but did not record
                old.start = tip
                return old, True
        branch = BRANCH_PREFIX + run_id
        self.git.run("update-ref", branch, self.repo.head, "", worktree=False)
        return Integration(branch, self.repo.head, self.repo.branch, self.repo.head), False

    def _set_by_us(self, old: Integration, tip: str) -> bool:
        """The user's branch is where harnessc left it: at the commit it recorded, or further
        along the integration branch (a run killed between its fast-forward and its record)."""
        head = self.repo.head
        return head == old.last_set or (self._contains(head, old.last_set) and self._contains(tip, head))

    def tip(self, branch: str) -> str:
        """The commit `branch` (refs/heads/...) is at, or "" when there is no such branch. Read
        from its loose ref file when it has one (every landing reads the tip: a git process
        each cost the driver ~1.6 ms of CPU), else with git (a packed ref, a symbolic one,
        another ref storage)."""
        if self._common is None:
            self._common = self.repo.common or self.repo.toplevel / self.git.run(
                "rev-parse", "--git-common-dir", worktree=False).strip()
        return self.loose_tip(branch) or self.git.run("rev-parse", "-q", "--verify", branch + "^{commit}",
                                                      worktree=False, ok=(0, 1)).strip()

    def loose_tip(self, ref: str) -> str | None:
        """The object id in `ref`'s loose ref file, or None (no such file, not an object id;
        where the git directory is not known yet: `tip` finds it). A loose ref wins over
        packed-refs, and git replaces the file whole (a rename): no git process, no thread."""
        parts = ref.split("/")
        if parts[0] != "refs" or any(p in ("", ".", "..") or p.endswith(".lock") for p in parts):
            return None
        if self._common is None:
            return None
        try:
            with open(self._common.joinpath(*parts), "rb") as f:
                data = f.read(100)
        except OSError:  # none (packed, or reftable's refs/heads file), or not readable: git says
            return None
        return data.strip().decode("ascii") if _OBJECT_ID.fullmatch(data) else None

    def _contains(self, commit: str, maybe_ancestor: str) -> bool:
        base = self.git.run("merge-base", maybe_ancestor, commit, worktree=False, ok=(0, 1)).strip()
        return base == maybe_ancestor

    # ------------------------------------------------------------------ one landing

    def merge(self, tip: str, change: str, base: str) -> tuple[str | None, list[str]]:
        """Merge `change` (a commit on `base`) onto `tip`: (the merged commit, conflicting
        paths). The merged commit has `tip` as its only parent and the change's message."""
        out = self.git.run("merge-tree", "--write-tree", "--name-only", "--no-messages", tip, change, ok=(0, 1))
        lines = out.split("\n")
        tree, conflicted = lines[0].strip(), sorted({line for line in lines[1:] if line.strip()})
        if conflicted:
            return None, conflicted
        text = self.git.run("log", "-1", "--format=%B", change, worktree=False)
        sha = self.git.run("commit-tree", tree, "-p", tip, "-F", "-", worktree=False,  # stdin: a message can
                           stdin=message_bytes(text.rstrip("\n") + "\n")).strip()  # be longer than argv allows
        return sha, []

    def changed(self, old: str, new: str) -> list[str]:
        out = self.git.run("diff", "--name-only", "-z", "--no-renames", old, new, worktree=False)
        return sorted(p for p in out.split("\0") if p)

    def subjects(self, old: str, new: str) -> list[str]:
        out = self.git.run("log", "--format=%h %s", f"{old}..{new}", worktree=False)
        return [line for line in out.splitlines() if line]

    def advance(self, integration: Integration, new: str, old: str) -> bool:
        """Move the integration branch from `old` to `new`; False when it was not at `old`."""
        try:
            self.git.run("update-ref", integration.branch, new, old, worktree=False)
        except gitcmd.GitFailed:
            return False
        return True

    def landed_since(self, branch: str, since: str, task_id: str) -> str | None:
        """The commit on integration branch `branch` after `since` that lands `task_id`, if
        any (a landing that committed before a crash, found again)."""
        tip = self.tip(branch)
        if not tip:
            return None
        rng = f"{since}..{tip}" if since else tip
        out = self.git.run("log", "--format=%H%x00%(trailers:key=" + TASK_TRAILER + ",valueonly)%x01", rng,
                           worktree=False)
        for entry in out.split("\x01"):
            sha, _, who = entry.strip().partition("\0")
            if sha and who.strip() == task_id:
                return sha
        return None

    # ------------------------------------------------------------------ the user's branch

    def follow(self, integration: Integration, new: str) -> bool:
        """Fast-forward the user's branch to `new` when that is safe (see the module
        docstring); else stop following, saying why. True when it moved."""
        if not integration.following or new == integration.last_set:
            return False
        why = self._cannot_follow(integration, new)
        if why is None:
            try:
                self.git.run("merge", "--ff-only", "-q", "--no-edit", new, timeout=300)
            except gitcmd.GitFailed as e:
                why = f"git merge --ff-only failed: {e.stderr.strip()[:200]}"
        if why is not None:
            integration.following, integration.left_because = False, why
            return False
        integration.last_set = new
        return True

    def _cannot_follow(self, integration: Integration, new: str) -> str | None:
        head = self.git.run("symbolic-ref", "-q", "HEAD", worktree=False, ok=(0, 1)).strip()
        short = integration.user_branch.removeprefix("refs/heads/")
        if head != integration.user_branch:
            return f"HEAD is no longer {short}"
        if self.tip(integration.user_branch) != integration.last_set:
            return f"{short} moved since harnessc last set it"
        paths = self.changed(integration.last_set, new)
        in_the_way = []
        env = {"GIT_LITERAL_PATHSPECS": "1"}
        for i in range(0, len(paths), PATH_CHUNK):
            out = self.git.run("status", "--porcelain", "-z", "--ignored=matching", "--untracked-files=all",
                               "--", *paths[i:i + PATH_CHUNK], env=env)
            in_the_way += [e[3:] for e in out.split("\0") if len(e) > 3]
        if in_the_way:
            shown = ", ".join(sorted(in_the_way)[:5]) + (", ..." if len(in_the_way) > 5 else "")
            return f"a landed path is uncommitted in your tree ({shown})"
        return None


def _integration(saved: str | None) -> Integration | None:
    if not saved:
        return None
    try:
        data: dict[str, Any] = json.loads(saved)
        return Integration(**data)
    except (ValueError, TypeError):
        return None
