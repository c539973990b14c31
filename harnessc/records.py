"""Records: slots dataclasses that also read like the dicts they are written as
(`node["id"]`, `node.get("done")`). plan.json's entries (planfile.py) and the agents'
typed settings (providers/config.py) are records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, dataclass_transform


class Record(Mapping):
    __slots__ = ()
    _keys: dict[str, None]  # the field names, in order; set by @record

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping.get would go through __getitem__ and a KeyError: a 10k-task build asks 100k times
        return getattr(self, key) if key in self._keys else default

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict, in order (nested records stay records): what encoders write."""
        return {key: getattr(self, key) for key in self._keys}

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._keys:
            raise KeyError(key)
        setattr(self, key, value)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass_transform(eq_default=False)  # type checkers: a @record class is a dataclass
def record(cls: type | None = None, /, *, frozen: bool = False) -> Any:
    """A slots dataclass that reads like a mapping (`@record`, or `@record(frozen=True)`)."""
    def make(cls: Any) -> Any:
        cls = dataclass(slots=True, eq=False, frozen=frozen)(cls)
        cls._keys = {f.name: None for f in fields(cls)}
        return cls

    return make if cls is None else make(cls)
