"""claude-code, codex, gemini-cli: the coding CLIs as agents, with argv built here.

Each CLI runs headless through SubprocessAgent (argv list, timeout, process-group kill),
asked for JSON output, with its own retries turned down where it allows it so harnessc's
retry loop is the only one. Its output is read by cli_output.py. `command:` replaces the
executable (e.g. [npx, "@openai/codex"]); the rest of the argv is still built here.

PERMISSIONS is the one table of what `permissions:` means for each CLI (docs/providers.md).
ENV_VARS names, per CLI, the only variables of ours it receives besides procs' base set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ...providers import CliConfig
from ..children import procs
from .base import CLI, AgentError, Request, Response, Usage, priced
from .cli_output import Answer, Failure, parse_claude, parse_codex, parse_gemini
from .command import SubprocessAgent, full_prompt

PERMISSIONS: dict[str, dict[str, list[str]]] = {
    "claude-code": {
        "read-only": ["--permission-mode", "plan"],
        "edit": ["--permission-mode", "acceptEdits"],
        # refused as root unless IS_SANDBOX=1 is exported (we never set it: see parse_claude)
        "full": ["--dangerously-skip-permissions"],
    },
    "codex": {
        "read-only": ["-s", "read-only", "-c", 'approval_policy="never"'],
        "edit": ["-s", "workspace-write", "-c", 'approval_policy="never"'],
        "full": ["-s", "danger-full-access", "-c", 'approval_policy="never"'],
    },
    "gemini-cli": {
        "read-only": ["--approval-mode", "plan"],
        "edit": ["--approval-mode", "auto_edit"],
        "full": ["--approval-mode", "yolo"],
    },
}

ENV_VARS: dict[str, tuple[str, ...]] = {
    "claude-code": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                    "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR", "IS_SANDBOX"),
    "codex": ("CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"),
    "gemini-cli": ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                   "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI",
                   "GOOGLE_APPLICATION_CREDENTIALS", "GEMINI_CLI_TRUST_WORKSPACE"),
}

_REFUSED = re.compile(r"connection refused|econnrefused", re.IGNORECASE)

# Linux refuses a single argument over 128 KiB; longer prompts go through stdin.
_MAX_ARG = 100_000
# Claude Code reads --json-schema only as JSON text (no file form, 2.1.332): a schema too long
# for one argument goes to the prompt on stdin instead (the answer is still checked locally).
SCHEMA_IN_PROMPT = ("\n\n## Output schema\n\nAnswer with one JSON object that validates against this JSON "
                    "Schema (too long for --json-schema, so it is given here):\n\n```json\n{schema}\n```\n")


class CliAgent(SubprocessAgent):
    """One headless CLI; subclasses say its executable, argv and how to read its output."""

    provider = ""
    executable = ""

    config: CliConfig

    def __init__(self, name: str, config: CliConfig, root: Path):
        super().__init__(name, config, root)
        self.base_argv = list(config.command) if config.command else [self.executable]
        self.permissions = config.permissions

    def env(self) -> dict[str, str]:
        """The child environment: procs' base list, `pass_env:`, this CLI's variables, then `env:`."""
        source = procs.forwarded_env()
        extra = {k: source[k] for k in ENV_VARS[self.provider] if k in source}
        key_env = self.config.api_key_env
        if key_env and key_env in source:  # the key the user named, under the CLI's name
            extra[self.key_variable()] = source[key_env]
        extra.update(self.settings_env())
        extra.update(self.config.env)
        return procs.child_env(self.config.pass_env, extra)

    def key_variable(self) -> str:
        return ENV_VARS[self.provider][0]

    def settings_env(self) -> dict[str, str]:
        """Variables harnessc sets for this CLI (retries off, base URL)."""
        return {}

    def argv(self, request: Request, prompt: str, schema_file: str | None) -> tuple[list[str], bytes | None]:
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str, rc: int | None) -> Answer | Failure:
        raise NotImplementedError

    def schema(self, request: Request) -> dict | None:
        """The schema this CLI is given: its own subset of the contract's (providers/), None
        when it takes none or the contract has no output."""
        entry = request.wire_schema(self.provider)
        return entry.get("schema") if request.output_schema is not None else None

    async def call(self, request: Request) -> Response:
        prompt = full_prompt(request)
        schema = self.schema(request)
        schema_file = None
        try:
            if schema is not None and self.provider == "codex":  # codex reads it from a file
                fd, schema_file = tempfile.mkstemp(prefix="harnessc-schema-", suffix=".json")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(schema, f)
            argv, stdin = self.argv(request, prompt, schema_file)
            env = self.env()
            res = await self.run(argv, request, env, stdin, timed_out_kind="timeout")
        finally:
            if schema_file:
                try:
                    os.unlink(schema_file)
                except OSError:
                    pass
        outcome = self.parse(res.stdout, res.stderr, res.returncode)
        refused = self.own_sandbox_refused(res.stderr, env)
        if refused and not isinstance(outcome, Failure):
            outcome = Failure("invalid_request", refused, spent=outcome)
        if isinstance(outcome, Failure):
            raise self.error(outcome, res.stderr)
        return Response(text=outcome.text, latency=res.duration, notes=res.notes + outcome.notes,
                        denials=outcome.denials, tool_calls=outcome.tool_calls, **self.charge(outcome))

    def own_sandbox_refused(self, stderr: str, env: dict[str, str]) -> str | None:
        """Why the CLI's own sandbox ran none of its commands, seen after the call (None: no
        sign of it)."""
        return None

    def read_only(self) -> bool:
        """Under harnessc's sandbox: `permissions: read-only` leaves the checkout read-only too."""
        return self.permissions == "read-only"

    def state_dir(self, env: dict[str, str]) -> Path | None:
        """The CLI's own state directory (sessions, logs, login), writable under harnessc's sandbox."""
        return None

    def sandbox_writable(self) -> tuple[Path, ...]:
        state = self.state_dir(self.env())
        if state is None:
            return ()
        try:  # the CLI would make it itself; under the sandbox its HOME is read-only
            state.mkdir(parents=True, exist_ok=True)
        except OSError:
            return ()
        return (state,)

    def charge(self, used: Answer) -> dict:
        """Usage, cost and its source: the CLI's own cost when it reports one, else `price:`."""
        usage = Usage(used.input_tokens, used.output_tokens, used.cache_read_tokens,
                      used.cache_write_tokens, used.reasoning_tokens)
        if used.cost_usd is not None:
            return {"usage": usage, "cost_usd": used.cost_usd, "cost_source": CLI}
        cost, source = priced(self.config, usage)
        return {"usage": usage, "cost_usd": cost, "cost_source": source, "unreported": used.unreported}

    def error(self, failure: Failure, stderr: str) -> AgentError:
        message = f"agent '{self.name}' ({self.provider}): {failure.kind}: {failure.message}"
        # a refused connection: the CLI's server is down or its base_url is wrong (errors.py)
        unreachable = failure.kind == "connection" and bool(_REFUSED.search(failure.message))
        if failure.kind == "connection" and self.config.base_url:
            message += f" (base_url {self.config.base_url})"
        return AgentError(message, kind=failure.kind, retry_after=failure.retry_after,
                          reset_at=failure.reset_at, stderr=stderr[-4000:], unreachable=unreachable,
                          **(self.charge(failure.spent) if failure.spent else {}))


