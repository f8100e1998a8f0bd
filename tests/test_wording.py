"""Counts in messages: the noun agrees with the count."""

from __future__ import annotations

import pytest

from landcover.wording import counted


@pytest.mark.parametrize(
    ("n", "noun", "plural", "said"),
    [
        (1, "tile", None, "1 tile"),
        (0, "tile", None, "0 tiles"),
        (2, "worker", None, "2 workers"),
        (1024, "tile", None, "1,024 tiles"),
        (3, "pass", "passes", "3 passes"),
        (1, "pass", "passes", "1 pass"),
    ],
)
def test_the_noun_agrees_with_the_count(n: int, noun: str, plural: str | None, said: str) -> None:
    assert counted(n, noun, plural) == said
