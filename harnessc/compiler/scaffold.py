"""`harnessc init`: a starter project from harnessc/templates/init/."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import HarnesscError
from ..workspace import Workspace

FILES = ("roadmap.md", "contracts.yaml", "harness.yaml")


class ScaffoldError(HarnesscError):
    """`init` would overwrite the user's files."""

    hint = "pass --force to overwrite, or choose another directory"


def scaffold(directory: Path, force: bool = False) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    existing = [directory / f for f in FILES if (directory / f).exists()]
    if existing and not force:
        raise ScaffoldError(f"{', '.join(str(p) for p in existing)} already exist{'s' if len(existing) == 1 else ''}")
    workspace = Workspace(directory)  # --force replaces files, never writes through a link
    written = []
    src = resources.files("harnessc").joinpath("templates", "init")
    for name in FILES:
        workspace.write_atomic(directory / name, src.joinpath(name).read_text("utf-8"))
        written.append(directory / name)
    # The YAML files' modelines point here, so editors complete keys offline.
    # `harnessc schema --out .schemas` refreshes them after an upgrade.
    from .schemas import dump, generate

    schema_dir = directory / ".schemas"
    for name, body in generate().items():
        workspace.write_atomic(schema_dir / name, dump(body))
        written.append(schema_dir / name)
    gitignore = directory / ".gitignore"
    try:
        lines = workspace.read_text(gitignore).splitlines()
    except FileNotFoundError:
        lines = []
    if ".harness/" not in lines and ".harness" not in lines:
        with workspace.open_write(gitignore, "a") as f:
            if lines and lines[-1] != "":
                f.write("\n")
            f.write(".harness/\n")
        written.append(gitignore)
    return written
