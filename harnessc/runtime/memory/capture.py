"""What an agent's text tells memory: `<decision>...</decision>`,
`<failure cause="..." fix="...">...</failure>` and `<constraint expires="...">...</constraint>`
markers (attributes optional). A constraint's `expires` is an ISO date or time (UTC), a
duration from now (`30m`, `12h`, `3d`) or `run` (until this run ends); anything else: no
expiry, the text kept as said."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

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
    now = now or datetime.now(timezone.utc)
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


def rejection(errors: list[str], task: str, files: list[str]) -> dict | None:
    """A rejected attempt's first error as a failure of its task (no cause or fix known)."""
    first = next((e for e in errors if str(e).strip()), None)
    if first is None:
        return None
    return {"kind": "failure", "text": clip(first), "task": task, "files": list(files)}
