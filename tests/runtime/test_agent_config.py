"""Agent configs are typed records from the provider registry (providers.agent_config):
each kind's record with the runtime's defaults, read from plan.json as `harnessc build`
writes it; a wrong value in a hand-written plan is one clear error, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessc import planfile, providers
from harnessc.compiler.ir import AgentConfig as AgentSpec
from harnessc.providers import (AgentConfigError, AnthropicConfig, CliConfig, CommandConfig, OpenAIConfig, ReplayConfig,
                                SimulateConfig, agent_config)
from harnessc.providers.config import agent_keys
from harnessc.runtime.plan import PlanError, load_plan

from . import virtual
from .helpers import node, write_project

HARNESS = """\
agents:
  sonnet: {provider: anthropic, model: claude-sonnet-4-6, tier: powerful, price: {input: 3, output: 15},
           limits: {daily_calls: 50}}
  gpt: {provider: openai, model: gpt-5.2, api: responses, max_tokens: 4000}
  local: {provider: openai, model: "qwen3:8b", base_url: "http://127.0.0.1:11434/v1", api_key_env: null}
  script: {provider: command, command: [my-agent, "{prompt}"], pass_env: [MY_TOKEN], timeout: 90s}
  claude: {provider: claude-code, permissions: edit}
  codex: {provider: codex, model: gpt-5.2}
  gemini: {provider: gemini-cli, command: [npx, gemini]}
  sim: {provider: simulate, latency: 20ms, skill: {epic: 0.5}}
  taped: {provider: replay, cassette: tests/cassettes}
routing:
  default: sonnet
