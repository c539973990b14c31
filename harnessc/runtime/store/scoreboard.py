"""A best-of-N task's scoreboard (runtime/approaches.py writes it): one row per approach -
agent, verified, score, cost, diff size, selected, and why it was not - kept in state.db's
meta table under `approaches.<task>` for `harnessc log TASK` and `status --output json`."""

from __future__ import annotations

import json
from typing import Any

BOARD_KEY = "approaches."  # + task id


def save(store: Any, task_id: str, board: dict) -> None:
    store.meta_set(BOARD_KEY + task_id, json.dumps(board, sort_keys=True, default=str))


def load(store: Any, task_id: str) -> dict | None:
    """The task's last scoreboard (None: it never ran approaches, or the record is damaged)."""
    try:
        data = json.loads(store.meta_get(BOARD_KEY + task_id) or "null")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("approaches"), list):
        return None
    data["approaches"] = [a for a in data["approaches"] if isinstance(a, dict)]
    return data


def every(store: Any) -> dict[str, dict]:
    """Task id -> scoreboard, for every task that ran approaches."""
    out = {}
    for key in store.meta_keys(BOARD_KEY):
        board = load(store, key.removeprefix(BOARD_KEY))
        if board is not None:
            out[key.removeprefix(BOARD_KEY)] = board
    return out


def lines(board: dict) -> list[str]:
    """The scoreboard as `log` prints it: a header, then one line per approach."""
    head = f"=== approaches · run {board.get('run_id')} · select {board.get('select')}"
    if board.get("score_command"):
        head += f" · score: {board['score_command']}"
    if board.get("min_score") is not None:
        head += f" · min_score {board['min_score']:g}"
    out = [head, f"{'approach':>8}  {'agent':<12} {'verified':<8} {'score':>10} {'cost':>10} {'diff':>6}  selected"]
    for a in board["approaches"]:
        score = "-" if a.get("score") is None else f"{a['score']:g}"
        diff = "-" if a.get("diff_lines") is None else str(a["diff_lines"])
        out.append(f"{a.get('approach', '?'):>8}  {str(a.get('agent') or '-'):<12} "
                   f"{'yes' if a.get('verified') else 'no':<8} {score:>10} {'$' + format(float(a.get('cost_usd') or 0), '.4f'):>10} "
                   f"{diff:>6}  {'selected' if a.get('selected') else ''}".rstrip())
        if not a.get("verified") and a.get("why"):
            out.append(f"{'':>10}{a.get('state')}: {str(a['why'])[:300]}")
    return out
