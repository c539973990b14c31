"""Lint for isolated tasks (`isolation: worktree`, several `approaches`, or every task with
`executor: ray`): what `run` would refuse, and the files a worktree will not have.

* HC417 (error): the repository cannot hold worktrees - not a repository, no commit, a
  detached HEAD, a bare one, submodules, LFS - with what to do (gitrepo.py's
  checks, the ones `run` makes);
* HC418 (warning): a context path, or a file an accept or score command names, is untracked
  or modified in your tree: a worktree holds committed files only, so the agent and the
  checks would not see it (unless harness.yaml `worktrees:` links or copies it in);
* HC456 (warning): the same for a command agent's program or script (`command: [python,
  agent.py]`): every call of an isolated task would fail.

Nothing here runs, and no git process starts, unless some task works in a worktree: lint
stays fast for everyone else. git runs through gitcmd.py (never gitpython).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..argv import split_command
from ..diagnostics import Span
from .project import Project
from .tasks import approaches_of

PATHS_PER_CALL = 500  # paths per `git status` (argv length)


def isolated_tasks(project: Project) -> list:
    """The tasks (not done) that will work in a worktree, as the plan decides it - all of
    them with `executor: ray` (a worker's checkout is the task's worktree)."""
    if project.executor_kind == "ray":
        return [task for task in project.tasks if not task.done]
    if project.config_unreadable:
        default_mode, default_n = None, 1
    else:
        default_mode = getattr(project.config.defaults.isolation, "value", project.config.defaults.isolation)
        default_n = project.config.defaults.approaches
    out = []
    for task in project.tasks:
        mode = getattr(task.isolation, "value", task.isolation) or default_mode
        several = approaches_of(task, default_n) > 1 or task.score is not None  # they imply worktrees
        if not task.done and (mode == "worktree" or (several and task.isolation is None)):
            out.append(task)
    return out


def _where(task) -> Span:
    spans = task.spans
    return spans.get("isolation") or spans.get("approaches") or task.span


def check_worktree_repository(project: Project) -> None:
    tasks = isolated_tasks(project)
    if not tasks:
        return
    from ..gitrepo import IsolationError, open_repo

    try:
        repo = open_repo(project.root)
    except IsolationError as e:
        message = e.message.replace(str(project.root), "the project")
        if project.executor_kind == "ray":  # every task: say why, where the executor is set
            project.diags.error("HC417", message.replace("isolation: worktree", "executor: ray"),
                                project.config_marks.key(("executor",)),
                                e.hint.replace("set isolation: none", "use executor: local"))
            return
        named = ", ".join(t.id for t in tasks[:3]) + (", ..." if len(tasks) > 3 else "")
        project.diags.error("HC417", f"{message} (isolated: {named})", _where(tasks[0]), e.hint)
        return
    _check_uncommitted(project, tasks, repo)


def _named_files(project: Project, task) -> list[tuple[str, str, Span]]:
    """(path, what names it, where) for the task's context files and the existing files its
    accept and score commands name."""
    out = [(f, "context file", task.spans.get("context", task.span)) for f in project.context_files.get(task.id, [])]
    commands = [("accept", i, c) for i, c in enumerate(task.accept)]
    if task.score:
        commands.append(("score", 0, task.score))
    for key, i, cmd in commands:
        try:
            argv = split_command(cmd)
        except ValueError:
            continue  # reported by check_accept_commands
        spans = task.value_spans.get(key) or []
        where = spans[i] if i < len(spans) else task.spans.get(key, task.span)
        out += [(word, f"{key} command's file", where) for word in program_files(argv, project.root)]
    return out


def program_files(argv: list[str], root: Path, first: bool = True) -> list[str]:
    """The words of `argv` naming a file of the project by a relative path (its program
    too with `first`, when it is a path: `./agent.sh`; a bare name is looked up on PATH)."""
    words = argv if first and argv and "/" in argv[0] else argv[1:]
    return [os.path.normpath(w) for w in words if not w.startswith("-") and "/" not in w[:1]
            and ".." not in w.split("/") and (root / w).is_file()]


def uncommitted(repo, paths: list[str]) -> dict[str, str] | None:
    """Which of `paths` (project-relative) are untracked or ignored ("untracked") or differ
    from the commit ("modified") in `repo` (gitrepo.py's Repo); None when git
    could not say."""
    from .. import gitcmd

    git, prefix = repo.git(), repo.prefix  # git runs at the repository's top
    status: dict[str, str] = {}
    try:
        for i in range(0, len(paths), PATHS_PER_CALL):
            out = git.run("status", "--porcelain", "-z", "--untracked-files=all", "--ignored=matching",
                          "--", *(prefix + p for p in paths[i:i + PATHS_PER_CALL]),
                          env={"GIT_LITERAL_PATHSPECS": "1"})
            for entry in out.split("\0"):
                if len(entry) > 3:
                    status[entry[3:]] = entry[:2]
    except gitcmd.GitFailed:
        return None
    return {p: "untracked" if status[prefix + p] in ("??", "!!") else "modified"
            for p in paths if prefix + p in status}


def _check_uncommitted(project: Project, tasks: list, repo) -> None:
    brought = set()
    if not project.config_unreadable:  # harness.yaml `worktrees:` brings these in
        wt = project.config.worktrees
        copies = getattr(wt, "copy_paths", None)  # the model's name; the lint view's is `copy`
        brought = {p.rstrip("/") for p in [*wt.link, *(wt.copy if copies is None else copies)]}
    named = [(p, what, where, t.id) for t in tasks for p, what, where in _named_files(project, t)]
    named += _agent_files(project)
    named = [n for n in named if not any(n[0] == b or n[0].startswith(b + "/") for b in brought)]
    if not named:
        return
    status = uncommitted(repo, sorted({p for p, *_ in named}))
    if status is None:
        return  # git could not say: run will
    seen = set()
    for path, what, where, owner in named:
        kind = status.get(path)
        if kind is None or (owner, path) in seen:
            continue
        seen.add((owner, path))
        hint = (f"commit it (`git add {path} && git commit`), or bring it into every worktree with "
                f"harness.yaml `worktrees: {{link: [{path}]}}`")
        if what == "agent":
            project.diags.warning(
                "HC456", f"command agent '{owner}' runs '{path}', which is {kind}: an isolated task's worktree "
                         + ("will not have it, and every call there fails" if kind == "untracked"
                            else "has the committed version"), where, hint)
            continue
        project.diags.warning(
            "HC418", f"{what} '{path}' of task '{owner}' is {kind}: its worktree will "
                     + ("not have it" if kind == "untracked" else "have the committed version"), where, hint)


def _agent_files(project: Project) -> list[tuple[str, str, Span, str]]:
    """(path, "agent", where, agent) for the project files the command agents' argv names."""
    if project.config_unreadable:
        return []
    out = []
    for name, config in project.config.agents.items():
        command = getattr(config, "command", None)
        if config.provider != "command" or not command:
            continue
        where = project.config_marks.key(("agents", name, "command"))
        out += [(p, "agent", where, name) for p in program_files(list(command), project.root)]
    return out
