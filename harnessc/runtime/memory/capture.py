"""What an agent tells memory: `<decision>...</decision>`,
`<failure cause="..." fix="...">...</failure>` and `<constraint expires="...">...</constraint>`
markers in its text (attributes optional), and the `decisions` / `failures` / `constraints`
fields of its validated output (a contract that declares them): each a list whose items are a
string (the text) or an object {text, files?: [paths], and cause?/fix? (failures) or
expires? (constraints)}; an item's `files` replace the task's own. A constraint's `expires` is an ISO date or time (UTC), a
duration from now (`30m`, `12h`, `3d`) or `run` (until this run ends); anything else: no
expiry, the text kept as said."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

from .. import clock

MARKER = re.compile(r"<(decision|failure|constraint)((?:\s+[a-z_]+\s*=\s*\"[^\"]*\")*)\s*>(.*?)</\1\s*>",
                    re.S | re.I)
ATTR = re.compile(r"([a-z_]+)\s*=\s*\"([^\"]*)\"", re.I)
DURATION = re.compile(r"^(\d+)\s*([mhd])$")
TEXT_CHARS = 300  # of one entry's text
MAX_PER_TEXT = 20  # entries one answer may add


def clip(text: str, n: int = TEXT_CHARS) -> str:
    text = " ".join(html.unescape(str(text)).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def expiry(raw: str, now: datetime | None = None) -> str | None:
    """`expires` as the store keeps it: an ISO time in UTC, "run", or None (none / not understood)."""
    raw = raw.strip()
    now = now or datetime.fromtimestamp(clock.time(), timezone.utc)  # the runtime's clock (a test's virtual one)
    if raw.lower() == "run":
        return "run"
    m = DURATION.match(raw.lower())
    if m:
        k, unit = int(m.group(1)), m.group(2)
        delta = {"m": timedelta(minutes=k), "h": timedelta(hours=k), "d": timedelta(days=k)}[unit]
        return (now + delta).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def markers(text: str, task: str, files: list[str]) -> list[dict]:
    """The entries (unstamped) the markers of `text` make, in order."""
    out: list[dict] = []
    for kind, attrs, body in MARKER.findall(text or ""):
        body = clip(body)
        if not body:
            continue
        a = {k.lower(): clip(v) for k, v in ATTR.findall(attrs)}
        entry = {"kind": kind.lower(), "text": body, "task": task, "files": list(files)}
        if entry["kind"] == "failure":
            entry.update({k: a[k] for k in ("cause", "fix") if a.get(k)})
        elif entry["kind"] == "constraint" and a.get("expires"):
            when = expiry(a["expires"])
            if when:
                entry["expires"] = when
            else:
                entry["text"] = f"{body} (expires: {a['expires']}, not understood: kept until forgotten)"
        out.append(entry)
        if len(out) >= MAX_PER_TEXT:
            break
    return out


FIELDS = {"decisions": "decision", "failures": "failure", "constraints": "constraint"}
MAX_FILES = 20  # an item's files


def fields(output: object, task: str, files: list[str]) -> tuple[list[dict], list[str]]:
    """The entries (unstamped) an output's memory fields make, and what in them was skipped."""
    out: list[dict] = []
    skipped: list[str] = []
    if not isinstance(output, dict):
        return out, skipped
    for field, kind in FIELDS.items():
        items = output.get(field)
        if items is None:
            continue
        if not isinstance(items, list):
            skipped.append(f"{field}: not a list")
            continue
        for i, item in enumerate(items):
            entry = _item(item, kind, task, files)
            if isinstance(entry, str):
                skipped.append(f"{field}[{i}]: {entry}")
            elif entry is not None and len(out) < MAX_PER_TEXT:
                out.append(entry)
    return out, skipped


def _item(item: object, kind: str, task: str, files: list[str]) -> dict | str | None:
    """One item as an entry, None when it says nothing, or why it is not one."""
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        return "not a string or an object with a text"
    text = clip(item["text"])
    if not text:
        return None
    own = item.get("files")
    if own is not None and not (isinstance(own, list) and all(isinstance(f, str) for f in own)):
        return "files: not a list of paths"
    entry = {"kind": kind, "text": text, "task": task,
             "files": [clip(f, 200) for f in own[:MAX_FILES]] if own else list(files)}
    if kind == "failure":
        entry.update({k: clip(item[k]) for k in ("cause", "fix") if isinstance(item.get(k), str) and item[k].strip()})
    elif kind == "constraint" and isinstance(item.get("expires"), str) and item["expires"].strip():
        when = expiry(item["expires"])
        if when:
            entry["expires"] = when
        else:
            entry["text"] = f"{text} (expires: {clip(item['expires'], 40)}, not understood: kept until forgotten)"
    return entry


def rejection(errors: list[str], task: str, files: list[str]) -> dict | None:
    """A rejected attempt's first error as a failure of its task (no cause or fix known)."""
    first = next((e for e in errors if str(e).strip()), None)
    if first is None:
        return None
    return {"kind": "failure", "text": clip(first), "task": task, "files": list(files)}
