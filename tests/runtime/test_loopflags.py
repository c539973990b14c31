"""Run flags over the loop settings: --max-time, --max-iterations, --stuck-after, presets."""

from __future__ import annotations

import json
import sqlite3

from harnessc.compiler.ir import Loop
from harnessc.runtime.loop import loopflags

from . import virtual
from .helpers import node, write_project


def tasks(root) -> dict[str, dict]:
    return {t["id"]: t for t in json.loads(virtual.harnessc(root, "status", "--output", "json").stdout)["tasks"]}


# The run's max_time in virtual time (tests/runtime/virtual.py): 12 s of agent latency against a
# limit of 1 or 2 s, in no time.
SLOW_TASKS = {"rehearsal": {"provider": "simulate", "latency": 1.0}}


def test_max_time_stops_the_run_and_the_next_run_goes_on(tmp_path):
    write_project(tmp_path, [node(f"t{i}") for i in range(12)], concurrency=1, agents=SLOW_TASKS)
    r = virtual.harnessc(tmp_path, "run", "--max-time", "1s")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "--max-time (1s) reached" in r.stdout
    states = [t["state"] for t in tasks(tmp_path).values()]
    assert "succeeded" in states and any(s in ("pending", "ready") for s in states)
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert {t["state"] for t in tasks(tmp_path).values()} == {"succeeded"}


def test_max_iterations_and_stuck_after_override_every_task_for_this_run(tmp_path):
    write_project(tmp_path, [node("slow", completion_promise="DONE", routing={"agent": "slowpoke"}),
                             node("stuck", completion_promise="DONE", routing={"agent": "stuckbot"},
                                  limits={"stuck_after": 9})],
                  agents={"slowpoke": {"provider": "simulate", "complete_after": 4},
                          "stuckbot": {"provider": "simulate", "complete_after": 99, "progress": "none"}})
    r = virtual.harnessc(tmp_path, "run", "--max-iterations", "3", "--stuck-after", "2")
    assert r.returncode == 1
    t = tasks(tmp_path)
    assert t["slow"]["state"] == "failed" and "max_iterations (3)" in t["slow"]["error"]
    recovery = sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT COUNT(*) FROM events WHERE kind='recovery'").fetchone()[0]
    assert recovery == 1  # stuck after 2 identical iterations (the plan says 9), then the limit of 3
    # the plan itself is untouched: a run without the flags uses its limits again
    plan = json.loads((tmp_path / ".harness/build/plan.json").read_text())
    assert plan["nodes"][0]["limits"]["max_iterations"] == 50


def test_presets_set_loop_settings_and_explicit_flags_win(tmp_path):
    plan = write_project(tmp_path, [node("a", limits={"max_iterations": None}), node("b")])
    plan.loop = Loop().model_dump(mode="json")
    flags = loopflags.resolve("conservative", None, None, None)
    loopflags.apply(plan, "conservative", flags)
    assert [n.limits.max_iterations for n in plan.nodes] == [100, 50]  # a cap: unlimited -> 100, 50 stays
    assert plan.loop["alerts"] == {"milestone_every": 5, "pause_on_critical": True}
    assert loopflags.resolve("autonomous", None, None, None) == {"max_time": 86400.0, "git": "commit"}
    assert loopflags.resolve("autonomous", 3600.0, 7, None) == {"max_time": 3600.0, "max_iterations": 7,
                                                                 "git": "commit"}
    # --autonomous commits the tasks that did not say; an explicit `git: off` stays off
    plan = write_project(tmp_path / "g", [node("said_off", git="off"), node("unsaid"), node("said_on", git="commit")])
    loopflags.apply(plan, "autonomous", loopflags.resolve("autonomous", None, None, None))
    assert [n.git for n in plan.nodes] == ["off", "commit", "commit"]
    assert loopflags.resolve("conservative", None, 500, None)["max_iterations"] == 500
    plan = write_project(tmp_path / "t", [node("a")])
    loopflags.apply(plan, None, loopflags.resolve(None, None, None, None, 0.4))
    assert plan.loop["progress"]["threshold"] == 0.4 and plan.loop["progress"]["weights"]["files"] == 0.4


def test_flag_errors_are_usage_errors(tmp_path):
    write_project(tmp_path, [node("a")])
    for args, words in ((["--max-time", "soon"], "is not a duration"), (["--max-time", "0s"], "more than 0"),
                        (["--max-iterations", "-1"], "at least 1, or unlimited"),
                        (["--autonomous", "--conservative"], "cannot be used together"),
                        (["--progress-threshold", "1.5"], "not in the range"),
                        (["--max-time", "0"], "use a number with a unit"),
                        (["--progress-threshold", "nan"], "a number from 0 to 1")):  # nan passes click's range
        r = virtual.harnessc(tmp_path, "run", *args)
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)


