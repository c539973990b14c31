"""The words of the spec formats: types, strategies, complexities, priorities, durations.

No pydantic here: lint imports this module, and it must start fast.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

ROADMAP = "roadmap.md"
CONTRACTS = "contracts.yaml"
HARNESS = "harness.yaml"
SPEC_FILES = (ROADMAP, CONTRACTS, HARNESS)  # the files a user writes
PLAN_VERSION = 1  # plan.json's format: the compiler writes it, the runtime refuses other versions

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
# The YAML schemas' form, at most 9 digits a part: "9" * 400 + "h" was inf seconds, which
# plan.json wrote as no limit.
DURATION_PATTERN = r"^(\d{1,9}(\.\d{1,9})?(ms|s|m|h|d))+$"
_DURATION = re.compile(r"^(\d+(\.\d+)?(ms|s|m|h|d))+$")  # roadmap.md bounds the total itself
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # an environment variable's name (pass_env)


def parse_duration(text: Any) -> int | float:
    """'45s', '30m', '4h', '1d', '1h30m', '20ms' -> seconds (int when whole). Numbers are seconds."""
    if isinstance(text, bool):
        raise ValueError("a duration is a number with a unit, like 45s, 30m, 4h, 1d or 1h30m")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return text
    if not isinstance(text, str):
        raise ValueError("a duration is a number with a unit, like 45s, 30m, 4h, 1d or 1h30m")
    seconds = _duration_seconds(text.strip())
    if seconds is None:
        raise ValueError(
            f"'{text}' is not a duration: use a number with a unit, like 45s, 30m, 4h, 1d or 1h30m"
        )
    return seconds


@lru_cache(maxsize=4096)  # a roadmap says "1h" thousands of times
def _duration_seconds(s: str) -> int | float | None:
    if not _DURATION.fullmatch(s):
        return None
    total = sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(s))
    return int(total) if float(total).is_integer() else round(total, 6)


USD_FORMAT = "an amount in US dollars, like 5 or $2.50"
_USD = re.compile(r"\$?[ \t]*(\d+(?:\.\d*)?|\.\d+)")


def parse_usd(text: str) -> float | None:
    """'5', '2.50', '$2.50', '$ 2.50' -> dollars, as roadmap.md and harness.yaml both write
    them; None for anything else (and amounts too large to be meant)."""
    m = _USD.fullmatch(text.strip())
    usd = float(m.group(1)) if m is not None else -1.0
    return usd if 0 <= usd < 1e15 else None  # float("9" * 400) is inf


def is_usd_place(path: tuple) -> bool:
    """Whether a harness.yaml path holds US dollars: budget.max_cost_usd, defaults.budget,
    agents.*.price.*."""
    return path in (("budget", "max_cost_usd"), ("defaults", "budget")) or (
        len(path) == 4 and path[0] == "agents" and path[2] == "price" and path[3] in ("input", "output"))


class DeliverableType(str, Enum):
    """The types a deliverable can have."""

    str = "str"
    int = "int"
    float = "float"
    bool = "bool"
    list = "list"
    dict = "dict"
    any = "any"


DELIVERABLE_TYPES = [t.value for t in DeliverableType]


class GitMode(str, Enum):
    """What harnessc does with git when a task succeeds."""

    commit = "commit"  # commit the task's changes
    off = "off"


class IsolationMode(str, Enum):
    """Where a task's attempts work."""

    none = "none"  # in the project's own tree
    worktree = "worktree"  # each attempt in its own git worktree; results land as commits


class SelectMode(str, Enum):
    """Which of a task's approaches lands (`approaches: N`)."""

    first = "first"  # the first approach that verifies; the others are cancelled
    best = "best"  # all run; the verified approach with the highest score


MAX_APPROACHES = 10  # approaches of one task at once: each is a worktree and an agent process


class FailureStrategy(str, Enum):
    """What happens after max_retries failed attempts."""

    retry = "retry"
    fallback = "fallback"
    partial = "partial"
    template = "template"
    escalate = "escalate"
    fail = "fail"


class Complexity(str, Enum):
    trivial = "trivial"
    simple = "simple"
    medium = "medium"
    complex = "complex"
    epic = "epic"


class Priority(str, Enum):
    critical = "critical"
    high = "high"
    normal = "normal"
    low = "low"


PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}


def priority_rank(priority: str | None) -> int:
    """Where a task's priority puts it in the start order (0 first); unset or unknown is normal."""
    return PRIORITY_RANK.get(priority or "normal", PRIORITY_RANK["normal"])


BUILTIN_AGENT = "rehearsal"

# The recovery ladder's rungs (runtime/loop/recovery.py): prompt mutations, branch exploration
# (a few approaches from the stuck point, in worktrees), escalation, then an end - a human
# (the task is blocked) or failure.
MUTATIONS = ("rephrase", "decompose", "constrain", "examples", "negative")
LADDER_ENDS = ("human", "fail")
EXPLORE = "explore"
RUNGS = (*MUTATIONS, EXPLORE, "escalate", *LADDER_ENDS)


# The kinds of failed attempt `retry_on:` and `dont_retry:` name (tasks and contracts): what
# the runtime tells apart when an answer is rejected (runtime/verify.py) or a call fails
# (runtime/iteration.py). No kind is left out of retries by default: each has a common case
# an agent's next try fixes (the file or script it was to make, a mode it was to set).
ERROR_KINDS = {
    "contract": "the answer's output JSON is missing or breaks the contract",
    "promise": "the answer is empty, or its completion promise is missing or wrong",
    "truncated": "the answer was cut off (max_tokens)",
    "accept": "an accept command exited non-zero (not for one of the reasons below)",
    "missing_file": "an accept command's program or a file it reads does not exist "
                    "(command not found, exit 127, 'No such file or directory')",
    "permission": "an accept command was refused permission (not executable, exit 126, 'Permission denied')",
    "timeout": "an accept command or the agent call timed out",
    "min_passed": "an accept command's test runner reported too few passing tests, or none",
    "tool_denied": "the agent's tool calls were refused by its permissions",
    "crash": "the agent call failed without an answer (a command agent's non-zero exit, an API error)",
}
START_LEVELS = (1, 2, 3)  # refinement levels of a retry's prompt (templates/refine.md.j2)


