"""The messages of harnessc's commits: a subject of one short line, and a message that reaches
git on its standard input.

A task's title becomes a subject. A title that would make the subject longer than
SUBJECT_LIMIT characters is cut there with an ellipsis, and the body holds it whole. A
character a subject line cannot hold (textsafe.title_flaw's: a control character, a line
separator; the lint refuses them, a hand-edited plan.json may still hold one) is shown as
its escape. The message goes to git's stdin (`git commit -F -` / `git commit-tree -F -`),
never in argv: one argument over 128 KiB (a 140,000-character title) is E2BIG, and the
verified change would never land; nor through a temporary file, which a run killed -9
would leave behind.
"""

from __future__ import annotations

from ...textsafe import one_line

SUBJECT_LIMIT = 100  # characters of a subject line, its prefix (`harnessc: <id>: `) included
TITLE_MIN = 40  # characters of the title a subject keeps however long its prefix is
ELLIPSIS = "\u2026"


def headline(prefix: str, title: str) -> tuple[str, str]:
    """(the subject: `prefix` + the title, cut when too long; the paragraph for the body
    that holds the whole title when it was cut, else "")."""
    title = one_line(title).strip()
    room = max(TITLE_MIN, SUBJECT_LIMIT - len(prefix))
    if len(title) <= room:
        return prefix + title, ""
    return prefix + title[:room - 1].rstrip() + ELLIPSIS, f"Title: {title}\n\n"


def message_bytes(text: str) -> bytes:
    """`text` as the bytes git is given (UTF-8; the bytes of a message git gave back as they were)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no bytes stand for
        return text.encode("utf-8", "replace")
