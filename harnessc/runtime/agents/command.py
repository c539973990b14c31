"""command: any CLI agent (claude, codex, a script) run as a subprocess in the project dir.

argv placeholders: {prompt} (the prompt text) and {prompt_file} (a temporary file holding
it); with neither, the prompt goes to stdin. stdout is the response; a non-zero exit is a
failed call with stderr kept. The agent's environment is procs.child_env: the base list,
the variables named in `pass_env:`, the values in `env:`, and HARNESSC_TASK/HARNESSC_ITERATION/
HARNESSC_PURPOSE (`task`, or `mutation`/`summary` when it writes for a stuck or long loop task,
`draft` when it drafts specs for `harnessc draft`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ...estimates import estimate_tokens
from ...providers import CommandConfig, ProgramConfig
from ..children import procs, sandbox
from .base import AgentError, Request, Response, Usage, priced


class SubprocessAgent:
    """An agent that runs a program per call (the command agent, the CLI agents in cli.py)."""

    def __init__(self, name: str, config: ProgramConfig, root: Path):
        self.name = name
        self.config = config
        self.root = root

    def timeout(self, request: Request) -> float:
        """The agent's `timeout:`, bounded by what the task has left."""
        timeout = self.config.call_timeout
        return min(timeout, request.timeout) if request.timeout is not None else timeout

    async def run(self, argv: list[str], request: Request, env: dict[str, str],
                  stdin: bytes | None, timed_out_kind: str = "failed") -> procs.ProcResult:
        """Run one call's process; a process that never started or timed out is an AgentError."""
        # Let scripts know which task and iteration they serve (no secrets in these).
        env["HARNESSC_TASK"] = request.task_id
        env["HARNESSC_ITERATION"] = str(request.iteration)
        env["HARNESSC_PURPOSE"] = request.purpose
        if request.approach is not None:
            env["HARNESSC_APPROACH"] = str(request.approach)
        timeout = self.timeout(request)
        if self.config.sandbox:
            why = sandbox.problem()
            if why:  # never run without it
                raise AgentError(f"agent '{self.name}' asks for the sandbox, and {why} ({sandbox.HINT})",
                                 kind="invalid_request")
            with sandbox.Call(self.root, request.workdir) as jail:
                wrapped = jail.wrap(argv, env, self.sandbox_writable(), read_only=self.read_only())
                res = await procs.run(wrapped, cwd=request.workdir or self.root, timeout=timeout, stdin=stdin,
                                      env=env, on_line=request.on_line)
            res.argv = list(argv)  # messages name the agent's program, not bwrap
        else:
            res = await procs.run(argv, cwd=request.workdir or self.root, timeout=timeout, stdin=stdin, env=env,
                                  on_line=request.on_line)
        if res.error:
            raise AgentError(f"agent '{self.name}': {res.error}")
        if res.timed_out:
            cut_by_task = request.timeout is not None and timeout >= request.timeout
            raise AgentError(f"agent '{self.name}': {res.describe()}"
                             + (" at the time its task had left of max_time" if cut_by_task else ""),
                             kind="timeout" if cut_by_task else timed_out_kind, stderr=res.stderr[-4000:])
        return res

    def sandbox_writable(self) -> tuple[Path, ...]:
        """Directories besides its checkout and TMPDIR the agent may write under the sandbox
        (a CLI's own state directory); none for a command agent."""
        return ()

    def read_only(self) -> bool:
        """Under the sandbox, whether the checkout is read-only too (a read-only CLI)."""
        return False


def full_prompt(request: Request) -> str:
    """The system prompt and the task prompt as one text, for programs that take one."""
    return (request.system + "\n\n" + request.prompt) if request.system else request.prompt


class CommandAgent(SubprocessAgent):
    def __init__(self, name: str, config: CommandConfig, root: Path):
        super().__init__(name, config, root)
        if not config.command:
            raise AgentError(f"agent '{name}': provider command needs `command:` (an argv list)")
        self.argv = list(config.command)

    async def call(self, request: Request) -> Response:
        prompt = full_prompt(request)
        uses_file = any("{prompt_file}" in a for a in self.argv)
        uses_text = any("{prompt}" in a for a in self.argv)
        tmp = None
        try:
            if uses_file:
                fd, tmp = tempfile.mkstemp(prefix="harnessc-prompt-", suffix=".md")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(prompt)
            argv = [a.replace("{prompt_file}", tmp or "").replace("{prompt}", prompt)
                    for a in self.argv]
            env = procs.child_env(self.config.pass_env, self.config.env)
            stdin = None if (uses_file or uses_text) else prompt.encode("utf-8")
            res = await self.run(argv, request, env, stdin)
        finally:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        if res.returncode != 0:
            tail = res.stderr.strip()[-2000:]
            msg = f"agent '{self.name}': {res.describe()}"
            if tail:
                msg += f"; stderr: {tail}"
            raise AgentError(msg, stderr=res.stderr[-4000:])
        usage = Usage(estimate_tokens(prompt), estimate_tokens(res.stdout))
        cost, source = priced(self.config, usage)  # tokens estimated from the text sizes
        cut = (f"the output was over the {procs.MAX_OUTPUT:,}-byte cap: only its first "
               f"{procs.MAX_OUTPUT:,} bytes were kept") if res.stdout_truncated else None
        return Response(text=res.stdout, usage=usage, cost_usd=cost, cost_source=source,
                        latency=res.duration, notes=res.notes, truncated=cut)
