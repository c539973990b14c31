"""Text harnessc did not write (an agent's stdout and stderr, an API's error message, an
operator's instruction) reaches the terminal with its control characters shown, never
obeyed: no OSC 52 clipboard write, title change or screen erase from `run`'s plain output,
its alerts, `log` or `status`. JSON output keeps the text, escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harnessc.textsafe import _CONTROL, _show, visible

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, node, write_project

# OSC 52 (write "evil" to the clipboard), OSC 0 (window title), CSI 2J (erase the screen),
# the same erase as an 8-bit CSI (U+009B), a bell
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x9b2J\x07"
RAW = ("\x1b", "\x07", "\x9b")

SCRIPT = f"""
import sys
sys.stdout.write({HOSTILE!r} + " out\\n")
sys.stderr.write({HOSTILE!r} + " err\\n")
sys.exit(3)
"""


def _clean(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text[:400])


def test_an_agents_escapes_are_shown_not_obeyed(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(SCRIPT, encoding="utf-8")
    agent = {"provider": "command", "command": [PY, str(tmp_path / "agent.py")]}
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]},
                                  retry={"max_retries": 0})],
                  agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
    assert virtual.harnessc(tmp_path, "tell", "t", HOSTILE + " instruction").returncode == 0
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    _clean(r.stdout + r.stderr)
    assert "^[]52;c;ZXZpbA==^G" in r.stdout  # the agent's stderr, in the failed call's line
    assert "instruction for t: ^[]52" in r.stdout  # the operator's instruction
    for args in (("log", "t"), ("status",)):
        out = virtual.harnessc(tmp_path, *args)
        assert out.returncode == 0, out.stderr
        _clean(out.stdout + out.stderr)
    log = virtual.harnessc(tmp_path, "log", "t").stdout
    assert "^[]0;pwned^G^[[2J\\x9b2J" in log
    alerts = (tmp_path / ".harness" / "alerts.log")
    if alerts.exists():
        _clean(alerts.read_text(encoding="utf-8"))
    attempts = json.loads(virtual.harnessc(tmp_path, "log", "t", "--output", "json").stdout)
    assert any(HOSTILE in (a["errors"][0] if a["errors"] else "") for a in attempts)  # JSON keeps it


def test_alerts_log_escapes_every_control_character(tmp_path: Path) -> None:
    from harnessc.textsafe import json_text

    line = json_text({"message": HOSTILE}, ensure_ascii=False)
    _clean(line)
    assert json.loads(line)["message"] == HOSTILE


def test_visible() -> None:
    assert visible("a\x1b[2Jb\x9bc\x07\td\r\ne\rf\x7f") == "a^[[2Jb\\x9bc^G\td\ne^Mf^?"
    assert visible("plain text, ünïcode ✓\n") == "plain text, ünïcode ✓\n"
    assert visible("a\u202egnp.exe\u2066b\u2069") == "a\\u202egnp.exe\\u2066b\\u2069"  # bidi controls shown


@given(st.text() | st.text(alphabet=st.characters(max_codepoint=0xA0)) | st.text(alphabet="ab\r\n\t\x1b\x7f\u202e"))
def test_visible_is_its_pattern_on_every_text(text: str) -> None:
    """A printable ASCII text is returned as it is (no pattern run on it): the same as the pattern."""
    assert visible(text) == _CONTROL.sub(_show, text.replace("\r\n", "\n"))
    assert re.fullmatch("[ -~]*", text) is None or visible(text) is text
