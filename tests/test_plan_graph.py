"""Waves and critical path on generated dependency graphs, in roadmap order or not."""

from __future__ import annotations

import functools

from hypothesis import given, settings, strategies as st

from harnessc.compiler.plan import _critical_path, _topo_order, _waves


@st.composite
def graphs(draw) -> list[dict]:
    """Acyclic graphs: task i may depend on tasks before it in a hidden order; the roadmap
    lists them in another order (sometimes the same)."""
    n = draw(st.integers(1, 25))
    nodes = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        nodes.append({"id": f"t{i}", "depends_on": [f"t{d}" for d in deps], "done": draw(st.booleans())})
    if draw(st.booleans()):
        nodes = draw(st.permutations(nodes))
    return nodes


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_waves_and_critical_path(nodes):
    by_id = {n["id"]: n for n in nodes}
    order = _topo_order(nodes)
    position = {n["id"]: i for i, n in enumerate(order)}
    assert sorted(position) == sorted(by_id)
    assert all(position[d] < position[n["id"]] for n in nodes for d in n["depends_on"])

    waves = _waves(nodes, order)
    wave = {tid: i for i, w in enumerate(waves) for tid in w}
    assert sorted(wave) == sorted(by_id) and all(waves)
    for n in nodes:  # one more than the deepest dependency
        assert wave[n["id"]] == 1 + max((wave[d] for d in n["depends_on"]), default=-1)
    for w in waves:  # roadmap order within a wave
        assert w == [n["id"] for n in nodes if n["id"] in w]

    path = _critical_path(order)
    assert all(b in by_id[a]["depends_on"] for a, b in zip(path[1:], path))  # a chain of dependencies
    todo = lambda chain: sum(not by_id[t]["done"] for t in chain)  # noqa: E731

    @functools.cache
    def longest(tid: str) -> int:  # the most undone tasks on any chain ending at tid
        return (not by_id[tid]["done"]) + max((longest(d) for d in by_id[tid]["depends_on"]), default=0)

    assert todo(path) == max(longest(t) for t in by_id)


def test_plan_records_read_like_the_dicts_plan_json_gives() -> None:
    import json

    import pytest

    from harnessc.compiler.plan import Edges
    from harnessc.planfile import Estimate, PlanNode, PromptRef
    from harnessc.compiler.planjson import plan_json

    node = PlanNode(id="a", title="A", phase=None, done=False, order=0, priority="normal", complexity="simple",
                    tags=("x",), depends_on=("b",), contract=None, goal="", success=None, completion_promise=None,
                    accept=(), context=(), limits={}, retry={}, routing={"agent": "r", "chain": [], "reason": "x"})
    node["estimate"] = Estimate(1, 2, None)
    node["prompt"] = PromptRef("a", "0" * 64)
    assert node["id"] == "a" and node.get("wave") is None and "done" in node and "nope" not in node
    with pytest.raises(KeyError):
        node["keys"]  # a method name is not a key
    with pytest.raises(KeyError):
        node["nope"] = 1
    assert node["prompt"] == {"path": "prompts/a.md", "sha256": "0" * 64}
    as_json = json.loads(plan_json({"nodes": [node], "edges": Edges([node])}))
    assert as_json["nodes"] == [{k: (list(v) if isinstance(v, tuple) else v) for k, v in {
        **dict(node), "estimate": {"input_tokens": 1, "output_tokens": 2, "cost_usd": None},
        "prompt": {"path": "prompts/a.md", "sha256": "0" * 64}}.items()}]
    assert as_json["edges"] == [["b", "a"]] and Edges([node]) == [["b", "a"]] and len(Edges([node])) == 1
