"""The plan's DAG as Mermaid, Graphviz DOT or JSON."""

from __future__ import annotations

import json
import re


def _mermaid_id(tid: str) -> str:
    return "t_" + re.sub(r"[^A-Za-z0-9_]", "_", tid)


def _label(text: str) -> str:
    return text.replace('"', "'")


def to_mermaid(nodes: list[dict]) -> str:
    lines = ["flowchart TD"]
    for n in nodes:
        mark = "✓ " if n.get("done") else ""
        lines.append(f'    {_mermaid_id(n["id"])}["{mark}{_label(n["id"])}: {_label(n["title"])}"]')
    for n in nodes:
        for d in n.get("depends_on") or []:
            lines.append(f"    {_mermaid_id(d)} --> {_mermaid_id(n['id'])}")
    done = [_mermaid_id(n["id"]) for n in nodes if n.get("done")]
    if done:
        lines.append("    classDef done fill:#dfd,stroke:#393")
        lines.append(f"    class {','.join(done)} done")
    return "\n".join(lines) + "\n"


def to_dot(nodes: list[dict]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph harnessc {", "    rankdir=LR;", "    node [shape=box];"]
    for n in nodes:
        style = ", style=filled, fillcolor=\"#ddffdd\"" if n.get("done") else ""
        lines.append(f"    {q(n['id'])} [label={q(n['id'] + ': ' + n['title'])}{style}];")
    for n in nodes:
        for d in n.get("depends_on") or []:
            lines.append(f"    {q(d)} -> {q(n['id'])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_json(nodes: list[dict]) -> str:
    """{"nodes": [{id, title, done, wave}], "edges": [[from, to], ...]}: the DAG for tools."""
    data = {
        "nodes": [{"id": n["id"], "title": n["title"], "done": bool(n.get("done")), "wave": n.get("wave")}
                  for n in nodes],
        "edges": [[d, n["id"]] for n in nodes for d in n.get("depends_on") or []],
    }
    return json.dumps(data, indent=2) + "\n"
