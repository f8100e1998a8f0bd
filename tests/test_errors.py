"""The one-line message of an exception (``landcover.errors.first_line``), in process."""

from __future__ import annotations

import pytest

from landcover.errors import first_line


@pytest.mark.parametrize(
    ("exc", "kwargs", "expected"),
    [
        (RuntimeError("first\nsecond"), {}, "first"),
        (RuntimeError("  \n  padded line  \nmore"), {}, "padded line"),
        (RuntimeError(""), {}, "RuntimeError"),
        (OSError(), {}, "OSError"),
        (KeyError("encoder.conv1.weight"), {}, "encoder.conv1.weight"),
        (ValueError("abcdefgh\nij"), {"limit": 3}, "abc"),
        (ValueError("bad value\nstack"), {"typed": True}, "ValueError: bad value"),
        (ValueError(), {"typed": True}, "ValueError"),
        (ValueError("x" * 50), {"typed": True, "limit": 14}, "ValueError: xx"),
    ],
)
def test_first_line(exc: BaseException, kwargs: dict, expected: str) -> None:
    assert first_line(exc, **kwargs) == expected
