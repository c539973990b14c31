"""Shared test helpers: golden files (HARNESSC_UPDATE_GOLDEN=1 rewrites them) and paths; and
a home directory of the suite's own, so a run leaves nothing in the user's."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harnessc import events

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"


def check_golden(path: Path, actual: str) -> None:
    """Compare `actual` with the golden file at `path`; rewrite it when updating."""
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden file {path} is missing; run with HARNESSC_UPDATE_GOLDEN=1 to create it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path} differs (HARNESSC_UPDATE_GOLDEN=1 to accept the new output)"


@pytest.fixture(autouse=True)
def _nothing_left_frozen():
    """lint, build and report freeze what is alive as they end (nogc.no_cyclic_gc(freeze=True)),
    as a process that exits next may. Run in this process (tests/runtime/virtual.py), that
    would leave the worker's objects frozen for the tests after it, and nogc's own tests
    (which need a process that froze nothing) would fail depending on what ran before."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()


# ------------------------------------------------------------------ the suite's own home
#
# Tests and what they start write to the home directory: Ray its ~/.ray/auth_token (which a
# later `ray start` then refuses with InvalidAuthToken), matplotlib its font cache, Chromium
# its profile. The suite runs with HOME and the XDG directories in a temporary directory,
# made by the first process (the xdist controller; its workers and every child inherit it)
# and removed when that process ends; the user's git identity is copied into it, as the
# tests that commit need one. A run that still writes to the real home fails (see below).

_OWN_HOME = "HARNESSC_TESTS_HOME"  # set: this process runs under the suite's home already
_HOME_NAMES = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share",
               "XDG_STATE_HOME": ".local/state", "MPLCONFIGDIR": ".config/matplotlib"}


def _git_identity() -> str:
    """The user's git user.name and user.email as a .gitconfig section ("" when unset)."""
    lines = []
    for key in ("user.name", "user.email"):
        res = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True,
                             cwd=tempfile.gettempdir())  # not a repository: the user's own settings
        if res.returncode == 0 and res.stdout.strip():
            lines.append(f"\t{key.split('.')[1]} = {res.stdout.strip()}\n")
    return "[user]\n" + "".join(lines) if lines else ""


def _home_parent() -> str | None:
    """Where the suite's home is made: outside the temporary directory when possible, as a
    real home is (Codex, for one, refuses its sandbox with CODEX_HOME under $TMPDIR, and
    `doctor` says so); /var/tmp, else the temporary directory."""
    tmp = Path(tempfile.gettempdir()).resolve()
    var_tmp = Path("/var/tmp")
    if var_tmp.is_dir() and os.access(var_tmp, os.W_OK) and not var_tmp.resolve().is_relative_to(tmp):
        return str(var_tmp)
    return None


def _home_entries(home: Path) -> set[str]:
    """What the home directory holds, two levels down (~/.ray/auth_token, ~/.cache/matplotlib)."""
    found = set()
    try:
        for top in home.iterdir():
            found.add(top.name)
            if top.is_dir() and not top.is_symlink():
                found.update(f"{top.name}/{inner.name}" for inner in top.iterdir())
    except OSError:
        pass
    return found


def pytest_configure(config: pytest.Config) -> None:
    # an event kind or field harnessc/events.py does not declare is an error in the suite (and in
    # every harnessc it starts); a user's run writes it all the same (store/eventlog.py)
    os.environ[events.STRICT] = "1"
    if os.environ.get(_OWN_HOME):  # an xdist worker (or a nested run): its parent set it up
        return
    real = Path(os.path.expanduser("~"))
    identity = _git_identity()
    base = Path(tempfile.mkdtemp(prefix="harnessc-tests-home-", dir=_home_parent()))
    home = base / "home"
    home.mkdir()
    if identity:
        (home / ".gitconfig").write_text(identity, encoding="utf-8")
    config.stash[_HOME_KEY] = (real, _home_entries(real), base)
    os.environ[_OWN_HOME] = str(home)
    os.environ["HOME"] = str(home)
    for var, name in _HOME_NAMES.items():
        os.environ[var] = str(home / name)
    # the temporary directory too: Chromium's profiles, multiprocessing's pymp-*, pytest's own
    # tmp_path and whatever else the suite's processes leave go with the suite's home. Ray keeps
    # its /tmp/ray: its socket paths under a longer directory pass the 107-byte limit.
    os.environ.setdefault("RAY_TMPDIR", tempfile.gettempdir())
    tmp = base / "tmp"
    tmp.mkdir()
    base.chmod(0o711)  # as /tmp is: a test that runs harnessc as another user reaches its files
    tmp.chmod(0o1777)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None  # read TMPDIR again


