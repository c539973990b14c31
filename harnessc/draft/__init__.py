"""`harnessc draft PRD.md`: an agent writes roadmap.md and contracts.yaml from a
requirements document; the compiler lints the draft and the diagnostics go back to the
agent until it is clean or the rounds run out; the result is written next to the specs as
roadmap.draft.md and contracts.draft.yaml, for a person to review.

- `rounds.py` — the rounds: choose and call the agent, lint, send the problems back;
- `prompt.py` — what the agent is asked;
- `answer.py` — its answer read as text (two fenced blocks), never run;
- `offline.py` — the draft the simulate agent makes from the document's headings and bullets;
- `files.py` — the two files written, never over the user's specs or an earlier draft (unless --force).
"""
