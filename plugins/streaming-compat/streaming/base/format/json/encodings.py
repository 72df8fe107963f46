"""``streaming.base.format.json.encodings``: the JSON format's column types (``str``, ``int``, ``float``)."""

from __future__ import annotations

from typing import Any

from streaming_jsonl.writer import JSON_ENCODINGS

__all__ = ['is_json_encoded', 'is_json_encoding']


def is_json_encoding(encoding: str) -> bool:
    """Whether ``encoding`` is a JSON column type."""
    return encoding in JSON_ENCODINGS


def is_json_encoded(encoding: str, value: Any) -> bool:
    """Whether ``value`` has the type ``encoding`` takes (a bool counts as an int; an int is not a float)."""
    return isinstance(value, JSON_ENCODINGS[encoding])
