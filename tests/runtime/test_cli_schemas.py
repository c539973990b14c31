"""What each CLI preset is given as its output schema, checked the way the real CLIs check it.

A contract with rules (which the compiler also writes as keywords and lists under the vendor
key `x-from-rules`), nested objects and lists is sent to fake `claude`, `codex` and `gemini`
executables that refuse what the real ones refuse:

* claude (2.1.332) compiles `--json-schema` with Ajv's draft-07 vocabulary in strict mode:
  any other keyword is `strict mode: unknown keyword: "x-from-rules"` and exit 1, before any
  request (observed by hand with the binary bundled in the claude-agent-sdk wheel);
* codex sends `--output-schema` as strict json_schema, which the API rejects unless every
  object is closed and lists all its properties in `required`;
* gemini has no schema flag.
"""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from pathlib import Path

import pytest
from jsonschema import Draft7Validator

from harnessc.compiler.contract_schema import contract_plan_entry
from harnessc.compiler.ir import Contract
from harnessc.providers import agent_config
from harnessc.runtime.agents.base import Request, make_agent

RULED = Contract.model_validate({
    "description": "a release note",
    "output": {
        "title": {"type": "str", "rules": ["len(value) >= 3", "len(value) <= 80"]},
        "score": {"type": "int", "rules": ["value >= 0", "value <= 10"]},
        "published": {"type": "str", "rules": ["is_datetime(value)"]},
        "tags": {"type": "list", "items": "str", "rules": ["len(value) >= 2"]},
        "author": {"type": "dict", "fields": {
            "name": {"type": "str", "rules": ["len(value) > 0"]},
            "contact": {"type": "dict", "required": False, "fields": {
                "email": {"type": "str", "rules": ["is_email(value)"]}}},
        }},
        "changes": {"type": "list", "items": {"type": "dict", "fields": {
            "file": {"type": "str"},
            "lines": {"type": "int", "rules": ["value >= 1"]},
        }}},
    },
})
ANSWER = {"title": "v2.0", "score": 3, "published": "2026-11-26T10:00:00Z", "tags": ["a", "b"],
          "author": {"name": "Ann"}, "changes": [{"file": "a.py", "lines": 2}]}

