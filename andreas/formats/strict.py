"""JSON and YAML text into Python values, refusing a key repeated in one mapping.

Both parsers keep the last of two equal keys silently, so a typo'd copy of a field would
replace the first one without a word; every input document of andreas (snapshots, traces,
job files) is read through here instead. Callers turn :class:`RepeatedKey` into their own
one-line InputError (it carries the key and, for YAML, the line).
"""

from __future__ import annotations

import functools
import json
from typing import Any


class RepeatedKey(ValueError):
    """A mapping names ``key`` twice (``line``: 1-based, YAML only); or, with ``key`` None,
    a YAML key that is not a plain value (a list or a mapping as a key)."""

    def __init__(self, key: Any, line: int | None = None) -> None:
        self.key = key
        self.line = line
        where = f"line {line}: " if line is not None else ""
        what = ("a key must be a plain value" if key is None
                else f"key {str(key)!r} appears twice")
        super().__init__(where + what)


def json_loads(text: str) -> Any:
    """``json.loads`` that raises RepeatedKey (and json.JSONDecodeError as usual)."""
    return json.loads(text, object_pairs_hook=_unique_pairs)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKey(key)
        out[key] = value
    return out


def yaml_loads(text: str) -> Any:
    """``yaml.safe_load`` that raises RepeatedKey (and yaml.YAMLError as usual)."""
    import yaml

    return yaml.load(text, Loader=_strict_loader())


@functools.cache
def _strict_loader() -> type:
    """A SafeLoader whose mappings refuse repeated keys; built once, on first use (PyYAML
    is imported only by the commands that read YAML)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:
                raise RepeatedKey(None, line) from None
            if repeated:
                raise RepeatedKey(key, line)
        return loader.construct_mapping(node, deep=deep)

    def timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        # A time Python cannot hold (an offset of +99:00, year 0) stays the text it was,
        # so the field's own checker names the field and the value.
        try:
            return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
        except (ValueError, OverflowError):
            return loader.construct_scalar(node)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", timestamp)
    return StrictLoader
