"""harnessc's sandbox for command and CLI agents (`sandbox: true`): bubblewrap, Linux only.

An agent's process runs under `bwrap` with the whole file system bound read-only, then
writable again only where its work goes:

- its checkout: the attempt's worktree (isolation: worktree), or the project directory in a
  shared tree, with the project's `.harness/` read-only inside it;
- a private TMPDIR of its own (a directory made per call and removed after it; not a tmpfs
  over /tmp, so the paths in its `command:`, its prompt file and the project stay readable);
- of the repository's git directory only `objects/` (not `objects/info/`, where alternates
  would be) and, for an attempt, the worktree's own admin directory
  (`<common>/worktrees/<name>/`: its HEAD, index and reflog; not its `commondir` and
  `gitdir`). Everything else there - config, hooks, refs, packed-refs, info/, the other
  worktrees - is read-only,
  so a `git commit` inside an attempt's worktree works (detached HEAD) and one in a shared
  tree fails (the index lock lives in the common directory). The attempt's ref
  (refs/harnessc/...) is written by harnessc after the call, never by the agent.

Also: a new PID namespace (the agent sees and signals only its own processes), every
capability dropped (root in a container cannot remount the read-only binds writable), a
fresh /dev and /proc, and `--die-with-parent`. The network is left as it is: CLI agents
need their APIs. No `--new-session`: harnessc already starts each call in a process group
of its own, and keeping bwrap's child in it is what lets the timeout's killpg reach the
agent; the child has no controlling terminal, so the TIOCSTI escape `--new-session` guards
against has no terminal to push into.

Where the namespaces cannot be made (no bubblewrap, or a container or kernel that forbids
user namespaces) an agent that asks for the sandbox is refused before any call: never run
without it (`problem()`, read by the pre-flight, `doctor` and the agent itself).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`)"
# What every sandboxed call gets (and the probe tries): the namespaces, a fresh /dev and /proc,
# no capabilities, and an end with harnessc.
# `--as-pid-1`: the agent is its namespace's first process and bwrap waits for it itself. With
# bwrap's own init in between, bwrap reported the exit while that init was still ending, so
# every call's end found the group not yet empty and swept /proc for it (13 ms a call, see
# bench/sandbox.py). As pid 1 the agent ignores signals it has no handler for when they come
# from inside its namespace; harnessc's SIGKILL, and bwrap's end, still end it and all of it.
BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--as-pid-1",
        "--die-with-parent", "--cap-drop", "ALL")
WORKTREES = Path(".harness") / "worktrees"  # where attempts' worktrees live (worktree/worktrees.py)


def bwrap_path() -> str | None:
    """The bwrap harnessc would start, from its own PATH (not the agent's)."""
    return shutil.which("bwrap")


def problem() -> str | None:
    """Why no agent can be sandboxed here, or None when bubblewrap works."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})"
    path = bwrap_path()
    if path is None:
        return "the sandbox needs bubblewrap and no `bwrap` is on PATH"
    return _probe(path)


@functools.cache
def _probe(path: str) -> str | None:
    """Whether `path` can make the sandbox's namespaces here: `bwrap <BASE> true`, once per process."""
    try:
        done = subprocess.run([path, *BASE, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bubblewrap ({path}) could not be started: {e}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return (f"bubblewrap ({path}) cannot create its namespaces here"
            + (f": {said[-1][:200]}" if said else f" (exit {done.returncode})")
            + " (a container may forbid user namespaces)")


@dataclass(frozen=True)
class Layout:
    """What one call may write: `writable` on top of the read-only root, then `read_only`
    again inside them, then `git_writable`, then `git_read_only` inside those (each a path
    that exists)."""

    checkout: Path
    writable: tuple[Path, ...]
    read_only: tuple[Path, ...] = ()
    git_writable: tuple[Path, ...] = ()
    git_read_only: tuple[Path, ...] = ()

    def argv(self, bwrap: str, argv: list[str], tmpdir: Path, cwd: Path) -> list[str]:
        """`argv` as bwrap runs it in this layout, with `tmpdir` writable and `cwd` its directory."""
        out = [bwrap, *BASE]
        for flag, paths in (("--bind", self.writable), ("--ro-bind", self.read_only),
                            ("--bind", self.git_writable), ("--ro-bind", self.git_read_only)):
            for path in paths:
                out += [flag, str(path), str(path)]
        out += ["--bind", str(tmpdir), str(tmpdir), "--chdir", str(cwd), "--", *argv]
        return out


def _git_parts(common: Path | None, admin: Path | None) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The git paths a call may write (objects/, the worktree's admin directory) and those kept
    read-only inside them: objects/info/ (alternates: objects read from elsewhere) and the
    admin directory's `commondir` and `gitdir` (where that worktree's git directory is; a
    mounted file cannot be renamed over)."""
    if common is None:
        return (), ()
    writable = [common / "objects"] + ([admin] if admin is not None else [])
    kept = [common / "objects" / "info"] + ([admin / "commondir", admin / "gitdir"] if admin is not None else [])
    writable = [p for p in writable if p.is_dir()]
    return tuple(writable), tuple(p for p in kept if p.exists() and any(p.is_relative_to(w) for w in writable))


def layout(root: Path, workdir: Path | None) -> Layout:
    """The layout of a call of project `root`'s agent working in `workdir` (None: the project).

    Read from what harnessc made, not from the checkout: an attempt's worktree is the
    directory two levels under `.harness/worktrees/`, its admin directory the one whose
    `gitdir` names that worktree (looked up once, before its first call: an agent that
    rewrote it later changes nothing)."""
    root = root.resolve()
    common = _common_dir(root)
    work = (workdir or root).resolve()
    harness = root / ".harness"
    try:
        rel = work.relative_to(root / WORKTREES)
    except ValueError:
        rel = None
    if rel is not None and len(rel.parts) >= 2:  # an attempt's worktree
        top = root / WORKTREES / rel.parts[0] / rel.parts[1]
        admin = _admin_dir(common, top) if common else None
        return Layout(top, (top,), (), *_git_parts(common, admin))
    # a shared tree: the project, with harnessc's own directory and the git directory read-only
    inside = [p for p in (harness, common) if p is not None and p.exists() and p.is_relative_to(root)]
    return Layout(root, (root,), tuple(inside), *_git_parts(common, None))


@functools.cache
def _common_dir(root: Path) -> Path | None:
    """The repository's common git directory of the project at `root`, or None outside git."""
    try:
        done = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                              env={**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)})
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return Path(text).resolve() if done.returncode == 0 and text else None


_ADMIN: dict[tuple[Path, Path], Path | None] = {}  # (common dir, worktree) -> its admin directory


def _admin_dir(common: Path, top: Path) -> Path | None:
    """`common`/worktrees/<name>/ of the worktree at `top` (its `gitdir` file names `top`/.git)."""
    key = (common, top)
    if _ADMIN.get(key) is not None and not _names(_ADMIN[key], top):
        del _ADMIN[key]  # a reused checkout (worktree/pool.py) moved here: its directory is another one
    if key not in _ADMIN:
        found = []
        try:
            entries = list((common / "worktrees").iterdir())
        except OSError:
            entries = []
        for entry in entries:
            try:
                named = Path((entry / "gitdir").read_text("utf-8").strip())
            except (OSError, UnicodeDecodeError):
                continue
            if named.parent.resolve() == top and entry.is_dir() and not entry.is_symlink():
                found.append(entry)
        _ADMIN[key] = found[0] if len(found) == 1 else None  # two claim it: neither is trusted
    return _ADMIN[key]


def _names(admin: Path, top: Path) -> bool:
    """Whether worktree admin directory `admin` still names the worktree at `top`."""
    try:
        return Path((admin / "gitdir").read_text("utf-8").strip()).parent.resolve() == top
    except (OSError, UnicodeDecodeError):
        return False


class Call:
    """One sandboxed call: its private TMPDIR, made on entry and removed on exit."""

    def __init__(self, root: Path, workdir: Path | None):
        self.root, self.workdir = root, workdir
        self.tmpdir: Path | None = None

    def __enter__(self) -> "Call":
        self.tmpdir = Path(tempfile.mkdtemp(prefix="harnessc-sandbox-")).resolve()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def wrap(self, argv: list[str], env: dict[str, str], extra_writable: tuple[Path, ...] = (),
             read_only: bool = False) -> list[str]:
        """`argv` under bwrap in this call's layout; `env` gets the private TMPDIR. `extra_writable`:
        directories it may write too (a CLI's state); `read_only`: not even its checkout."""
        assert self.tmpdir is not None
        bwrap = bwrap_path() or "bwrap"  # gone since it was checked: procs says "command not found"
        plan = layout(self.root, self.workdir)
        if read_only:
            plan = Layout(plan.checkout, ())
        if extra_writable:
            plan = dataclasses.replace(plan, writable=plan.writable + tuple(p for p in extra_writable if p.is_dir()))
        env["TMPDIR"] = str(self.tmpdir)
        cwd = (self.workdir or self.root).resolve()
        return plan.argv(bwrap, argv, self.tmpdir, cwd)
