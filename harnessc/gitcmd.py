"""Every git process harnessc starts: its argv, its environment, and how it is run.

An agent can write to `.git/` (hooks, config) and to the working tree (`.gitattributes`),
and git runs what those name: hooks, `core.fsmonitor`, filter drivers, gpg for a signed
commit. A git process harnessc starts for a snapshot or a commit must not run that code
with harnessc's environment (API keys included). So every git process gets

* the child base environment only (childenv.child_env, what an agent without `pass_env:`
  gets), plus the committer's identity variables when set;
* `-c` settings, which win over every config file (includes too), turning off what a
  snapshot or a commit could run: hooks (`core.hooksPath=/dev/null`), `core.fsmonitor`,
  `diff.external`, gpg signing, credential helpers, the pager and editor, ssh, auto gc and
  submodule recursion;
* every filter, diff and merge driver the configuration names blanked (`filter.<name>.clean
  / smudge / process`, `diff.<name>.command / textconv`, `merge.<name>.driver`; in the
  repository's config or any file an include or includeIf reaches), read with `git config`
  before the first command (again whenever a config file changed) and passed as
  GIT_CONFIG_KEY_<n>/GIT_CONFIG_VALUE_<n> (a driver's name may hold `=`, which `-c` cannot
  say; git >= 2.31 reads them).

`git_hooks: true` (harness.yaml) keeps the repository's hooks for harnessc's commits; they
run with the same restricted environment. Snapshots never run hooks.

Where: a Git made with `git_dir` (every one a run makes: `locate` finds the repository once,
at the start, before any agent ran) names its repository and work tree (GIT_DIR,
GIT_WORK_TREE; GIT_CEILING_DIRECTORIES too) and never walks up from a directory an agent can
change: an attempt's checkout whose `.git` file was deleted or rewritten cannot send
harnessc's `git add` or `commit` into the user's repository. An explicit work tree wins over
`core.worktree`. What configuration: the repository's own only (GIT_CONFIG_NOSYSTEM,
GIT_CONFIG_GLOBAL=/dev/null), with replace refs ignored (GIT_NO_REPLACE_OBJECTS); the
identity a commit is made as is read once (`identity`, from the user's usual configuration,
global included) and passed on as GIT_AUTHOR_*/GIT_COMMITTER_*. harnessc runs git's
built-in commands only, never an alias (`alias.*` can name no built-in), so `-c` inside an
alias never applies.

Processes run in harnessc's session (reaper.py leaves them to us) but their own process
group, killed on timeout. No preexec step (PR_SET_PDEATHSIG): it would double the cost of
every start (fork instead of vfork), and a git outlives a killed harnessc by at most its
own work (cat-file ends when its stdin closes).
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import childenv

GIT_TIMEOUT = 30.0  # seconds for one git command
# What git takes from harnessc's environment besides the base list: who commits.
IDENTITY_ENV = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")
# No configuration git would find by itself beyond the repository's; no object replaced.
CONFINED = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
NO_HOOKS = ("core.hooksPath=/dev/null",)  # a path under /dev/null is no file: no hook is found
NEUTRAL = (
    "core.fsmonitor=false", "core.pager=cat", "core.editor=:", "sequence.editor=:",
    "core.sshCommand=ssh", "core.askPass=", "credential.helper=", "diff.external=",
    "commit.gpgSign=false", "tag.gpgSign=false", "gc.auto=0", "maintenance.auto=false",
    "submodule.recurse=false", "diff.ignoreSubmodules=all",
    # signatures: never shown (log.showSignature runs gpg), and no program to verify or sign with
    "log.showSignature=false", "gpg.program=", "gpg.openpgp.program=", "gpg.x509.program=",
    "gpg.ssh.program=", "gpg.ssh.defaultKeyCommand=", "core.alternateRefsCommand=",
)
# The drivers a configuration may name, and the keys of each that run a command.
DRIVERS = {"filter": ("clean", "smudge", "process"), "diff": ("command", "textconv"), "merge": ("driver",)}


class GitFailed(Exception):
    """A git command that exited non-zero, timed out or could not start."""

    def __init__(self, command: str, returncode: int | None, stderr: str):
        self.command, self.returncode, self.stderr = command, returncode, stderr
        what = "failed" if returncode is None else f"exited with {returncode}"
        super().__init__(f"git {command} {what}: {stderr.strip()[:400]}")


class Git:
    """git in one working tree (`cwd`), the safe way (see the module docstring). git_dir:
    the repository's git directory (absolute), named to every process with `cwd` as its
    work tree; None only to find it (`locate`). ident: GIT_AUTHOR_*/GIT_COMMITTER_* values
    (`identity`)."""

    def __init__(self, cwd: Path, hooks: bool = False, git_dir: Path | None = None,
                 ident: dict[str, str] | None = None):
        self.cwd, self.hooks = Path(cwd), hooks
        self.git_dir = Path(git_dir) if git_dir is not None else None
        self.where = dict(CONFINED)
        if self.git_dir is not None:
            self.where.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.cwd),
                              GIT_CEILING_DIRECTORIES=str(self.cwd.parent))
        self.ident = dict(ident or {})
        self._watched: set[str] | None = None  # the config files git reads (or would, were they there)
        self._stamp: tuple | None = None  # their stat data when _blanks was read
        self._blanks: list[tuple[str, str]] = []

    def argv(self, *args: str) -> list[str]:
        settings = NEUTRAL if self.hooks else NO_HOOKS + NEUTRAL
        return ["git", "--no-pager", *(x for s in settings for x in ("-c", s)), *args]

    def env(self, extra: dict[str, str] | None = None, drivers: bool = False) -> dict[str, str]:
        env = childenv.child_env(IDENTITY_ENV, {**self.where, **(extra or {})})
        for key, value in self.ident.items():
            env.setdefault(key, value)  # harnessc's own GIT_AUTHOR_* (when set) win, as in git
        if drivers:
            blanks = self.driver_blanks()
            env["GIT_CONFIG_COUNT"] = str(len(blanks))
            for i, (key, value) in enumerate(blanks):
                env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        return env

    def driver_blanks(self) -> list[tuple[str, str]]:
        """(key, value) pairs that turn off every driver the configuration names now.

        Read with `git config --list` when a configuration file changed since the last
        read: the files git reads config from (system, global, the repository's, and every
        file an include names, there or not yet) are stat'ed before each command, so a
        snapshot pays no process for it while nobody touches the configuration."""
        if self._watched is None:
            self._watched = self._candidates()
        stamp = _stamp(self._watched)
        if stamp == self._stamp:
            return self._blanks
        out = self._run(("config", "-z", "--list", "--show-origin"), self.env(), GIT_TIMEOUT, ok=(0, 1))
        fields = out.split(b"\0")
        names: set[tuple[str, str]] = set()
        files: set[str] = set()
        for origin, entry in zip(fields[0::2], fields[1::2]):
            key, _, value = entry.decode("utf-8", "surrogateescape").partition("\n")
            where = origin.decode("utf-8", "surrogateescape")
            if where.startswith("file:"):
                files.add(str(self.cwd / where[5:]))
            section, _, rest = key.partition(".")
            name, _, leaf = rest.rpartition(".")
            if section in DRIVERS and name:
                names.add((section, name))
            elif section in ("include", "includeif") and leaf == "path" and value:
                base = Path(where[5:]).parent if where.startswith("file:") else Path()
                files.add(str(self.cwd / base / os.path.expanduser(value)))
        self._blanks = [(f"{section}.{name}.{key}", "") for section, name in sorted(names)
                        for key in DRIVERS[section]]
        self._blanks += [(f"filter.{name}.required", "false") for section, name in sorted(names) if section == "filter"]
        # kept only when every file read was watched before the read (else read again next time)
        self._stamp = stamp if files <= self._watched else None
        self._watched |= files
        return self._blanks

    def _candidates(self) -> set[str]:
        """The configuration files git may read here, whether they exist now or not (the
        repository's only: no system or global file is read)."""
        if self.git_dir is not None:
            git_dir = self.git_dir
        else:
            out = self._run(("rev-parse", "--absolute-git-dir"), self.env(), GIT_TIMEOUT)
            git_dir = Path(out.decode("utf-8", "surrogateescape").strip())
        dirs = {git_dir, common_dir(git_dir)}
        return {str(d / name) for d in dirs for name in ("config", "config.worktree")}

    def run(self, *args: str, env: dict[str, str] | None = None, worktree: bool = True,
            timeout: float = GIT_TIMEOUT, ok: tuple[int, ...] = (0,), stdin: bytes | None = None) -> str:
        """The command's stdout (text); raises GitFailed (on an exit code not in `ok`).
        worktree: the command may read the working tree's files. Every command gets the
        drivers blanked all the same (a stat of the config files while they stay as they
        were): one that reads no file by name still runs a filter now and then (`diff
        --cached` on an index entry it must check against its file). `stdin`: bytes for the
        command's standard input (else it has none)."""
        out = self._run(args, self.env(env, drivers=True), timeout, ok, stdin)
        return out.decode("utf-8", "surrogateescape")

    def _run(self, args: tuple[str, ...], env: dict[str, str], timeout: float, ok: tuple[int, ...] = (0,),
             stdin: bytes | None = None) -> bytes:
        try:
            proc = subprocess.Popen(self.argv(*args), cwd=self.cwd, env=env,
                                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)
        except OSError as e:
            raise GitFailed(args[0], None, f"could not start git: {e.strerror or e}") from None
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise GitFailed(args[0], None, f"no answer in {timeout:g}s (killed)") from None
        if proc.returncode not in ok:
            raise GitFailed(args[0], proc.returncode, err.decode("utf-8", "replace"))
        return out

    def objects(self) -> "CatFile":
        return CatFile(self)


@dataclass(frozen=True)
class Place:
    """Where a repository is, found once: its git directory, common directory (where refs,
    objects and the shared config are), work tree and the project's place in it."""

    git_dir: Path
    common: Path
    top: Path
    prefix: str  # '' or 'sub/dir/'


def locate(path: Path) -> Place:
    """The repository holding `path` (git's own discovery, once, before any agent runs:
    every later git process names what this found); GitFailed outside a work tree."""
    git = Git(path)
    # the user's global config may hold safe.directory, which discovery needs (nothing else is read)
    env = {k: v for k, v in git.env().items() if k not in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")}
    out = git._run(("rev-parse", "--absolute-git-dir", "--show-toplevel", "--show-prefix"), env, GIT_TIMEOUT)
    git_dir, top, prefix = (out.decode("utf-8", "surrogateescape").split("\n") + ["", "", ""])[:3]
    if not top:
        raise GitFailed("rev-parse", 128, f"{path} is not in a git work tree")
    return Place(Path(git_dir), common_dir(Path(git_dir)), Path(top), prefix)


def common_dir(git_dir: Path) -> Path:
    """A linked worktree's git directory names the common one in its `commondir` file."""
    try:
        rel = (git_dir / "commondir").read_text().strip()
    except OSError:
        return git_dir
    return Path(os.path.normpath(git_dir / rel)) if rel else git_dir


_IDENTITY: dict[str, dict[str, str]] = {}
_IDENTITY_KEYS = {"user.name": ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"),
                  "user.email": ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"),
                  "author.name": ("GIT_AUTHOR_NAME",), "author.email": ("GIT_AUTHOR_EMAIL",),
                  "committer.name": ("GIT_COMMITTER_NAME",), "committer.email": ("GIT_COMMITTER_EMAIL",)}


def identity(git_dir: Path) -> dict[str, str]:
    """Whom harnessc commits as in this repository: GIT_AUTHOR_*/GIT_COMMITTER_* from the
    user's usual configuration (system, global and the repository's), read once per
    process in a git process of its own - the only one that reads a global file. {} when
    none is configured: git then makes one up as it always does, or says who to set."""
    key = str(common_dir(Path(git_dir)))
    if key not in _IDENTITY:
        env = childenv.child_env(("XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"),
                                 {"GIT_DIR": str(git_dir), "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
        try:
            res = subprocess.run(["git", "config", "-z", "--get-regexp", r"^(user|author|committer)\.(name|email)$"],
                                 env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=GIT_TIMEOUT)
            out = res.stdout.decode("utf-8", "surrogateescape") if res.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        found: dict[str, str] = {}
        for entry in out.split("\0"):
            name, _, value = entry.partition("\n")
            if name.lower() in _IDENTITY_KEYS and value:
                found[name.lower()] = value  # the last one wins, as in git
        ident: dict[str, str] = {}
        for name in ("user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email"):
            for var in _IDENTITY_KEYS[name] if name in found else ():
                ident[var] = found[name]
        _IDENTITY[key] = ident
    return dict(_IDENTITY[key])


class CatFile:
    """One persistent `git cat-file --batch`: an object's bytes by its id, without a process each."""

    def __init__(self, git: Git):
        self.git = git
        self.proc: subprocess.Popen | None = None

    def read(self, sha: str) -> bytes:
        """The object's content; raises KeyError when it is missing, GitFailed when git failed."""
        if self.proc is None or self.proc.poll() is not None:
            argv = self.git.argv("cat-file", "--batch")
            self.proc = subprocess.Popen(argv, cwd=self.git.cwd, env=self.git.env(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, process_group=0)
        assert self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(sha.encode("ascii") + b"\n")
            self.proc.stdin.flush()
            header = self.proc.stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                raise KeyError(sha)
            if len(header) != 3:
                raise OSError(f"cat-file said {b' '.join(header)[:100]!r}")
            data = self.proc.stdout.read(int(header[2]))
            self.proc.stdout.read(1)  # the newline after the content
        except (OSError, ValueError, UnicodeEncodeError) as e:
            self.close()
            raise GitFailed("cat-file", None, str(e)) from None
        return data

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            _kill_group(proc)
            proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stamp(paths: set[str]) -> tuple:
    """The stat data of these files (None for one that is not there): a write changes it."""
    out = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
            out.append((path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:
            out.append((path, None))
    return tuple(out)
