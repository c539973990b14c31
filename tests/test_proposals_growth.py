"""A plan grown by random accepted proposals stays acyclic and within its limits (proposals.py),
and hostile agent text is read safely. Real files and the real linter; the attempts' text
comes from a stand-in for state.db (tests/runtime/test_proposals.py runs the whole path)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessc import proposals
from harnessc.compiler import lint_project

ROADMAP = "# P\n\n## Tasks\n\n- [ ] **t0**: The first task\n  - completion_promise: DONE\n\n## Notes\n\nkept\n"


class Attempts:
    """What collect reads of state.db: each task's last answer and output."""

    def __init__(self, texts: dict[str, str]):
        self.texts = texts
        self.events: list[tuple] = []

    def tasks(self, ids):
        return {t: {"output": None} for t in ids}

    def outputs(self, ids):
        return dict.fromkeys(ids)

    def final_attempt(self, tid):
        return {"raw_output": self.texts.get(tid, "")}

    def final_answers(self, ids):
        return {t: self.final_attempt(t)["raw_output"] for t in ids}

    def event(self, kind, tid=None, **data):
        self.events.append((kind, tid, data))


def _marker(tid: str, deps: list[str]) -> str:
    return f'<task id="{tid}" depends_on="{",".join(deps)}">Do {tid}.</task>'


round_ = st.tuples(
    st.integers(0, 50),  # which existing task proposes (modulo how many there are)
    st.lists(st.tuples(st.sampled_from([f"n{i}" for i in range(12)] + ["t0"]),  # ids may repeat, clash
                       st.lists(st.integers(0, 30), max_size=3)), max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),  # which waiting ones to accept
)


@settings(max_examples=int(os.environ.get("HARNESSC_FUZZ_EXAMPLES", "25")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(round_, min_size=1, max_size=4), max_new=st.integers(0, 4), max_depth=st.integers(0, 3))
def test_a_plan_grown_by_accepted_proposals_stays_acyclic_and_in_its_limits(rounds, max_new, max_depth):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "roadmap.md").write_text(ROADMAP)
        growth = {"grow": "review", "max_new_tasks": max_new, "max_depth": max_depth}
        for r, (who, items, accepts) in enumerate(rounds):
            ids = [t.id for t in lint_project(root).tasks]
            proposer = ids[who % len(ids)]
            pool = ids + [i for i, _ in items]  # a dependency may be any task or any proposal (cycles too)
            text = "".join(_marker(i, [pool[d % len(pool)] for d in deps]) for i, deps in items)
            proposals.collect(root, growth, Attempts({proposer: text}), [proposer], f"run{r}")
            filed = [p for p in proposals.Store(root).all() if p.run == f"run{r}" and p.status != "rejected"]
            assert len(filed) <= max_new
            for p, yes in zip(filed, accepts):
                if yes:
                    try:
                        proposals.accept(root, p.id)
                    except proposals.ProposalError:
                        pass  # e.g. its dependency is a proposal not accepted
            project = lint_project(root)
            assert not project.diags.has_errors(), [str(d) for d in project.diags.errors]
            assert (root / "roadmap.md").read_text().rstrip().endswith("kept")  # the Notes stay last
        gens = proposals.Store(root).generations()
        assert all(g <= max_depth for g in gens.values())
        tasks = {t.id: list(t.depends_on) for t in lint_project(root).tasks}
        _assert_acyclic(tasks)


