"""The recovery ladder: what a stuck task tries before it gives up (seed 003 §3).

Each time a task is found stuck, it climbs one rung. The rungs are a list of steps, from a
task's `recovery:` in roadmap.md (plan.json: node.loop.recovery) or else harness.yaml's
`loop.recovery` (prompt_mutations, escalate, human: converted to the same list):

- a prompt mutation (rephrase, decompose, constrain, examples, negative): a rewrite of the
  instructions heading the task's prompt that changes how it asks, with the stuck evidence
  quoted - written by the `mutation_agent` when one is set (assist.py), else (and as its
  fallback) the fixed HEADS;
- explore: branch exploration (runtime/explore.py) - a few approaches of the task run one
  iteration each from the stuck point, each in its own git worktree, and the task goes on
  from the one with the best progress score (an isolated task only; elsewhere it is skipped);
- escalate: the next, stronger agent of the task's chain, through the router's route;
- the end, always last: `human` (the task becomes `blocked` with the reason; independent
  work goes on, and `harnessc retry` - after an instruction through `harnessc tell TASK`,
  say - runs it again) or `fail`.

Every rung is a `recovery` event (and so an alert). The rung reached is part of the task's
loop state (loop.py), so a stopped run resumes on the next rung - a `recovery_resumed` event
(and an info alert) says where it goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...planfile import Plan, PlanNode
from ...vocab import LADDER_ENDS, MUTATIONS, ladder_rungs

__all__ = ["MUTATIONS", "Ladder", "Rung", "mutate", "resumed_text", "rungs_for", "switched"]

QUOTED = 400  # characters of the stuck output quoted in a mutation


@dataclass
class Rung:
    kind: str  # mutate | explore | escalate | human | give_up
    mutation: str | None = None


def rungs_for(plan: Plan, node: PlanNode) -> tuple[str, ...]:
    """The task's ladder: its own `recovery:`, else harness.yaml's `loop.recovery` (the defaults
    for a plan built before it)."""
    if node.loop is not None and node.loop.recovery:
        return tuple(node.loop.recovery)
    cfg = (plan.loop or {}).get("recovery") or {}
    return ladder_rungs(cfg.get("prompt_mutations", 3), cfg.get("escalate", True), cfg.get("human", True),
                        bool(cfg.get("explore", False)))


def switched(rungs: list[str] | tuple[str, ...], escalate: bool | None = None,
             human: bool | None = None) -> list[str]:
    """A task's rungs with harness.yaml's switches set over them (a run preset's, loopflags.py):
    escalation on (added before the end when missing) or off, the end `human` or `fail`."""
    steps = list(rungs)
    end = steps.pop() if steps and steps[-1] in LADDER_ENDS else "human"
    if escalate is False:
        steps = [s for s in steps if s != "escalate"]
    elif escalate and "escalate" not in steps:
        steps.append("escalate")
    if human is not None:
        end = "human" if human else "fail"
    return [*steps, end]


class Ladder:
    """One task's way up; `climb()` says what to do on each stuck finding. `step` (rungs
    climbed) is saved with the loop state and given back on resume."""

    def __init__(self, rungs: tuple[str, ...] | list[str], step: int = 0):
        rungs = tuple(rungs)
        if not rungs or rungs[-1] not in LADDER_ENDS:
            rungs = (*rungs, "human")  # a ladder always ends (plan.json from elsewhere)
        self.rungs = rungs
        self.step = max(0, step)

    def reached(self) -> str | None:
        """The last rung climbed (None before the first)."""
        return self.rungs[min(self.step, len(self.rungs)) - 1] if self.step else None

    def rewrites_tried(self) -> list[str]:
        """The prompt mutations climbed before the current rung (for a blocked task's reason)."""
        return [r for r in self.rungs[:max(0, self.step - 1)] if r in MUTATIONS]

    def climb(self) -> Rung:
        name = self.rungs[min(self.step, len(self.rungs) - 1)]
        self.step += 1
        if name in MUTATIONS:
            return Rung("mutate", name)
        return Rung({"fail": "give_up"}.get(name, name))


def resumed_text(ev: dict) -> str:
    """A `recovery_resumed` event in words (alerts.py, `harnessc log`)."""
    text = (f"resumed mid-ladder: recovery {ev.get('step')}/{ev.get('rungs')} ({ev.get('rung') or 'none'}) "
            f"reached, on {ev.get('agent')}")
    if ev.get("escalated_to") and ev["escalated_to"] != ev.get("agent"):
        text += f" ({ev['escalated_to']}, where it escalated to, is not on this run's route)"
    return text + (", from the rewritten prompt" if ev.get("rewritten_prompt") else "")


# The deterministic instructions of each mutation (also shown to a mutation agent as the fallback).
HEADS = {
    "rephrase": "Your last iterations made no progress. Before anything else, restate the goal below in "
                "your own words in two sentences, then work towards it in a different way than before.",
    "decompose": "Your last iterations made no progress. Break the task below into at most five small "
                 "steps, write them as a checklist, then do only the first step that is not done and "
                 "report it with <progress>what you did</progress>.",
    "constrain": "Your last iterations made no progress. Make the smallest change that moves the task "
                 "below forward: one file, one function, one test. Nothing else this iteration.",
    "examples": "Your last iterations made no progress. Here is the shape of a finished answer; produce "
                "one like it for the task below.",
    "negative": "Your last iterations made no progress. Do NOT repeat what you did last time; that "
                "approach is not working. Try a different one.",
}
# What each mutation asks of a mutation agent (mutation.md.j2).
STRATEGIES = {
    "rephrase": "restate the goal in different words and point to a different way of working towards it.",
    "decompose": "break the task into at most five small steps and have the agent do only the first one "
                 "not done yet, reporting it with <progress>what you did</progress>.",
    "constrain": "narrow the next iteration to the smallest change that moves the task forward.",
    "examples": "show concretely what a finished step or answer looks like.",
    "negative": "say plainly what the agent must not do again, from what it did, and what to try instead.",
}


def mutate(prompt: str, mutation: str, why: str, last_output: str, example: Any = None,
           head: str | None = None) -> str:
    """The task's prompt under new instructions: `head` (a mutation agent's rewrite), else the
    mutation's fixed ones, then why it was stuck and how its last output began; the task's
    prompt follows unchanged."""
    seen = " ".join(last_output.split())[:QUOTED]
    parts = [f"## Recovery ({mutation})", "", (head or HEADS[mutation]).strip(), "", f"Why: {why}"]
    if seen:
        parts += ["", f"Your last output began: \"{seen}\""]
    if mutation == "examples" and example is not None:
        parts += ["", "```json", json.dumps(example, indent=2, sort_keys=True)[:4000], "```"]
    return "\n".join(parts) + "\n\n---\n\n" + prompt