def ladder_rungs(prompt_mutations: int, escalate: bool, human: bool, explore: bool = False) -> tuple[str, ...]:
    """harness.yaml's `loop.recovery` as the rungs a task's `recovery:` lists."""
    n = max(0, min(int(prompt_mutations), len(MUTATIONS)))
    return (*MUTATIONS[:n], *((EXPLORE,) if explore else ()), *(("escalate",) if escalate else ()),
            "human" if human else "fail")

# A task id (roadmap.md's grammar; proposals.py checks an agent's ids with it too)
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
MAX_ID_LENGTH = 128  # an id names files (prompts/<id>.md): well under the 255-byte file name limit

# Canonical task keys, in the order `harnessc ls --output json` prints them.
LS_KEYS = (
    "id", "title", "phase", "done", "depends_on", "contract", "agent", "model", "complexity",
    "priority", "max_iterations", "max_time", "stuck_after", "progress_threshold", "recovery",
    "completion_promise", "success", "accept", "context", "context_tokens", "tags", "git", "isolation",
    "approaches", "select", "score", "min_score", "resources", "min_passed", "retry_on", "dont_retry",
    "start_level", "protect", "allow_edit", "write_scope", "review", "split", "goal",
)


# harness.yaml `notify.on`: the events a notifier is told of (runtime/observe/notify.py)
NOTIFY_KINDS = ("blocked", "failed", "review", "budget", "stuck", "run_end")


def otlp_endpoint_problem(url: str) -> tuple[str, str] | None:
    """(what is wrong, what to write) for an OTLP/HTTP base URL (harness.yaml's
    `telemetry.otlp_endpoint`, OTEL_EXPORTER_OTLP_ENDPOINT); None when it can be used."""
    example = "a base URL like http://localhost:4318 (/v1/traces is added)"
    if not url.strip() or any(c.isspace() for c in url):
        return "is not a URL", example
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is no number)
    except ValueError:  # a port that is no number, a broken [IPv6] host
        return "is not a URL", example
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http:// or https:// URL", example
    if parts.username is not None or parts.password is not None:
        return "holds credentials", "put them in OTEL_EXPORTER_OTLP_HEADERS (e.g. Authorization=Basic ...), not in the URL"
    if parts.query or parts.fragment:
        return "has a query or fragment", example
    if parts.path.rstrip("/").endswith("/v1/traces"):
        return "ends with /v1/traces, which harnessc adds", f"write {url.rstrip('/')[:-len('/v1/traces')] or url}"
    return None


RAY_CLIENT_PORT = 10001  # Ray Client's default port, for a ray:// address without one
RAY_ADDRESS_FORMS = "auto, HOST:PORT (the head node's GCS port, like 10.0.0.5:6379) or ray://HOST:PORT (like ray://head:10001)"
# Ray's own resources: `num_cpus_per_attempt` asks for CPUs, and Ray refuses these names in `resources`
RAY_RESERVED_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
MIN_RESOURCE = 0.0001  # Ray's precision for fractional amounts


def ray_address(text: str) -> tuple[str, str | None, int | None]:
    """harness.yaml `executor.address` / `run --ray-address` -> (form, host, port): form is
    "auto" (host and port None), "gcs" (HOST:PORT) or "client" (ray://HOST[:PORT], port
    10001 when not given). Raises ValueError(what is wrong) for anything else."""
    text = text.strip()
    if text == "auto":
        return "auto", None, None
    if not text or any(c.isspace() for c in text):
        raise ValueError("is not an address")
    client = text.startswith("ray://")
    if "://" in text and not client:
        raise ValueError(f"has the scheme {text.split('://', 1)[0]}://; Ray addresses are HOST:PORT or ray://HOST:PORT")
    try:
        parts = urlsplit(text if client else "//" + text)
        port = parts.port
    except ValueError:  # a port that is no number or out of range, a broken [IPv6] host
        raise ValueError("has a port that is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise ValueError("names no host")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment \
            or parts.path not in ("", "/"):
        raise ValueError("has more than a host and a port")
    if port is None and not client:
        raise ValueError("has no port (the head node's GCS port is 6379 unless `ray start --port` said otherwise)")
    if port == 0:
        raise ValueError("has port 0")
    return ("client", parts.hostname, port or RAY_CLIENT_PORT) if client else ("gcs", parts.hostname, port)


def clone_url_problem(url: str) -> tuple[str, str] | None:
    """(what is wrong, what to write) for harness.yaml `executor.clone_url`; None when git
    can be given it. Credentials are refused: plan.json and Ray's task arguments would show them."""
    example = "a URL git clones, like https://github.com/acme/app.git or git@github.com:acme/app.git"
    if not url.strip() or any(c.isspace() for c in url) or url.startswith("-"):
        return "is not a git URL", example
    if "://" not in url:  # scp-like user@host:path, or a path on the workers
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a git URL", example
    if parts.password is not None or (parts.username and parts.scheme in ("http", "https")):
        return "holds credentials", ("give the workers an SSH key or a git credential helper; the URL goes into "
                                     "plan.json and every attempt's arguments")
    if parts.scheme not in ("https", "http", "ssh", "git", "file"):
        return f"has the scheme {parts.scheme}://", example
    return None
