"""command: any CLI agent (claude, codex, a script) run as a subprocess in the project dir.

argv placeholders: {prompt} (the prompt text) and {prompt_file} (a temporary file holding
it); with neither, the prompt goes to stdin. stdout is the response; a non-zero exit is a
failed call with stderr kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ...compiler.argv import split_command
from ...estimates import estimate_tokens
from .. import procs
from .base import AgentError, Request, Response, Usage, price_cost

DEFAULT_TIMEOUT = 1800.0


class CommandAgent:
    def __init__(self, name: str, config: dict, root: Path):
        self.name = name
        self.config = config
        self.root = root
        cmd = config.get("command")
        if not cmd:
            raise AgentError(f"agent '{name}': provider command needs `command:` (an argv list)")
        self.argv = split_command(cmd)

    async def call(self, request: Request) -> Response:
        timeout = float(self.config.get("timeout") or DEFAULT_TIMEOUT)
        if request.timeout is not None:
            timeout = min(timeout, request.timeout)
        prompt = (request.system + "\n\n" + request.prompt) if request.system else request.prompt
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
            env = procs.clean_env(self.config.get("env"))
            # Let scripts know which task and iteration they serve (no secrets in these).
            env["HARNESSC_TASK"] = request.task_id
            env["HARNESSC_ITERATION"] = str(request.iteration)
            stdin = None if (uses_file or uses_text) else prompt.encode("utf-8")
            res = await procs.run(argv, cwd=self.root, timeout=timeout, stdin=stdin, env=env)
        finally:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        if res.error:
            raise AgentError(f"agent '{self.name}': {res.error}")
        if res.timed_out:
            raise AgentError(f"agent '{self.name}': {res.describe()}", transient=False,
                             stderr=res.stderr[-4000:])
        if res.returncode != 0:
            tail = res.stderr.strip()[-2000:]
            msg = f"agent '{self.name}': {res.describe()}"
            if tail:
                msg += f"; stderr: {tail}"
            raise AgentError(msg, stderr=res.stderr[-4000:])
        usage = Usage(estimate_tokens(prompt), estimate_tokens(res.stdout))
        return Response(text=res.stdout, usage=usage, cost_usd=price_cost(self.config, usage),
                        latency=res.duration, notes=res.notes)
