"""``expectation``: an observed value that contradicts what the scenario said it expects
(``run.expect``), so a scenario can pin the behaviour it was written to show.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .._untrusted import finite
from ..cassette import Cassette
from . import Violation, register


@register("expectation")
def expectation(c: Cassette) -> Iterator[Violation]:
    """An observation that differs from what the scenario declared with ``run.expect`` (or never made)."""
    observed: dict[str, list[Any]] = {}
    for o in c.observations:
        observed.setdefault(o.name, []).append(o.value)
    for name, expected in c.expectations.items():
        values = observed.get(name)
        if values is not None and all(finite(v) == finite(expected) for v in values):
            continue
        seen: Any = None if values is None else values[0] if len(values) == 1 else values
        what = "never observed" if values is None else f"observed {_as_json(seen)}"
        yield Violation(
            "expectation",
            "scenario",
            None,
            f"{name}: expected {_as_json(expected)}, {what}",
            {"name": name, "expected": expected, "observed": seen},
            identity=("name",),
            pair=(name,),
        )


def _as_json(value: Any) -> str:
    """An observed or expected value as every other line shows observations: JSON (``true``, ``"x"``, ``null``)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
