"""harness.yaml `notify:` (issue 27 item 2), with real runs (in this process: in virtual time,
or on the real clock beside the webhook's server thread), real notifier processes and a
real HTTP server on 127.0.0.1: one JSON object per event to a command (stdin) or a webhook
(POST); no provider key in the notifier's environment and no secret in the payload; a
notifier that hangs, exits 1 or prints 1 GB, and a webhook that redirects or answers 500,
are alerts (retried at most twice within notify.timeout), never a failed run."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import inproc

from . import virtual
from .helpers import CLI, PY, env, node, peak_rss, write_project

SECRET = "sekret-VALUE-4242-notify"
ALL = ["blocked", "failed", "review", "budget", "stuck", "run_end"]
# a notifier: appends {"payload": its stdin's JSON, "env": its environment} to the file argv[1]
RECORDER = ("import json, os, sys\n"
            "payload = json.load(sys.stdin)\n"
            "with open(sys.argv[1], 'a') as f:\n"
            "    f.write(json.dumps({'payload': payload, 'env': dict(os.environ)}) + '\\n')\n")


def with_notify(root: Path, **settings) -> None:
    """Set harness.yaml's `notify:` in the plan.json write_project wrote (as a build would)."""
    path = root / ".harness" / "build" / "plan.json"
    plan = json.loads(path.read_text())
    plan["notify"] = {"command": None, "webhook": None, "on": ALL, "timeout": 30, "pass_env": [], **settings}
    path.write_text(json.dumps(plan))


def failing_project(root: Path, **notify) -> None:
    """Task `bad` fails (its command agent prints a secret it was passed, exits 1); `good` succeeds."""
    script = ("import os, sys; sys.stdin.read(); "
              "print('boom', os.environ['NOTIFY_TEST_API_KEY'], file=sys.stderr); sys.exit(1)")
    write_project(root, [node("bad", routing={"agent": "cmd", "chain": ["cmd"]}, retry={"max_retries": 0}),
                         node("good")],
                  agents={"rehearsal": {"provider": "simulate"},
                          "cmd": {"provider": "command", "command": [PY, "-c", script],
                                  "pass_env": ["NOTIFY_TEST_API_KEY"]}})
    with_notify(root, **notify)


def run_env(**extra) -> dict:
    return env(NOTIFY_TEST_API_KEY=SECRET, ANTHROPIC_API_KEY="sk-ant-" + SECRET, OPENAI_API_KEY="sk-" + SECRET,
               **extra)


