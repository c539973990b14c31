"""The recovery ladder: what a stuck task tries before it gives up (seed 003 §3).

Each time a task is found stuck, it climbs one rung:

1. prompt mutations (`loop.recovery.prompt_mutations`, default 3), in the order rephrase,
   decompose, constrain, examples, negative: rewrites of the instructions heading the task's
   prompt that change how it asks, with the stuck evidence quoted - written by the
   `mutation_agent` when one is set (assist.py), else (and as its fallback) the fixed HEADS;
2. escalation (`loop.recovery.escalate`): the next, stronger agent of the task's chain, through
   the router's route;
3. a human (`loop.recovery.human`): the task becomes `blocked` with the reason; independent
   work goes on, and `harnessc retry` (after an instruction through `harnessc tell TASK`,
   say) runs it again. With `human: false` the task fails instead.

Every rung is a `recovery` event (and so an alert).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MUTATIONS = ("rephrase", "decompose", "constrain", "examples", "negative")
QUOTED = 400  # characters of the stuck output quoted in a mutation


@dataclass
class Rung:
    kind: str  # mutate | escalate | human | give_up
    mutation: str | None = None


class Ladder:
    """One task's way up; `climb()` says what to do on each stuck finding."""

    def __init__(self, config: dict | None):
        config = config or {}
        self.mutations = MUTATIONS[:max(0, min(int(config.get("prompt_mutations", 3)), len(MUTATIONS)))]
        self.escalate = bool(config.get("escalate", True))
        self.human = bool(config.get("human", True))
        self.step = 0  # rungs climbed

    def climb(self) -> Rung:
        rungs = [Rung("mutate", m) for m in self.mutations]
        if self.escalate:
            rungs.append(Rung("escalate"))
        rungs.append(Rung("human" if self.human else "give_up"))
        rung = rungs[min(self.step, len(rungs) - 1)]
        self.step += 1
        return rung


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
        import json

        parts += ["", "```json", json.dumps(example, indent=2, sort_keys=True)[:4000], "```"]
    return "\n".join(parts) + "\n\n---\n\n" + prompt