_HOME_KEY = pytest.StashKey[tuple]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The real home holds nothing new (checked by the process that set the suite's home up)."""
    kept = session.config.stash.get(_HOME_KEY, None)
    if kept is None:
        return
    real, before, _ = kept
    new = sorted(_home_entries(real) - before)
    if new:
        # On a machine where others use the same home at the same time, what they write shows
        # here too: HARNESSC_TESTS_HOME_CHECK=warn says so without failing the run.
        strict = os.environ.get("HARNESSC_TESTS_HOME_CHECK") != "warn"
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"the suite wrote to the home directory {real}: {', '.join(new)} "
                   "(tests run with HOME set to a temporary directory; see tests/conftest.py)")
        if reporter:
            reporter.write_line(f"{'ERROR' if strict else 'WARNING'}: {message}", red=True, bold=True)
        if strict:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    kept = config.stash.get(_HOME_KEY, None)
    if kept is not None:
        remove_tree(kept[2])


def remove_tree(path: Path, threads: int = 16) -> None:
    """shutil.rmtree(path, ignore_errors=True), with the files and directories deleted by many
    threads at once. Where each deletion waits for the disk (on this 2-core VM an unlink or
    rmdir takes 1-3 ms), removing a whole run's temporary files one at a time took a minute
    or more after the last test; side by side, a few seconds."""
    files, dirs = [], []
    for top, dirnames, filenames in os.walk(path):  # a link to a directory is not followed
        dirs.append(top)
        files += [os.path.join(top, name) for name in dirnames if os.path.islink(os.path.join(top, name))]
        files += [os.path.join(top, name) for name in filenames]
    by_depth: dict[int, list[str]] = {}
    for d in dirs:
        by_depth.setdefault(d.count(os.sep), []).append(d)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(_quietly(os.unlink), files, chunksize=16))
        for depth in sorted(by_depth, reverse=True):  # a directory after everything in it
            list(pool.map(_quietly(os.rmdir), by_depth[depth]))
    shutil.rmtree(path, ignore_errors=True)  # what the walk could not read or remove, as before


def _quietly(remove):
    def call(p: str) -> None:
        try:
            remove(p)
        except OSError:
            pass
    return call


# ------------------------------------------------------------------ xdist groups under pytest 9
#
# `--dist loadgroup` (pyproject's addopts) runs the tests of one xdist_group in one worker:
# the "ray" group keeps one Ray cluster on the machine at a time. pytest-xdist (3.8) marks
# them by appending "@group" to `item._nodeid`, which pytest 9 no longer reads (the id lives in
# `item._id`), so the groups were silently ignored; this does the same on the id pytest reads.


# ------------------------------------------------------------------ how many workers `-n auto` starts
#
# Two per core: most tests wait on their processes (git, agents, a Ray cluster), and a 2-core
# run at one worker per core kept the cores a third idle (4 min 47 s at -n 2, 4 min 10 s at
# -n 4). The cores this process may run on, not the machine's.


@pytest.hookimpl(optionalhook=True)  # (a run without xdist: the inner runs of test_home.py)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return 2 * len(os.sched_getaffinity(0))


# ------------------------------------------------------------------ the slowest tests first
#
# xdist hands tests out in collection order (after the groups), so a 20 s test collected last
# (mypy in test_static.py, the fuzzers) ran alone at the end while the other worker idled.
# These start first; the order of the rest is unchanged. Node id prefixes, the slowest of a
# `--durations` run; a test missing here is only scheduled in its usual place.
SLOW_FIRST = (
    "tests/test_static.py::test_mypy",
    "tests/test_precommit.py::test_the_readmes_snippet",
    "tests/runtime/test_min_passed.py::test_deleting_tests",
    "tests/runtime/test_reaper.py::test_fast_commands_keep_their_exit_statuses",
    "tests/runtime/test_schedule.py::TestScheduleMachine",
    "tests/runtime/test_task_limits.py::test_max_time_counts_the_running_time_before_a_kill_9",
    "tests/runtime/test_isolation_machine.py::TestIsolationMachine",
    "tests/runtime/test_caching.py::test_the_cache_bench_finds",
    "tests/runtime/test_reliability.py::test_kill_9_drill",
    "tests/runtime/test_bench_providers.py::test_bench_providers_runs",
    "tests/runtime/test_min_passed.py::test_the_shared_tree",
    "tests/runtime/test_min_passed.py::test_a_fixed_minimum",
    "tests/runtime/test_limits.py::test_stop_finishes_a_long_verification_within_max_time",
    "tests/runtime/test_call_bounds.py::test_a_slow_server_is_cut_at_the_tasks_max_time",
    "tests/runtime/test_htmlreport.py::test_report_reads_at_every_size_in_headless_chromium",
    "tests/runtime/test_min_passed.py::test_a_junit_file",
    "tests/runtime/test_ledger.py::test_every_request_is_one_attempt_with_its_ledger",
    "tests/test_roadmap.py::test_format_then_parse_gives_the_same_ir",
)


def _slow_first(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set in xdist's workers
        return
    _slow_first(items)
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # an older pytest: xdist's own suffix works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and hasattr(item, "_id") and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)
