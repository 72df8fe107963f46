"""Checks that a store's answer is what was asked: a ranged read's range, an upload's object.

A server (or a proxy, or a cache in front of it) may answer a ``Range`` request with another range of the same
object: a derived index built from such bytes (a Parquet footer, a tar header) would describe the wrong data.
Storage backends that see the answer's ``Content-Range`` check it with :func:`check_content_range`. A store may
also report an upload a success and keep part of the body, or nothing (an older object of the same name stays):
:func:`confirm_upload` checks the object's size where the backend can tell.
"""

from __future__ import annotations

import os
import re
from typing import Any

from streaming_core.errors import StorageError

__all__ = ['check_content_range', 'confirm_upload']

_CONTENT_RANGE = re.compile(r'\s*bytes\s+(\d+)-(\d+)\s*/\s*(\d+|\*)\s*\Z', re.IGNORECASE)


def check_content_range(header: str | None, start: int, end: int, received: int, what: str) -> None:
    """Check a partial answer (``206``) to a request for bytes ``start`` to ``end`` (inclusive).

    Args:
        header: The answer's ``Content-Range`` (``bytes FIRST-LAST/TOTAL``), or ``None`` when it has none.
        start: The first byte asked for.
        end: The last byte asked for.
        received: The length of the answer's body.
        what: The request, for the message (a redacted URL, ``'GET <url>'``).

    Raises:
        StorageError: (retryable) the header is missing or malformed, or it names another range than the one asked
            (another first byte; another last byte, unless an earlier one where the object ends), or another length
            than the body's.
    """
    match = _CONTENT_RANGE.match(header or '')
    if match is None:
        raise StorageError(f'{what} (bytes {start}-{end}): a partial answer without a valid Content-Range '
                           f'({header!r}).')
    first, last, total = int(match.group(1)), int(match.group(2)), match.group(3)
    at_end = total != '*' and last == int(total) - 1
    if first != start or last > end or (last < end and not at_end) or last - first + 1 != received:
        raise StorageError(f'{what}: asked for bytes {start}-{end}, the answer holds {received} bytes of range '
                           f'{first}-{last}/{total}.')


def confirm_upload(backend: Any, path: str, url: str, timeout: float, shown: str) -> None:
    """After an upload reported success: the object must exist and, where the backend can tell (its ``stat``), have
    the file's size (a store that kept part of the body, or an old object a lost write left in place, is caught)."""
    stat = getattr(backend, 'stat', None)
    found = None
    if callable(stat):
        try:
            found = stat(url, timeout=timeout)
        except FileNotFoundError:
            found = None  # some stores list a new object late: the existence check decides
    size = (found or {}).get('size')
    if size is not None:
        expected = os.path.getsize(path)
        if int(size) != expected:
            raise StorageError(f'{shown} holds {size} bytes after the upload of {expected} bytes reported success '
                               f'(the store kept part of it, or an older object).')
        return
    if not backend.exists(url, timeout=timeout):
        raise StorageError(f'{shown} is absent after its upload reported success.')
