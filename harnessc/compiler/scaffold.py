"""`harnessc init`: a starter project from harnessc/templates/init/."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FILES = ("roadmap.md", "contracts.yaml", "harness.yaml")


class ScaffoldError(Exception):
    pass


def scaffold(directory: Path, force: bool = False) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    existing = [directory / f for f in FILES if (directory / f).exists()]
    if existing and not force:
        raise ScaffoldError(f"{', '.join(str(p) for p in existing)} already exist{'s' if len(existing) == 1 else ''}")
    written = []
    src = resources.files("harnessc").joinpath("templates", "init")
    for name in FILES:
        text = src.joinpath(name).read_text("utf-8")
        (directory / name).write_text(text, encoding="utf-8")
        written.append(directory / name)
    # The YAML files' modelines point here, so editors complete keys offline.
    # `harnessc schema --out .schemas` refreshes them after an upgrade.
    from .schemas import dump, generate

    schema_dir = directory / ".schemas"
    schema_dir.mkdir(exist_ok=True)
    for name, body in generate().items():
        (schema_dir / name).write_text(dump(body), encoding="utf-8")
        written.append(schema_dir / name)
    gitignore = directory / ".gitignore"
    lines = gitignore.read_text("utf-8").splitlines() if gitignore.exists() else []
    if ".harness/" not in lines and ".harness" not in lines:
        with gitignore.open("a", encoding="utf-8") as f:
            if lines and lines[-1] != "":
                f.write("\n")
            f.write(".harness/\n")
        written.append(gitignore)
    return written
