"""Notifications: tell someone when a run needs a person (harness.yaml `notify:`).

A store listener after the alerts (alerts.py): the alerts `blocked`, `failed`, `stuck`
(once per task and run), `review`, a critical `budget` alert (a budget stopped work), and
the `run_finished` event become one JSON object each,

    {"run", "task", "kind", "message", "look"}  (+ "outcome", "exit_code" for run_end)

given on stdin to `notify.command` and/or POSTed to `notify.webhook`. `Notifier.send` is
the one emitter: other parts of the runtime call it for their own events.

Nothing here blocks the run: on the run's event loop each event is a task (one at a time,
in order); a command runs through procs.run (process group, bounded output, the child
environment), a webhook POST on a daemon thread. `notify.timeout` bounds all tries of one
event together (a failure is retried at most twice inside it); a command still running
then is killed with its process group. A notifier that fails is an alert
(`notify_failed`), never a failed run. At the end of the run's loop, `settle()` lets the
waiting events go out in order (for up to notify.timeout, then the one in flight ends);
`close()`, after the loop, delivers what is left - run_end, and events not sent yet - all
at once, within one more `notify.timeout`.

The command gets the environment command agents get plus `notify.pass_env`, never a
provider's key; messages pass through the store's redaction first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from ... import providers
from ...wording import command_prefix
from .. import clock
from ..children import procs

TRIES = 3  # the first and at most two retries, all inside notify.timeout
RETRY_PAUSE = 0.5  # seconds before a retry (doubled for the next), never past the deadline
MAX_ANSWER = 64 * 1024  # bytes read of a webhook's answer
MAX_OUTPUT = 4096  # bytes kept of a command's output (the rest is drained and dropped)
MAX_PENDING = 1000  # events waiting; more are dropped (and counted in one alert)
# alert kind -> notify kind ('budget' only when critical: the limit was reached)
ALERTS = {"blocked": "blocked", "failed": "failed", "stuck": "stuck", "review": "review", "budget": "budget"}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer we do not follow: urllib then raises it as an HTTPError."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclasses.dataclass(eq=False)
class _Event:
    payload: dict
    done: set[str] = dataclasses.field(default_factory=set)  # the notifiers that took it (after a cut delivery)


class Notifier:
    """Sends the run's notifications (see the module docstring). Inert when `settings` is None."""

    def __init__(self, settings: dict | None, root: Path, store: Any,
                 alert: Callable[[str, str, str | None, str], None], agents: Any = None):
        self.settings = settings or {}
        self.enabled = bool(settings and (settings.get("command") or settings.get("webhook")))
        self.kinds = set(self.settings.get("on") or ())
        self.timeout = float(self.settings.get("timeout") or 10)
        keys = providers.provider_key_names(agents)
        self.pass_env = [n for n in self.settings.get("pass_env") or () if n not in keys]
        self.root, self.store, self.alert = root, store, alert
        self.look = "harnessc"
        if self.enabled:  # `harnessc -C DIR` when the run was started elsewhere

            self.look = command_prefix(root)
        self.pending: list[_Event] = []  # events not delivered yet (a cut delivery stays)
        self.tasks: set[asyncio.Task] = set()
        self.serial: asyncio.Lock | None = None  # one event at a time, in order, on the run's loop
        self.dropped = 0
        self.closing = False  # the run's loop is ending: no new delivery starts on it
        self.stuck_sent: set[str | None] = set()

    # ------------------------------------------------------------------ what is sent

    def on_event(self, ev: dict) -> None:
        """The store listener: alerts and the run's end, as notifications."""
        if not self.enabled:
            return
        kind = ev.get("kind")
        if kind == "alert":
            mapped = ALERTS.get(str(ev.get("alert")))
            if mapped == "budget" and ev.get("level") != "critical":
                return  # 50% and 80% are for alerts.log; a notification is for a stop
            if mapped == "stuck":  # once per task and run: every stuck iteration is in alerts.log
                if ev.get("task") in self.stuck_sent:
                    return
                self.stuck_sent.add(ev.get("task"))
            if mapped:
                self.send(mapped, ev.get("task"), str(ev.get("message") or ""))
        elif kind == "run_finished":
            why = ev.get("message") or ""
            self.send("run_end", None, f"run {ev.get('status')}" + (f": {why}" if why else ""),
                      outcome=ev.get("status"), exit_code=ev.get("exit_code"))

    def send(self, kind: str, task: str | None, message: str, **extra: Any) -> None:
        """Notify of one event of `kind` (one of NOTIFY_KINDS) if `notify.on` lists it. Returns
        at once: on the run's event loop, the event is delivered by a task (in order, one at a
        time); outside it (run_end comes after the loop), by close()."""
        if not self.enabled or kind not in self.kinds:
            return
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        look = f"{self.look} show {task}" if task else f"{self.look} status"
        payload = {"run": self.store.run_id, "task": task, "kind": kind,
                   "message": self.store.redact(message), "look": look, **extra}
        event = _Event(payload)
        self.pending.append(event)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self.closing:
            return
        if self.serial is None:
            self.serial = asyncio.Lock()
        task_ = loop.create_task(self._in_turn(event))
        self.tasks.add(task_)
        task_.add_done_callback(self.tasks.discard)

    async def settle(self) -> None:
        """At the end of the run's loop: the events waiting are delivered in order for up to
        notify.timeout; then none starts (close() sends what is left, at once) and the one in
        flight ends within its own deadline. Never cancelled as it starts: cancelling a command
        while it is being spawned can hang asyncio's shutdown (once started, it kills its group)."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=self.timeout)
        self.closing = True
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=self.timeout + procs.KILL_GRACE + 5)
        for task in list(self.tasks):
            task.cancel()

    def close(self) -> None:
        """At the run's end (its event loop is over): deliver what is pending - run_end, and
        events whose delivery the loop's end cut - all at once, within notify.timeout."""
        if not self.enabled:
            return
        pending, self.pending = self.pending, []
        if pending:
            deadline = clock.monotonic() + self.timeout
            with procs.child_watching():  # as a run's loop watches its children
                asyncio.run(self._all(pending, deadline))
        if self.dropped:
            self.alert("warning", "notify_failed", None,
                       f"{self.dropped} notification(s) not sent: over {MAX_PENDING} were waiting")
            self.dropped = 0

    # ------------------------------------------------------------------ delivering

    async def _in_turn(self, event: _Event) -> None:
        """One event on the run's loop, after those before it, within notify.timeout from its turn."""
        async with self.serial:
            if self.closing:
                return  # close() sends it
            await self._deliver(event, clock.monotonic() + self.timeout)
        self.pending.remove(event)  # not when cancelled: close() delivers it then

    async def _all(self, pending: list[_Event], deadline: float) -> None:
        await asyncio.gather(*(self._deliver(event, deadline) for event in pending))

    async def _deliver(self, event: _Event, deadline: float) -> None:
        """Every notifier of one event, tried up to TRIES times before `deadline`; a failure is
        an alert. A notifier that took the event is not given it again (after a cut delivery)."""
        payload = event.payload
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        for name, attempt in (("command", self._command), ("webhook", self._post)):
            if not self.settings.get(name) or name in event.done:
                continue
            why, tries, pause = "", 0, RETRY_PAUSE
            while tries < TRIES:
                tries += 1
                why = await attempt(body, deadline)
                if not why or deadline - clock.monotonic() <= pause:
                    break
                await clock.sleep(pause)
                pause *= 2
            event.done.add(name)
            if why:
                of = f" of {payload['task']}" if payload.get("task") else ""
                self.alert("warning", "notify_failed", payload.get("task"),
                           f"notify {name} failed for {payload['kind']}{of} "
                           f"({tries} tr{'y' if tries == 1 else 'ies'}): {why}")

    async def _command(self, body: bytes, deadline: float) -> str:
        """'' when the command took the event, else what went wrong."""
        left = deadline - clock.monotonic()
        if left <= 0:
            return "no time left (notify.timeout)"
        argv = [str(a) for a in self.settings["command"]]
        result = await procs.run(argv, cwd=self.root, timeout=left, stdin=body,
                                 env=procs.child_env(self.pass_env), max_output=MAX_OUTPUT)
        if result.ok:
            return ""
        said = (result.stderr or result.stdout).strip().splitlines()
        last = f": {said[-1][:200]}" if said and not result.timed_out else ""
        return self.store.redact(result.describe() + last)

    async def _post(self, body: bytes, deadline: float) -> str:
        """_webhook on a daemon thread of its own (urllib blocks; a daemon never delays the exit)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()

        def post() -> None:
            why = self._webhook(body, deadline)
            try:
                loop.call_soon_threadsafe(lambda: answer.done() or answer.set_result(why))
            except RuntimeError:  # the loop is gone: nobody waits any more
                pass

        threading.Thread(target=post, name="harnessc-notify", daemon=True).start()
        try:
            return await asyncio.wait_for(answer, max(0.0, deadline - clock.monotonic()) + 1)
        except TimeoutError:
            return "the webhook did not answer within notify.timeout"

    def _webhook(self, body: bytes, deadline: float) -> str:
        """'' when the webhook answered 2xx, else what went wrong (a redirect is a failure)."""
        left = deadline - clock.monotonic()
        if left <= 0:
            return "no time left (notify.timeout)"
        request = urllib.request.Request(self.settings["webhook"], data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "User-Agent": "harnessc-notify"})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=left) as answer:
                answer.read(MAX_ANSWER)
                return ""
        except urllib.error.HTTPError as e:
            with e:
                e.read(MAX_ANSWER) if e.fp else None
            where = f" to {e.headers.get('Location')}" if 300 <= e.code < 400 and e.headers else ""
            return f"the webhook answered {e.code}{' (a redirect' + where + ', not followed)' if where else ''}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            return f"the webhook could not be reached: {reason}"