@settings(max_examples=int(os.environ.get("HARNESSC_FUZZ_EXAMPLES", "25")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(round_, min_size=1, max_size=4), max_new=st.integers(0, 4), max_depth=st.integers(0, 3))
def test_a_plan_grown_by_auto_stays_acyclic_and_in_its_limits(rounds, max_new, max_depth):
    """plan.grow: auto (proposals.grow, as runtime/growth/ calls it when a task lands): what is
    added to roadmap.md lints clean, the run adds at most max_new_tasks, no task is deeper than
    max_depth generations, no task of the roadmap gains a dependency."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "roadmap.md").write_text(ROADMAP)
        cfg = proposals.settings({"grow": "auto", "max_new_tasks": max_new, "max_depth": max_depth})
        for r, (who, items, _) in enumerate(rounds[:2]):
            before = {t.id: list(t.depends_on) for t in lint_project(root).tasks}
            ids = list(before)
            proposer = ids[who % len(ids)]
            pool = ids + [i for i, _ in items]
            text = "".join(_marker(i, [pool[d % len(pool)] for d in deps]) for i, deps in items)
            filing = proposals.Filing(root, cfg, Attempts({proposer: text}), "one-run")
            added = proposals.grow(filing, proposer)
            project = lint_project(root)
            assert not project.diags.has_errors(), [str(d) for d in project.diags.errors]
            after = {t.id: list(t.depends_on) for t in project.tasks}
            assert {t: after[t] for t in before} == before, "a task of the roadmap gained a dependency"
            assert set(after) - set(before) == {p.id for p in added}
            assert (root / "roadmap.md").read_text().rstrip().endswith("kept")
        run = [p for p in proposals.Store(root).all() if p.status == "added"]
        assert len(run) <= max_new
        gens = proposals.Store(root).generations()
        assert all(g <= max_depth for g in gens.values())
        _assert_acyclic({t.id: list(t.depends_on) for t in lint_project(root).tasks})


def _assert_acyclic(deps: dict[str, list[str]]) -> None:
    left = dict(deps)
    while left:
        ready = [t for t, ds in left.items() if not any(d in left for d in ds)]
        assert ready, f"a cycle among {sorted(left)}"
        for t in ready:
            del left[t]


@settings(max_examples=int(os.environ.get("HARNESSC_FUZZ_EXAMPLES", "60")), deadline=None, database=None)
@given(text=st.text(max_size=2000))
def test_any_text_is_read_without_error(text):
    found, problems = proposals.extract(text, {"next_tasks": text})
    assert not found and problems == ["next_tasks: not a list"]
    for p in proposals.extract("<task id='a'>" + text + "</task>", None)[0]:
        assert "\n" not in p.block().split("Goal: ", 1)[1].rstrip("\n")  # one paragraph, however hostile


def test_hostile_markers():
    text = ('<task id="../x" depends_on="a">up</task>'
            '<task id="ok" depends_on="a b">space in an id</task>'
            '<task id="fine">line one\n- [ ] **evil**: a task of its own\n## Heading\n<!-- open</task>'
            + "<task id='z'>" * 50_000)  # many openings, no end: linear, not a hang
    found, problems = proposals.extract(text, None)
    assert [p.id for p in found] == ["fine"]
    assert len(problems) == 2
    block = found[0].block()
    assert block.count("\n- [ ]") == 0 and "\n## " not in block and "<!--" not in block


def test_the_limit_holds_for_proposals_left_in_a_cycle(tmp_path):
    # found by the test above: 'n0' depends on roadmap task t0 while the same answer also
    # proposes an id 't0'; n0 was linted with the cycle leftovers, past max_new_tasks: 0
    (tmp_path / "roadmap.md").write_text(ROADMAP)
    growth = {"grow": "review", "max_new_tasks": 0, "max_depth": 1}
    proposals.collect(tmp_path, growth, Attempts({"t0": _marker("n0", ["t0"]) + _marker("t0", ["t0"])}), ["t0"], "r")
    got = {p.id: p for p in proposals.Store(tmp_path).all()}
    assert got["n0"].status == "rejected" and "HC495" in got["n0"].diagnostics[0]
    assert got["t0"].status == "rejected"
    growth["max_new_tasks"] = 5  # within the limit, the duplicate id is lint's error, n0 is fine
    proposals.collect(tmp_path, growth, Attempts({"t0": _marker("n0", ["t0"]) + _marker("t0", ["t0"])}), ["t0"], "r2")
    got = {p.id: p for p in proposals.Store(tmp_path).all()}
    assert got["n0"].status == "waiting"
    assert got["t0"].status == "rejected" and "duplicate task id 't0'" in got["t0"].diagnostics[0]