def recorded(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def alerts(root: Path, kind: str = "notify_failed") -> list[dict]:
    lines = (root / ".harness" / "alerts.log").read_text().splitlines()
    return [a for a in map(json.loads, lines) if a["kind"] == kind]


def test_a_command_notifier_gets_one_json_object_per_event_without_a_key_or_secret(tmp_path):
    out = tmp_path / "got.jsonl"
    failing_project(tmp_path, command=[PY, "-c", RECORDER, str(out)],
                    pass_env=["NOTIFY_EXTRA", "ANTHROPIC_API_KEY"])  # lint refuses the key (HC444); run drops it
    r = virtual.harnessc(tmp_path, "run", env=run_env(NOTIFY_EXTRA="extra-value"))
    assert r.returncode == 1, r.stdout + r.stderr
    got = recorded(out)
    assert [g["payload"]["kind"] for g in got] == ["failed", "run_end"]  # one object per event, in order
    failed, end = (g["payload"] for g in got)
    (run_id,) = [d.name for d in (tmp_path / ".harness" / "runs").iterdir()]
    assert failed["run"] == end["run"] == run_id
    assert failed["task"] == "bad" and "failed" in failed["message"] and failed["look"] == "harnessc show bad"
    assert end["task"] is None and end["look"] == "harnessc status"
    assert end["outcome"] == "failed" and end["exit_code"] == r.returncode == 1
    for g in got:
        assert set(g["payload"]) >= {"run", "task", "kind", "message", "look"}
        assert "ANTHROPIC_API_KEY" not in g["env"] and "OPENAI_API_KEY" not in g["env"]
        assert "NOTIFY_TEST_API_KEY" not in g["env"]  # an agent's pass_env is not the notifier's
        assert g["env"]["NOTIFY_EXTRA"] == "extra-value"
    text = out.read_text()
    assert SECRET not in text and "[redacted]" in failed["message"]  # the agent printed it: redacted
    assert alerts(tmp_path) == []


def test_only_the_kinds_in_on_are_sent(tmp_path):
    out = tmp_path / "got.jsonl"
    failing_project(tmp_path, command=[PY, "-c", RECORDER, str(out)], on=["blocked", "run_end"])
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode == 1, r.stdout + r.stderr
    assert [g["payload"]["kind"] for g in recorded(out)] == ["run_end"]


class Hook:
    """An HTTP server on 127.0.0.1: records each POST, answers `status` (a 3xx with a Location)."""

    def __init__(self, status: int = 200, hang: bool = False):
        self.posts: list[tuple[str, dict, bytes]] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hook.lock:
                    hook.posts.append((self.path, dict(self.headers), body))
                if hang:
                    hook.release.wait(300)
                    return
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://127.0.0.1:{hook.port}/elsewhere")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def no_proxy_env(**extra) -> dict:
    """run_env without proxy settings: the webhook is on 127.0.0.1."""
    return {k: v for k, v in run_env(**extra).items() if "proxy" not in k.lower()}


def test_a_webhook_gets_the_same_object_as_a_post(tmp_path):
    with Hook() as hook:
        failing_project(tmp_path, webhook=hook.url)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=no_proxy_env(), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert [p[0] for p in hook.posts] == ["/hook", "/hook"]
    bodies = [json.loads(p[2]) for p in hook.posts]
    assert [b["kind"] for b in bodies] == ["failed", "run_end"]
    assert all(p[1]["Content-Type"] == "application/json" for p in hook.posts)
    assert bodies[1]["exit_code"] == 1 and SECRET not in b"".join(p[2] for p in hook.posts).decode()
    assert alerts(tmp_path) == []


def test_a_webhook_answering_500_is_an_alert_after_at_most_two_retries(tmp_path):
    with Hook(500) as hook:
        failing_project(tmp_path, webhook=hook.url, on=["run_end"])
        r = inproc.harnessc("-C", str(tmp_path), "run", env=no_proxy_env(), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # the task's failure, not the notifier's
    assert 2 <= len(hook.posts) <= 3
    (alert,) = alerts(tmp_path)
    assert "answered 500" in alert["message"] and "run_end" in alert["message"]


def test_a_webhook_that_redirects_is_not_followed_and_is_an_alert(tmp_path):
    with Hook(302) as hook:
        failing_project(tmp_path, webhook=hook.url, on=["run_end"])
        r = inproc.harnessc("-C", str(tmp_path), "run", env=no_proxy_env(), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert {p[0] for p in hook.posts} == {"/hook"} and len(hook.posts) <= 3  # /elsewhere never asked
    (alert,) = alerts(tmp_path)
    assert "302" in alert["message"] and "redirect" in alert["message"]


def test_a_webhook_that_never_answers_is_given_up_at_its_timeout(tmp_path):
    with Hook(hang=True) as hook:
        failing_project(tmp_path, webhook=hook.url, on=["run_end"], timeout=3)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=no_proxy_env(), cwd=tmp_path)  # the server would hang 300 s
    assert r.returncode == 1, r.stdout + r.stderr
    assert len(hook.posts) == 1  # the one try took the whole timeout
    (alert,) = alerts(tmp_path)
    assert "run_end" in alert["message"]


def test_a_notifier_that_exits_1_is_an_alert_after_three_tries(tmp_path):
    tries = tmp_path / "tries"
    script = (f"import sys; sys.stdin.read(); open({str(tries)!r}, 'a').write('x'); "
              "print('no luck', file=sys.stderr); sys.exit(1)")
    write_project(tmp_path, [node("t")])
    with_notify(tmp_path, command=[PY, "-c", script], on=["run_end"])
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode == 0, r.stdout + r.stderr  # a failing notifier never fails the run
    assert tries.read_text() == "xxx"
    (alert,) = alerts(tmp_path)
    assert "exited with 1" in alert["message"] and "no luck" in alert["message"] and "3 tries" in alert["message"]


def test_a_notifier_that_hangs_is_killed_within_its_timeout_and_the_run_ends(tmp_path):
    pids = tmp_path / "pids"
    script = (f"import os, sys, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
              "sys.stdin.read(); time.sleep(300)")
    write_project(tmp_path, [node("t")])
    with_notify(tmp_path, command=[PY, "-c", script], timeout=3, on=["run_end"])
    r = inproc.harnessc("-C", str(tmp_path), "run", env=run_env(), cwd=tmp_path)  # ends though the notifier would sleep 300 s
    assert r.returncode == 0, r.stdout + r.stderr
    (alert,) = alerts(tmp_path)
    assert "timed out" in alert["message"]
    for pid in map(int, pids.read_text().split()):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        stat = Path(f"/proc/{pid}/stat").read_text()  # a zombie nobody reaped yet is gone too
        assert stat.split(") ")[-1].startswith("Z"), f"notifier {pid} still runs"


def test_a_notifier_that_prints_a_gigabyte_costs_no_memory(tmp_path):
    started = tmp_path / "started"
    script = (f"import sys; sys.stdin.read(); open({str(started)!r}, 'w').close(); chunk = b'x' * (1 << 20)\n"
              "for _ in range(1024): sys.stdout.buffer.write(chunk)\n")
    write_project(tmp_path, [node("t")])
    with_notify(tmp_path, command=[PY, "-c", script], timeout=60, on=["run_end"])
    r, peak = peak_rss([*CLI, "-C", str(tmp_path), "run"], tmp_path / "peak.txt", env=run_env(), timeout=180,
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert started.exists()
    assert peak < 400 << 20, f"harnessc's peak memory: {peak >> 20} MiB"  # far less than the gigabyte
    assert all("timed out" in a["message"] for a in alerts(tmp_path))  # took it, or killed at its timeout


def test_a_run_budget_stop_is_one_budget_notification(tmp_path):
    out = tmp_path / "got.jsonl"
    write_project(tmp_path, [node(f"t{i}") for i in range(4)], concurrency=1,
                  agents={"rehearsal": {"provider": "simulate", "price": {"input": 300.0, "output": 1500.0}}},
                  budget={"max_cost_usd": 0.05, "max_tokens": None})
    with_notify(tmp_path, command=[PY, "-c", RECORDER, str(out)])
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode != 0, r.stdout + r.stderr
    kinds = [g["payload"]["kind"] for g in recorded(out)]
    assert kinds.count("budget") == 1 and kinds[-1] == "run_end", kinds
    end = recorded(out)[-1]["payload"]
    assert end["outcome"] == "budget" and end["exit_code"] == r.returncode


def test_the_cookbook_slack_recipe_posts_text_and_lints_clean(tmp_path):
    """docs/cookbook.md recipe 19, as written: its script reformats the object into Slack's
    {"text": ...}; the webhook URL reaches it through pass_env only."""
    import re

    from .helpers import REPO

    section = (REPO / "docs" / "cookbook.md").read_text().split("## 19. ", 1)[1]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    script = next(body for lang, body in blocks if lang == "python" and "SLACK_WEBHOOK_URL" in body)
    yaml_text = next(body for lang, body in blocks if lang == "yaml" and "notify_slack" in body)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "notify_slack.py").write_text(script)
    (tmp_path / "harness.yaml").write_text(yaml_text)
    (tmp_path / "roadmap.md").write_text("## Tasks\n\n- [ ] **t1**: Say hello\n  - accept: true\n")
    lint = inproc.harnessc("-C", str(tmp_path), "lint", cwd=tmp_path)
    assert lint.returncode == 0 and "HC44" not in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    with Hook() as hook:
        assert inproc.harnessc("-C", str(tmp_path), "build", cwd=tmp_path).returncode == 0
        plan = json.loads((tmp_path / ".harness" / "build" / "plan.json").read_text())
        plan["notify"]["command"] = [PY, *plan["notify"]["command"][1:]]  # this interpreter, not python3 on PATH
        (tmp_path / ".harness" / "build" / "plan.json").write_text(json.dumps(plan))
        r = inproc.harnessc("-C", str(tmp_path), "run", env=no_proxy_env(SLACK_WEBHOOK_URL=hook.url), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (post,) = hook.posts
    text = json.loads(post[2])["text"]
    assert text.startswith("*harnessc run_end*") and "harnessc status" in text
    assert alerts(tmp_path) == []


def test_a_stuck_loop_task_notifies_stuck_once_then_its_end(tmp_path):
    out = tmp_path / "got.jsonl"
    write_project(tmp_path, [node("idle", completion_promise="DONE", routing={"agent": "idle"},
                                  limits={"stuck_after": 2})],
                  agents={"idle": {"provider": "simulate", "complete_after": 6, "progress": "none"}},
                  loop={"recovery": {"prompt_mutations": 0, "escalate": False, "human": False}})
    with_notify(tmp_path, command=[PY, "-c", RECORDER, str(out)])
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode == 1, r.stdout + r.stderr
    got = [g["payload"] for g in recorded(out)]
    assert [(g["kind"], g["task"]) for g in got] == [("stuck", "idle"), ("failed", "idle"), ("run_end", None)]
    assert got[0]["message"].startswith("stuck") and got[0]["look"] == "harnessc show idle"
