"""Where a draft is written: roadmap.draft.md and contracts.draft.yaml next to the specs,
never over roadmap.md or contracts.yaml, never through a link, and never over an earlier
draft unless --force (then a file written beside it replaces it, so a link is replaced,
never written through)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import HarnesscError
from ..vocab import CONTRACTS, ROADMAP

ROADMAP_DRAFT = "roadmap.draft.md"
CONTRACTS_DRAFT = "contracts.draft.yaml"
EMPTY_CONTRACTS = "contracts: {}\n"


class NotWritable(HarnesscError):
    """A draft file cannot be written where it belongs."""


def targets(root: Path) -> dict[str, Path]:
    """Spec file name -> where its draft goes."""
    return {ROADMAP: root / ROADMAP_DRAFT, CONTRACTS: root / CONTRACTS_DRAFT}


def check_targets(root: Path, force: bool) -> None:
    """NotWritable when a draft file may not be written (checked before any agent is paid)."""
    for path in targets(root).values():
        if path.is_symlink():  # a dangling one too: writing would create the file it points to
            raise NotWritable(f"{path.name} is a symbolic link; not written through it (not even with --force)",
                              "remove the link")
        if path.exists() and not path.is_file():
            raise NotWritable(f"{path.name} is not a regular file; not replaced", "move it aside")
        if path.exists() and not force:
            raise NotWritable(f"{path.name} exists (an earlier draft?); not overwritten",
                              "review it and move it aside, or pass --force to replace it")


def write_draft(root: Path, texts: dict[str, str], force: bool) -> list[Path]:
    """Write both draft files (contracts.draft.yaml holds `contracts: {}` when the draft gave
    none); the paths written."""
    written = []
    for name, path in targets(root).items():
        _write(path, texts.get(name) or (EMPTY_CONTRACTS if name == CONTRACTS else ""), force)
        written.append(path)
    return written


def _write(target: Path, text: str, force: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    where = target if not force else target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(where, flags, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        if force:
            os.replace(where, target)
    except FileExistsError:
        raise NotWritable(f"{target.name} appeared while drafting; not overwritten",
                          "review it, then run draft again (with --force to replace it)") from None
    except OSError as e:
        if force:
            where.unlink(missing_ok=True)
        raise NotWritable(f"cannot write {target}: {e}") from None