class ClaudeCodeAgent(CliAgent):
    provider = "claude-code"
    executable = "claude"

    def settings_env(self) -> dict[str, str]:
        env = {"CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_AUTOUPDATER": "1",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        if self.config.base_url:
            env["ANTHROPIC_BASE_URL"] = self.config.base_url
        if self.config.sandbox:  # it is: claude then accepts `full` as root
            env["IS_SANDBOX"] = "1"
        return env

    def state_dir(self, env):
        return _home_dir(env, "CLAUDE_CONFIG_DIR", ".claude")

    def argv(self, request, prompt, schema_file):
        argv = self.base_argv + ["-p", "--output-format", "json"]
        if self.config.model:
            argv += ["--model", self.config.model]
        schema = self.schema(request)
        if schema is not None:
            text = json.dumps(schema, separators=(",", ":"))
            if len(text.encode("utf-8")) <= _MAX_ARG:
                argv += ["--json-schema", text]
            else:
                prompt += SCHEMA_IN_PROMPT.format(schema=text)
        argv += PERMISSIONS[self.provider][self.permissions]
        return argv, prompt.encode("utf-8")  # `claude -p` reads the prompt from stdin

    def parse(self, stdout, stderr, rc):
        return parse_claude(stdout, stderr, rc)


class CodexAgent(CliAgent):
    provider = "codex"
    executable = "codex"

    def schema(self, request: Request) -> dict | None:
        # Codex sends the schema as strict json_schema: only the OpenAI strict subset works,
        # and a contract that has none is left to the prompt's description (still checked).
        entry = request.wire_schema(self.provider)
        return entry["schema"] if request.output_schema is not None and entry.get("strict") else None

    def argv(self, request, prompt, schema_file):
        argv = self.base_argv + ["exec", "--json", "--skip-git-repo-check", "--ephemeral"]
        if self.config.model:
            argv += ["-m", self.config.model]
        if schema_file:
            argv += ["--output-schema", schema_file]
        if self.config.sandbox:
            # harnessc's sandbox replaces Codex's own (its bubblewrap cannot start inside ours:
            # every capability is dropped); read-only is a read-only checkout there.
            argv += ["--dangerously-bypass-approvals-and-sandbox"]
        else:
            argv += PERMISSIONS[self.provider][self.permissions]
        if self.config.base_url:
            # A custom provider is the only way to turn Codex's own retries off (the built-in
            # one made 30 requests for one 500).
            p = "model_providers.harnessc"
            env_key = self.config.api_key_env or "OPENAI_API_KEY"
            argv += ["-c", 'model_provider="harnessc"', "-c", f'{p}.name="harnessc"',
                     "-c", f"{p}.base_url={json.dumps(self.config.base_url)}",
                     "-c", f"{p}.env_key={json.dumps(env_key)}",
                     "-c", f'{p}.wire_api="responses"', "-c", f"{p}.supports_websockets=false",
                     "-c", f"{p}.request_max_retries=0", "-c", f"{p}.stream_max_retries=0"]
        return argv + ["-"], prompt.encode("utf-8")  # "-": the prompt comes from stdin

    def env(self) -> dict[str, str]:
        env = super().env()
        key_env = self.config.api_key_env
        source = procs.forwarded_env()
        if self.config.base_url and key_env and key_env in source:
            env[key_env] = source[key_env]  # the custom provider reads it by this name
        return env

    def parse(self, stdout, stderr, rc):
        return parse_codex(stdout, stderr, rc)

    def state_dir(self, env):
        return _home_dir(env, "CODEX_HOME", ".codex")

    def own_sandbox_problem(self) -> str | None:
        """Before any call (`doctor`): why Codex's own sandbox would run no command here, as
        own_sandbox_refused finds it after a call (None: no reason to think so)."""
        if self.config.sandbox or self.permissions == "full":
            return None
        env = self.env()
        bwrap = shutil.which("bwrap", path=env.get("PATH", os.defpath))
        home = self.state_dir(env)
        tmp = Path(env.get("TMPDIR") or "/tmp").resolve()  # Rust's temp_dir(), as Codex reads it
        if bwrap is None or home is None or not home.is_relative_to(tmp):
            return None
        return (f"its own sandbox would run no command: CODEX_HOME ({home}) is under the temporary "
                f"directory and {bwrap} is on PATH, so Codex will not create its codex-linux-sandbox "
                "helper (set CODEX_HOME outside the temporary directory, or `sandbox: true`, or "
                "`permissions: full`)")

    def own_sandbox_refused(self, stderr, env):
        # Codex (0.171) runs each command of `-s read-only|workspace-write` through bubblewrap:
        # a `bwrap` on PATH first, its bundled one else. The system bwrap execs the helper
        # `codex-linux-sandbox` by name, from PATH aliases Codex makes under CODEX_HOME, and
        # it refuses to make them when CODEX_HOME is under the temporary directory. Then
        # every command fails ("bwrap: execvp codex-linux-sandbox: No such file or
        # directory"), the model is told so, and codex still exits 0 (with bwrap moved
        # aside, its bundled bwrap needs no alias: it worked).
        if self.config.sandbox or self.permissions == "full" or "could not create PATH aliases" not in stderr:
            return None
        bwrap = shutil.which("bwrap", path=env.get("PATH", os.defpath))
        if bwrap is None:
            return None
        home = self.state_dir(env)
        return (f"codex's own sandbox ran no command: with {bwrap} on PATH it needs its helper "
                f"codex-linux-sandbox, which it would not create with CODEX_HOME ({home}) under the "
                "temporary directory, so every command failed though codex exited 0 (set CODEX_HOME "
                "outside the temporary directory, or `sandbox: true`: harnessc's sandbox replaces "
                "Codex's own, or `permissions: full`)")


class GeminiCliAgent(CliAgent):
    provider = "gemini-cli"
    executable = "gemini"

    def settings_env(self) -> dict[str, str]:
        if self.config.base_url:
            return {"GOOGLE_GEMINI_BASE_URL": self.config.base_url}
        return {}

    def argv(self, request, prompt, schema_file):
        # gemini appends stdin to -p; a prompt too long for one argument goes there instead
        long = len(prompt.encode("utf-8")) > _MAX_ARG
        argv = self.base_argv + ["-p", " " if long else prompt, "-o", "json"]
        if self.config.model:
            argv += ["-m", self.config.model]
        argv += ["--skip-trust"] + PERMISSIONS[self.provider][self.permissions]
        return argv, (prompt.encode("utf-8") if long else None)

    def state_dir(self, env):
        return _home_dir(env, None, ".gemini")

    def parse(self, stdout, stderr, rc):
        outcome = parse_gemini(stdout, stderr, rc)
        if (isinstance(outcome, Failure) and outcome.kind == "auth" and self.config.base_url
                and "invalid auth method" in outcome.message.lower()):
            # Seen with gemini 0.61: GOOGLE_GEMINI_BASE_URL alone selects its "gateway" auth,
            # which headless mode rejects; only a settings file can choose the API key instead.
            outcome.message += (" (with base_url, gemini needs `\"security\": {\"auth\": {\"selectedType\":"
                                " \"gemini-api-key\"}}` in ~/.gemini/settings.json and GEMINI_API_KEY set)")
        return outcome


def _home_dir(env: dict[str, str], variable: str | None, default: str) -> Path | None:
    """A CLI's state directory: `variable` when set, else `default` in the HOME it gets."""
    if variable and env.get(variable):
        return Path(env[variable]).resolve()
    return (Path(env["HOME"]) / default).resolve() if env.get("HOME") else None


CLI_AGENTS = {cls.provider: cls for cls in (ClaudeCodeAgent, CodexAgent, GeminiCliAgent)}
