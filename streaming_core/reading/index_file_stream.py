"""Read the shard entries of an ``index.json`` one at a time, in bounded memory.

``json.loads`` of a 2 GB index builds tens of millions of Python objects at once (many times the file's size in
memory). :func:`iter_index_entries` reads the file in chunks and decodes one shard entry at a time with the standard
library's decoder, so memory stays at one chunk plus one entry; the caller (the binary index builder) keeps only
compact arrays. Top-level keys other than ``shards`` are decoded whole (they are small) and checked at the end:
``version`` must be 2, as :func:`streaming_core.reading.index_file.parse_index_text` requires.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

from streaming_core.errors import IndexFormatError, IndexJSONError
from streaming_core.reading.index_file import TWO_SHARDS_KEYS

__all__ = ['iter_index_entries', 'CHUNK']

#: Bytes read from the file at a time.
CHUNK = 1 << 20
_WS = ' \t\n\r'


class _Scanner:
    """A window of decoded text over a binary stream, refilled as values are consumed."""

    def __init__(self, handle: IO[bytes], path: str) -> None:
        self.handle = handle
        self.path = path
        self.decoder = codecs.getincrementaldecoder('utf-8')()
        self.json = json.JSONDecoder()
        self.buf = ''
        self.pos = 0
        self.eof = False
        self.dropped = 0  # characters of the file before ``buf``
        self.lines = 0  # newlines among them
        self.line_start = 0  # where the line holding ``buf[0]`` starts in the file

    def fill(self) -> bool:
        """Read one more chunk (dropping what was consumed); False at the end of the file."""
        if self.eof:
            return False
        chunk = self.handle.read(CHUNK)
        try:
            text = self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as err:
            raise IndexFormatError(f'Index file at {self.path} is empty or corrupted. {err}') from err
        consumed = self.buf[:self.pos]
        newline = consumed.rfind('\n')
        if newline >= 0:
            self.lines += consumed.count('\n')
            self.line_start = self.dropped + newline + 1
        self.dropped += self.pos
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        self.eof = not chunk
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self.fill():
                return ''

    def position(self, pos: int) -> tuple[int, int, int]:
        """``(line, column, char)`` of position ``pos`` of ``buf``, counted in the whole file as ``json`` does."""
        newline = self.buf.rfind('\n', 0, pos)
        start = self.dropped + newline + 1 if newline >= 0 else self.line_start
        return self.lines + self.buf.count('\n', 0, pos) + 1, self.dropped + pos - start + 1, self.dropped + pos

    def error(self, message: str, pos: int) -> IndexJSONError:
        """An :class:`IndexJSONError` ending ``message: line L column C (char N)``, with those attributes (in the
        whole file; ``doc`` is the part of it in memory)."""
        line, column, char = self.position(pos)
        err = IndexJSONError(f'{message}: line {line} column {column} (char {char})', self.buf, pos)
        err.lineno, err.colno, err.pos = line, column, char
        return err

    def expect(self, chars: str) -> str:
        """Consume the next non-blank character, one of ``chars``."""
        char = self.peek()
        if not char or char not in chars:
            raise self.error(f'Index file at {self.path} is empty or corrupted: expected one of {chars!r}, got '
                             f'{char or "end of file"!r}', self.pos)
        self.pos += 1
        return char

    def value(self) -> Any:
        """Decode the next JSON value, reading more of the file while it is incomplete."""
        self.peek()
        while True:
            try:
                obj, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                if self.fill():
                    continue
                raise self.error(f'Index file at {self.path} is empty or corrupted. {err.msg}', err.pos) from err
            except RecursionError:  # hostile nesting: refused like any other corrupt index
                raise IndexFormatError(f'Index file at {self.path} is corrupted: values nested too deeply.') from None
            if end == len(self.buf) and not self.eof and self.fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return obj


def iter_index_entries(handle: IO[bytes], path: str, top: dict[str, Any] | None = None) -> Iterator[Any]:
    """Yield the entries of the ``shards`` list of an index read from ``handle``, one at a time.

    Args:
        handle: The index file opened in binary mode (or any binary stream).
        path: The file's path, named in errors.
        top: If given, receives the other top-level keys (``version``...).

    Raises:
        IndexJSONError: the text is empty or not valid JSON (a ``json.JSONDecodeError`` too, as in the reference,
            and as :func:`streaming_core.reading.index_file.parse_index_text` raises).
        IndexFormatError: the text is not a version 2 index (raised when the problem is reached: a bad
            ``version`` after the shards is reported once they are read), or not UTF-8.
    """
    scan = _Scanner(handle, path)
    others: dict[str, Any] = {} if top is None else top
    seen_shards = False
    first = scan.peek()
    if first and first != '{':
        raise IndexFormatError(f'Index file at {path} is not a JSON object (it starts with {first!r}).')
    scan.expect('{')
    if scan.peek() == '}':
        scan.pos += 1
    else:
        while True:
            key = scan.value()
            if not isinstance(key, str):
                raise IndexJSONError(f'Index file at {path} is empty or corrupted: a key is not a string.', scan.buf,
                                     scan.pos)
            scan.expect(':')
            if key == 'shards':
                if seen_shards:
                    raise IndexFormatError(TWO_SHARDS_KEYS.format(path=path))
                if scan.peek() != '[':
                    raise IndexFormatError(f'Index file at {path}: "shards" must be a list of objects.')
                seen_shards = True
                scan.pos += 1
                if scan.peek() == ']':
                    scan.pos += 1
                else:
                    while True:
                        yield scan.value()
                        if scan.expect(',]') == ']':
                            break
            else:
                others[key] = scan.value()
            if scan.expect(',}') == '}':
                break
    if scan.peek():
        raise IndexJSONError(f'Index file at {path} is empty or corrupted: extra data after the index object.',
                             scan.buf, scan.pos)
    version = others.get('version')
    if version != 2 or isinstance(version, bool):
        raise IndexFormatError(f'Unsupported streaming data version: {version!r} in {path}. Expected 2.')
    if not seen_shards:
        raise IndexFormatError(f'Index file at {path}: "shards" must be a list of objects.')