# Ajv 8's draft-07 vocabulary (what Claude Code knows), written out here as the fake's own list.
AJV_DRAFT07 = set("""$id $schema $ref $defs definitions $comment type enum const multipleOf maximum
exclusiveMaximum minimum exclusiveMinimum maxLength minLength pattern format maxItems minItems
uniqueItems maxProperties minProperties required nullable items additionalItems contains
dependencies propertyNames properties patternProperties additionalProperties not anyOf oneOf allOf
if then else title description default deprecated readOnly writeOnly examples contentMediaType
contentEncoding""".split())
# What OpenAI's strict json_schema accepts (its structured-output docs).
OPENAI_STRICT = {"type", "description", "title", "enum", "const", "properties", "required",
                 "additionalProperties", "items", "anyOf", "$ref", "$defs", "definitions", "pattern",
                 "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                 "minItems", "maxItems"}

FAKE_CLAUDE = """
import json, sys
argv = sys.argv[1:]
KNOWN = set({known!r})
def keywords(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in KNOWN:
                return k
            inner = v.values() if k in ("properties", "patternProperties", "definitions", "$defs") and isinstance(v, dict) else [v]
            for sub in inner:
                bad = keywords(sub) if isinstance(sub, dict) else next((keywords(s) for s in sub if keywords(s)), None) if isinstance(sub, list) else None
                if bad:
                    return bad
    return None
schema = None
if "--json-schema" in argv:
    schema = json.loads(argv[argv.index("--json-schema") + 1])
    bad = keywords(schema)
    if bad:
        sys.stderr.write('Error: --json-schema is not a valid JSON Schema: strict mode: unknown keyword: "%s"\\n' % bad)
        sys.exit(1)
json.dump({{"argv": argv, "schema": schema}}, open({log!r}, "w"))
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "",
                  "structured_output": {answer!r}, "total_cost_usd": 0.001,
                  "usage": {{"input_tokens": 5, "output_tokens": 5}}}}))
"""

FAKE_CODEX = """
import json, sys
argv = sys.argv[1:]
KNOWN = set({known!r})
def problem(node, path):
    if not isinstance(node, dict):
        return None
    for k in node:
        if k not in KNOWN:
            return "%s: '%s' is not permitted" % (path, k)
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return "%s: 'additionalProperties' is required to be supplied and to be false" % path
        if sorted(node.get("required", [])) != sorted(node.get("properties", {{}})):
            return "%s: 'required' is required to be supplied and to be an array including every key in properties" % path
    for k, v in (node.get("properties") or {{}}).items():
        p = problem(v, path + "." + k)
        if p:
            return p
    for v in ([node["items"]] if isinstance(node.get("items"), dict) else []) + list(node.get("anyOf") or []):
        p = problem(v, path + "[]")
        if p:
            return p
    return None
schema = None
if "--output-schema" in argv:
    schema = json.load(open(argv[argv.index("--output-schema") + 1]))
    p = problem(schema, "context=()") if schema.get("type") == "object" else "root must be an object"
    if p:
        msg = "Invalid schema for response_format 'codex_output_schema': In " + p
        print(json.dumps({{"type": "error", "message": msg}}))
        print(json.dumps({{"type": "turn.failed", "error": {{"message": msg}}}}))
        sys.exit(1)
json.dump({{"argv": argv, "schema": schema}}, open({log!r}, "w"))
print(json.dumps({{"type": "item.completed", "item": {{"id": "i1", "type": "agent_message", "text": json.dumps({answer!r})}}}}))
print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 5, "output_tokens": 5}}}}))
"""

FAKE_GEMINI = """
import json, sys
argv = sys.argv[1:]
json.dump({{"argv": argv, "schema": None}}, open({log!r}, "w"))
print(json.dumps({{"session_id": "g", "response": json.dumps({answer!r}), "stats": {{}}}}))
"""

PRESETS = {"claude-code": ("claude", FAKE_CLAUDE, AJV_DRAFT07), "codex": ("codex", FAKE_CODEX, OPENAI_STRICT),
           "gemini-cli": ("gemini", FAKE_GEMINI, set())}


def fake(directory: Path, provider: str) -> tuple[Path, Path]:
    name, body, known = PRESETS[provider]
    directory.mkdir(parents=True, exist_ok=True)
    script, log = directory / name, directory / f"{name}.seen.json"
    script.write_text(f"#!{sys.executable}\n" + body.format(known=sorted(known), log=str(log), answer=ANSWER),
                      encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def x_keys(value, path="$"):
    """Every key starting with `x-`, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k.startswith("x-"):
                yield f"{path}.{k}"
            yield from x_keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from x_keys(v, f"{path}[{i}]")


def call(provider: str, tmp_path: Path, contract: Contract = RULED):
    exe, log = fake(tmp_path / "bin", provider)
    entry = contract_plan_entry("release", contract)
    assert list(x_keys(entry.json_schema)), "the contract's own schema must carry x-from-rules"
    agent = make_agent("a", agent_config("a", {"provider": provider, "command": [str(exe)]}), tmp_path)
    request = Request(task_id="t", prompt="Write the note.", contract=entry, output_schema=entry.output_schema)
    resp = asyncio.run(agent.call(request))
    return resp, json.loads(log.read_text("utf-8"))


@pytest.mark.parametrize("provider", sorted(PRESETS))
def test_each_cli_preset_gets_only_a_schema_it_accepts(tmp_path, provider):
    resp, seen = call(provider, tmp_path)
    assert json.loads(resp.text) == ANSWER
    assert not list(x_keys(seen["argv"])) and not any("x-from-rules" in a for a in seen["argv"])
    schema = seen["schema"]
    if provider == "gemini-cli":
        assert schema is None  # no schema flag: the prompt describes the format
        return
    assert schema is not None and not list(x_keys(schema))
    Draft7Validator.check_schema(schema)
    assert Draft7Validator(schema).is_valid(ANSWER) or provider == "codex"  # codex: optional -> nullable
    props = schema["properties"]
    if provider == "claude-code":
        # the whole contract, rules as keywords included: Claude Code's validator enforces them
        assert props["score"]["minimum"] == 0 and props["tags"]["minItems"] == 2
        assert props["published"]["format"] == "date-time"
        assert props["author"]["properties"]["contact"]["properties"]["email"]["format"] == "email"
        assert props["changes"]["items"]["properties"]["lines"]["minimum"] == 1
        assert not Draft7Validator(schema).is_valid({**ANSWER, "score": 11})
    else:  # the OpenAI strict subset: closed objects, every property required, rules in descriptions
        assert sorted(props["author"]["required"]) == ["contact", "name"]
        assert "null" in props["author"]["properties"]["contact"]["type"]
        assert "minimum" not in props["score"] and ">= 0" in props["score"]["description"]


def test_codex_gets_no_schema_for_a_contract_strict_mode_cannot_express(tmp_path):
    loose = Contract.model_validate({"output": {"notes": {"type": "list", "rules": ["len(value) >= 1"]},
                                                "meta": {"type": "dict"}}})
    exe, log = fake(tmp_path / "bin", "codex")
    entry = contract_plan_entry("loose", loose)
    agent = make_agent("a", agent_config("a", {"provider": "codex", "command": [str(exe)]}), tmp_path)
    asyncio.run(agent.call(Request(task_id="t", prompt="p", contract=entry, output_schema=entry.output_schema)))
    seen = json.loads(log.read_text("utf-8"))
    assert seen["schema"] is None and "--output-schema" not in seen["argv"]


def test_claude_code_takes_a_free_form_contract_whole(tmp_path):
    loose = Contract.model_validate({"output": {"notes": {"type": "list", "rules": ["len(value) >= 1"]},
                                                "meta": {"type": "dict"}, "anything": {"type": "any"}}})
    resp, seen = call("claude-code", tmp_path, loose)
    props = seen["schema"]["properties"]
    assert props["notes"] == {"type": "array", "minItems": 1}
    assert props["meta"] == {"type": "object"} and props["anything"] == {}
