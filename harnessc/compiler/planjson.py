"""plan.json's text, and the canonical JSON that fingerprints hash.

orjson does the encoding (a sixth of json's time, build only: lint never imports it);
whatever orjson refuses (an integer beyond 64 bits, a lone surrogate or a non-string key
from YAML) is encoded by json instead. Mappings that are not dicts (the plan's records) and
sequences that are not lists (tuples, the lazily listed edges) are written as objects and
arrays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any, Callable


def write_plan_json(plan: dict, write: Callable[[bytes], Any]) -> None:
    """Write plan.json as UTF-8: the text of ``json.dumps(plan, indent=2, ensure_ascii=False)``,
    one top-level list item at a time so the text of a 100k-task plan is never held whole.
    JSON has no NaN or Infinity: they are written as null."""
    write(b"{")
    sep = b"\n  "
    for key, value in plan.items():
        write(sep + _indented(key, b"") + b": ")
        sep = b",\n  "
        if _is_array(value):
            items = iter(value)
            head = b"[\n    "
            while piece := list(islice(items, 256)):  # bounded pieces
                write(head + b",\n    ".join(_indented(v, b"\n    ") for v in piece))
                head = b",\n    "
            write(b"[]" if head == b"[\n    " else b"\n  ]")
        else:
            write(_indented(value, b"\n  "))
    write(b"\n}" if plan else b"}")


def plan_json(plan: dict) -> str:
    """The text write_plan_json writes, as one string."""
    pieces: list[bytes] = []
    write_plan_json(plan, pieces.append)
    return b"".join(pieces).decode("utf-8")


def canonical(value: Any) -> bytes:
    """Canonical JSON (sorted keys, compact, UTF-8), as fingerprints hash it."""
    import orjson

    try:
        return orjson.dumps(value, default=_as_json, option=orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=_as_json, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8", "surrogatepass")


def compact(value: Any) -> bytes:
    """Compact JSON with keys in their own order (records: their fields'), as plan.json
    writes them: values with equal bytes are written alike. Cheaper than canonical (orjson
    encodes records itself), for telling plan values apart, not for hashing."""
    import orjson

    try:
        return orjson.dumps(value, default=_as_json)
    except TypeError:
        return canonical(value)


def _indented(value: Any, newline: bytes) -> bytes:
    """`value` as indent=2 JSON whose lines after the first start with `newline`."""
    import orjson

    try:
        text = orjson.dumps(value, default=_as_json, option=orjson.OPT_INDENT_2)
    except TypeError:
        text = json.dumps(_finite(value), indent=2, default=_as_json).encode("utf-8")
    return text.replace(b"\n", newline) if newline else text


def _is_array(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _as_json(value: Any) -> Any:
    """What the encoders fall back to: mappings as dicts, sequences as lists, the rest as text."""
    if isinstance(value, Mapping):
        as_dict = getattr(value, "as_dict", None)  # the plan's records (planfile.Record): field by field
        return as_dict() if as_dict is not None else dict(value)
    return list(value) if _is_array(value) else str(value)


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as None, as orjson writes them (json would write NaN)."""
    if isinstance(value, float):
        return value if value - value == 0 else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if _is_array(value):
        return [_finite(v) for v in value]
    return value
