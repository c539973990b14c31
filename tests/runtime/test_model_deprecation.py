"""A model the anthropic SDK calls deprecated: the run says so once per agent (a
`model_deprecated` warning alert naming the agent, the model and its end-of-life date), the
SDK's DeprecationWarning is not printed, and `harnessc doctor` says so before any run. Real
SDK, a whole `harnessc run` process, against the in-process fake server; keys are fake."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
anthropic = pytest.importorskip("anthropic")

from harnessc.providers import agent_config  # noqa: E402
from harnessc.runtime.agents.base import Request, Response, make_agent  # noqa: E402
from .fakeapi import FakeAPI, Reply, ThreadedFakeAPI  # noqa: E402
from .helpers import env as cli_env, harnessc  # noqa: E402
from .test_caching import NOTE_CONTRACTS  # noqa: E402

KEY = {"ANTHROPIC_API_KEY": "test-anthropic-key-0000"}
CURRENT = "claude-sonnet-4-6"


def _pick_deprecated() -> str:
    """A model the installed SDK's own table deprecates: the table changes between SDK
    releases (2.14 listed claude-sonnet-4-5, 2.17 lists claude-opus-4-5 instead), so the
    test reads it rather than naming one that a newer SDK drops."""
    from anthropic._data import DEPRECATED_MODELS

    undated = sorted(m for m in DEPRECATED_MODELS if m.startswith("claude-") and not m[-8:].isdigit())
    return (undated or sorted(DEPRECATED_MODELS) or [""])[0]


DEPRECATED = _pick_deprecated()


def _deprecated_in_sdk() -> str:
    """The end-of-life date the installed SDK gives DEPRECATED (the test needs one)."""
    from anthropic._data import DEPRECATED_MODELS

    if DEPRECATED not in DEPRECATED_MODELS:
        pytest.skip("the installed anthropic SDK deprecates no model")
    return DEPRECATED_MODELS[DEPRECATED]


def _project(root: Path, model: str, base_url: str, tasks: int = 3) -> None:
    root.mkdir(parents=True, exist_ok=True)
    lines = ["# Notes\n\n## Tasks\n"]
    lines += [f"- [ ] **t{i}**: Note {i}\n  - contract: note\n\n  Goal: Write note {i}.\n" for i in range(tasks)]
    (root / "roadmap.md").write_text("\n".join(lines), encoding="utf-8")
    (root / "contracts.yaml").write_text(NOTE_CONTRACTS, encoding="utf-8")
    (root / "harness.yaml").write_text(
        f"agents:\n  claude: {{provider: anthropic, model: {model}, base_url: '{base_url}'}}\nconcurrency: 2\n",
        encoding="utf-8")


def _run(root: Path, model: str, tasks: int = 3):
    with ThreadedFakeAPI() as api:
        api.push(*(Reply.ok(f'{{"title": "n{i}"}}') for i in range(tasks)))
        _project(root, model, api.base_url, tasks)
        e = {k: v for k, v in cli_env().items() if not k.startswith("ANTHROPIC_")}
        e.update(KEY)
        return harnessc(root, "run", env=e, timeout=120), e


def _alerts(root: Path) -> list[dict]:
    path = root / ".harness" / "alerts.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_run_on_a_deprecated_model_says_so_once_for_the_agent(tmp_path) -> None:
    date = _deprecated_in_sdk()
    r, _ = _run(tmp_path, DEPRECATED)
    assert r.returncode == 0, r.stdout + r.stderr
    said = [line for line in r.stdout.splitlines() if "is deprecated" in line]
    assert len(said) == 1, r.stdout  # three calls, one agent: one line
    assert "agent 'claude'" in said[0] and f"model '{DEPRECATED}'" in said[0] and date in said[0]
    assert "pick a newer model" in said[0]
    assert "DeprecationWarning" not in r.stdout + r.stderr
    (alert,) = [a for a in _alerts(tmp_path) if a["kind"] == "model_deprecated"]
    assert alert["level"] == "warning" and date in alert["message"]


def test_a_run_on_a_current_model_says_nothing_of_deprecation(tmp_path) -> None:
    r, _ = _run(tmp_path, CURRENT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deprecated" not in (r.stdout + r.stderr).lower()
    assert not [a for a in _alerts(tmp_path) if a["kind"] == "model_deprecated"]


def test_the_sdks_warning_is_heard_by_the_call_not_printed(monkeypatch) -> None:
    """In-process: the call carries the date, and Python never shows the SDK's warning."""
    date = _deprecated_in_sdk()
    monkeypatch.setenv(*next(iter(KEY.items())))

    async def go(model: str) -> Response:
        api = FakeAPI()
        base = await api.start()
        api.push(Reply.ok("fine"))
        agent = make_agent("a1", agent_config("a1", {"provider": "anthropic", "model": model, "base_url": base}),
                           Path("."))
        try:
            return await agent.call(Request(task_id="t1", prompt="hi", timeout=10.0))
        finally:
            await api.close()

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        old, new = asyncio.run(go(DEPRECATED)), asyncio.run(go(CURRENT))
    assert old.deprecated == date and new.deprecated is None
    assert not [w for w in shown if issubclass(w.category, DeprecationWarning)], [str(w.message) for w in shown]


def test_doctor_names_an_agent_on_a_deprecated_model(tmp_path) -> None:
    """Said on the agent's row; not a problem (the model answers until its end-of-life)."""
    date = _deprecated_in_sdk()
    e = {k: v for k, v in cli_env().items() if not k.startswith("ANTHROPIC_")}
    e.update(KEY)
    outs = {}
    with ThreadedFakeAPI() as api:  # reachable, never called
        for model in (DEPRECATED, CURRENT):
            _project(tmp_path / model, model, api.base_url)
            outs[model] = harnessc(tmp_path / model, "doctor", env=e, timeout=120)
    old, new = outs[DEPRECATED], outs[CURRENT]
    assert old.returncode == 0 and new.returncode == 0, old.stdout + new.stdout
    (row,) = [line for line in old.stdout.splitlines() if line.startswith("claude ")]
    assert f"model '{DEPRECATED}' is deprecated" in row and date in row and "pick a newer model" in row
    assert "deprecated" not in (new.stdout + new.stderr).lower(), new.stdout