"""
ROADMAP = "# Typed agents\n\n## Tasks\n\n### t1: One task\n\nDo it.\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> planfile.Plan:
    root = tmp_path_factory.mktemp("typed")
    (root / "harness.yaml").write_text(HARNESS, encoding="utf-8")
    (root / "roadmap.md").write_text(ROADMAP, encoding="utf-8")
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    return load_plan(root)


def test_each_provider_of_a_built_plan_is_read_into_its_kinds_record(built):
    kinds = {name: type(config) for name, config in built.agents.items()}
    assert kinds == {"sonnet": AnthropicConfig, "gpt": OpenAIConfig, "local": OpenAIConfig,
                     "script": CommandConfig, "claude": CliConfig, "codex": CliConfig, "gemini": CliConfig,
                     "sim": SimulateConfig, "taped": ReplayConfig}


def test_the_settings_written_are_typed_values(built):
    a = built.agents
    assert (a["sonnet"].tier, a["sonnet"].price.input, a["sonnet"].price.output, a["sonnet"].limits.daily_calls) == (
        "powerful", 3.0, 15.0, 50)
    assert isinstance(a["sonnet"].price.input, float)
    assert (a["gpt"].api, a["gpt"].max_tokens) == ("responses", 4000)
    assert (a["script"].command, a["script"].pass_env, a["script"].timeout) == (("my-agent", "{prompt}"), ("MY_TOKEN",),
                                                                                90.0)
    assert a["claude"].permissions == "edit" and a["gemini"].command == ("npx", "gemini")
    assert (a["sim"].latency, a["sim"].skill) == (0.02, {"epic": 0.5})
    assert a["taped"].cassette == "tests/cassettes"


def test_unset_keys_read_as_the_runtimes_defaults(built):
    a = built.agents
    sonnet, gpt, codex, sim = a["sonnet"], a["gpt"], a["codex"], a["sim"]
    assert (sonnet.api_key_env, sonnet.max_tokens, sonnet.output_cap, sonnet.stream, sonnet.cache_ttl) == (
        "ANTHROPIC_API_KEY", None, 8192, None, "5m")
    assert (gpt.api_key_env, gpt.stream, gpt.structured, gpt.tier) == ("OPENAI_API_KEY", False, "json_schema",
                                                                      "balanced")
    assert (codex.permissions, codex.command, codex.env, codex.pass_env, codex.api_key_env) == (
        "read-only", None, {}, (), None)
    assert codex.call_timeout == CommandConfig.DEFAULT_TIMEOUT == a["script"].DEFAULT_TIMEOUT
    assert (sim.invalid_first, sim.fail_rate, sim.progress, sim.complete_after, sim.seed) == (0, 0.0, "steady", 0, 0)
    assert a["taped"].price is None and a["taped"].limits.concurrency is None


def test_api_key_env_null_survives_the_build_as_no_key(built, tmp_path):
    """`api_key_env: null` (a keyless local server) was left out of plan.json, so the run
    asked for OPENAI_API_KEY; it is kept, and read as no key."""
    assert built.agents["local"].api_key_env is None
    assert providers.key_envs({"local": built.agents["local"]}) == set()


def test_a_record_reads_like_the_mapping_it_came_from_and_is_frozen():
    config = agent_config("a", {"provider": "anthropic", "model": "m", "latency": 0.5})
    assert config["model"] == config.get("model") == "m"
    assert config.get("latency") is None  # a simulate key on an API agent: never read, left out
    assert "latency" not in config and dict(config)["provider"] == "anthropic"
    with pytest.raises(AttributeError):
        config.model = "other"  # type: ignore[misc]


def test_every_key_harness_yaml_allows_on_an_agent_is_read_by_some_kind():
    """A key lint accepts must not make the plan unreadable at run time."""
    assert agent_keys() == set(AgentSpec.model_fields)


@pytest.mark.parametrize("raw, message", [
    ({"provider": "anthropic", "model": "m", "max_tokens": "8k"}, "agent 'a': max_tokens must be an integer, not \"8k\""),
    ({"provider": "openai", "model": "m", "stream": "yes"}, "agent 'a': stream must be true or false, not \"yes\""),
    ({"provider": "codex", "permissions": "root"}, "agent 'a': permissions must be one of read-only, edit, full"),
    ({"provider": "command", "command": "my-agent --go"}, "agent 'a': command must be a list, not \"my-agent --go\""),
    ({"provider": "simulate", "price": {"input": "3$", "output": 1}}, "agent 'a': price.input must be a number"),
    ({"provider": "simulate", "price": {"output": 1}}, "agent 'a': price.input is missing"),
    ({"provider": "simulate", "limits": {"daily_calls": True}}, "agent 'a': limits.daily_calls must be an integer"),
    ({"provider": "command", "command": ["x"], "pass_env": ["OK", 3]}, "agent 'a': pass_env[1] must be a string, not 3"),
    ({"provider": "simulate", "colour": "red"}, "agent 'a': unknown key 'colour'"),
    ({"provider": "gpt"}, "agent 'a': unknown provider \"gpt\" (known: openai, anthropic"),
    ({"model": "m"}, "agent 'a': unknown provider null"),
    (["simulate"], "agent 'a' must be a mapping of settings, not [\"simulate\"]"),
])
def test_a_wrong_value_is_an_error_naming_the_agent_and_key(raw, message):
    with pytest.raises(AgentConfigError) as e:
        agent_config("a", raw)
    assert str(e.value).startswith(message)


def bad_plan(root: Path) -> Path:
    """A project whose plan.json was edited by hand: agent bot's max_tokens is text."""
    write_project(root, [node("a", routing={"agent": "bot"})], agents={"bot": {"provider": "simulate"}})
    path = root / ".harness" / "build" / "plan.json"
    plan = json.loads(path.read_text())
    plan["agents"]["bot"] = {"provider": "anthropic", "model": "claude-sonnet-4-6", "max_tokens": "8k"}
    path.write_text(json.dumps(plan))
    return root


SAID = "plan.json: agent 'bot': max_tokens must be an integer, not \"8k\"; run `harnessc build`"


def test_a_hand_written_plan_with_a_wrong_type_is_one_clear_error(tmp_path: Path):
    with pytest.raises(PlanError) as e:
        load_plan(bad_plan(tmp_path))
    assert str(e.value).endswith(SAID)


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_commands_say_what_is_wrong_with_a_hand_written_plan(tmp_path: Path, command):
    """Each says so in one line, then rebuilds the plan from the specs (as for any plan it cannot read)."""
    r = virtual.harnessc(bad_plan(tmp_path), command)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and SAID in out, out