def test_progress_threshold_flag_decides_what_counts_as_progress_for_this_run(tmp_path):
    write_project(tmp_path, [node("t", completion_promise="DONE", limits={"stuck_after": 2})],
                  agents={"rehearsal": {"provider": "simulate", "complete_after": 5}},
                  loop={"recovery": {"prompt_mutations": 0, "escalate": False, "human": False}})
    # steady simulate progress (a new <progress> marker each time) scores above 0.15 ...
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    # ... and under a threshold of 0.9: stuck after 2 iterations
    r = virtual.harnessc(tmp_path, "run", "--rerun", "all", "--progress-threshold", "0.9")
    assert r.returncode == 1
    t = tasks(tmp_path)["t"]
    assert t["state"] == "failed" and "under progress_threshold 0.9" in t["error"], t


def test_a_tasks_own_threshold_decides_stuck_and_the_run_flag_wins_over_it(tmp_path):
    own = {"progress_threshold": 0.05, "recovery": None}
    write_project(tmp_path, [node("own", completion_promise="DONE", limits={"stuck_after": 2}, loop=own),
                             node("plain", completion_promise="DONE", limits={"stuck_after": 2})],
                  agents={"rehearsal": {"provider": "simulate", "complete_after": 5}},
                  loop={"progress": {"threshold": 0.9},
                        "recovery": {"prompt_mutations": 0, "escalate": False, "human": False}})
    # harness.yaml's 0.9 finds steady simulate progress stuck; the task's own 0.05 does not
    assert virtual.harnessc(tmp_path, "run").returncode == 1
    t = tasks(tmp_path)
    assert t["own"]["state"] == "succeeded", t["own"]
    assert t["plain"]["state"] == "failed" and "under progress_threshold 0.9" in t["plain"]["error"]
    # a run flag wins over the task's own setting
    r = virtual.harnessc(tmp_path, "run", "--rerun", "all", "--progress-threshold", "0.95")
    assert r.returncode == 1
    t = tasks(tmp_path)
    assert t["own"]["state"] == "failed" and "under progress_threshold 0.95" in t["own"]["error"], t["own"]


def test_a_preset_sets_its_recovery_switches_over_a_tasks_own_rungs(tmp_path):
    plan = write_project(tmp_path, [node("a", loop={"progress_threshold": 0.3, "recovery": ["negative", "fail"]}),
                                    node("b", loop={"progress_threshold": 0.3, "recovery": ["negative", "fail"]}),
                                    node("c")])
    loopflags.apply(plan, "autonomous", loopflags.resolve("autonomous", None, None, None, 0.5))
    assert plan.nodes[0].loop.recovery == ["negative", "escalate", "human"]  # every rung, a human last
    assert plan.nodes[0].loop.progress_threshold is None  # --progress-threshold: the plan's 0.5 applies
    assert plan.nodes[1].loop == plan.nodes[0].loop and plan.nodes[2].loop is None
    assert plan.loop["progress"]["threshold"] == 0.5


def test_termination_max_iterations_stops_the_run_and_each_run_goes_on(tmp_path):
    write_project(tmp_path, [node(f"t{i}") for i in range(5)], concurrency=1,
                  loop={"termination": {"max_iterations": 2}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "loop.termination.max_iterations (2) reached" in r.stdout
    assert [t["state"] for t in tasks(tmp_path).values()].count("succeeded") == 2
    assert virtual.harnessc(tmp_path, "run").returncode == 3  # two more, then the limit again
    assert [t["state"] for t in tasks(tmp_path).values()].count("succeeded") == 4
    assert virtual.harnessc(tmp_path, "run").returncode == 0


def test_termination_max_time_in_harness_yaml_and_the_flag_wins(tmp_path):
    write_project(tmp_path, [node(f"t{i}") for i in range(12)], concurrency=1, agents=SLOW_TASKS,
                  loop={"termination": {"max_time": 1}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 3 and "loop.termination.max_time (1s) reached" in r.stdout, r.stdout + r.stderr
    r = virtual.harnessc(tmp_path, "run", "--max-time", "2s")
    assert r.returncode == 3 and "--max-time (2s) reached" in r.stdout, r.stdout + r.stderr


def test_run_limits_precedence():
    from types import SimpleNamespace

    from harnessc.runtime.termination import RunLimits

    def cfg(max_time):
        return SimpleNamespace(termination=SimpleNamespace(max_time=max_time, max_iterations=None))

    day = loopflags.DAY
    assert (RunLimits.of(5.0, day, cfg(60)).max_time, RunLimits.of(5.0, day, cfg(60)).time_source) == (5.0, "--max-time")
    assert RunLimits.of(None, day, cfg(60)).time_source == "loop.termination.max_time"
    assert RunLimits.of(None, day, cfg(None)).max_time == day  # --autonomous's day, when nothing else says
    assert RunLimits.of(None, None, cfg(None)).reached() is None


def test_the_runtime_knows_every_loop_section():
    from harnessc.runtime.plan import LOOP_SECTIONS

    assert set(Loop.model_fields) == LOOP_SECTIONS
