"""The Lark grammars (roadmap.lark, rules.lark) and where their parse tables are cached."""

from __future__ import annotations

import os


def lark_cache_file(name: str) -> str | bool:
    """Where lark caches a grammar's LALR tables between processes: a private directory.

    Not lark's cache=True, which unpickles a file at a predictable name in the shared temp
    directory that another local user could plant. lark checks the grammar hash stored in
    the file and rebuilds when it differs; with no writable cache it just builds each time.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "harnessc")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return False
    return os.path.join(folder, f"{name}.lark-cache")
