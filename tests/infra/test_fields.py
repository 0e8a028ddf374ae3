"""andreas.infra.fields: a dataclass is the schema of a settings table."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from andreas.errors import InputError
from andreas.infra.fields import build, known_keys, rule


@dataclass(frozen=True, kw_only=True)
class Sample:
    name: str = "x"
    rate_s: float = field(default=1.0, metadata=rule(gt=0))
    count: int = field(default=0, metadata=rule(ge=0))
    on: bool = False
    tags: tuple[str, ...] = ()
    size: str | int = "1M"
    token: str | None = field(default=None, metadata=rule(secret=True))


def make(**table):
    return build(Sample, table, section="f.toml: [s]", where=lambda k: f"f.toml: [s] {k}")


def test_values_are_converted_to_the_field_types():
    s = make(rate_s=2, tags=["a", "b"], size=5, on=True)
    assert s == Sample(rate_s=2.0, tags=("a", "b"), size=5, on=True)
    assert isinstance(s.rate_s, float) and known_keys(Sample)[0] == "name"


@pytest.mark.parametrize("table, message", [
    (dict(colour=1), "f.toml: [s] unknown key 'colour' (known: count, name, on,"),
    (dict(rate_s=0), "f.toml: [s] rate_s must be > 0, got 0"),
    (dict(rate_s=float("inf")), "rate_s must be a finite number"),
    (dict(count=True), "f.toml: [s] count has the wrong type: True"),
    (dict(count=1.5), "count has the wrong type: 1.5"),
    (dict(on=1), "on has the wrong type: 1"),
    (dict(tags="a"), "tags must be a list of non-empty strings, got 'a'"),
    (dict(size=[1]), "size has the wrong type: [1]"),
    (dict(token=["hunter2"]), "token has the wrong type: a list"),
])
def test_one_line_naming_field_and_value(table, message):
    with pytest.raises(InputError) as err:
        make(**table)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "hunter2" not in str(err.value)
