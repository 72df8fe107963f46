"""``index.json`` version 2: parse, validate, write.

The file is ``{"shards": [...], "version": 2}`` written as pyjson-sorted text. Each shard entry is validated by
its format plugin (exact key set), and every file name is checked to stay inside the dataset directory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming_core.errors import IndexFormatError, IndexJSONError, UnknownNameError, UnsafePathError

__all__ = ['INDEX_BASENAME', 'TWO_SHARDS_KEYS', 'pyjson_sorted', 'FileInfo', 'check_basename', 'parse_index_text',
           'may_have_two_shards_keys', 'load_index', 'shard_readers', 'index_text', 'write_index', 'resolve_inside',
           'present_copy', 'get_index_basename']

INDEX_BASENAME = 'index.json'
_HEX = re.compile(r'[0-9a-f]*')
_ESCAPED_ASCII = re.compile(r'\\u00[2-7][0-9a-fA-F]')
_ESCAPED_ASCII_BYTES = re.compile(rb'\\u00[2-7][0-9a-fA-F]')



def pyjson_sorted(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True)``: the text of ``index.json`` and the configs embedded in shards."""
    return json.dumps(obj, sort_keys=True)

def get_index_basename() -> str:
    """The index file name, ``index.json``."""
    return INDEX_BASENAME


def check_basename(basename: Any, where: str) -> str:
    """Reject a shard file name that could escape the dataset directory.

    Allowed: relative names of ``/``-separated components (``shard.00000.mds``, ``7/shard.00000.mds``).
    Refused: empty names, absolute paths, ``..`` or ``.`` components, backslashes, NUL bytes, drive letters.
    """
    if not isinstance(basename, str) or not basename:
        raise IndexFormatError(f'{where}: a file "basename" must be a non-empty string, got {basename!r}.')
    parts = basename.split('/')
    drive = basename[1:2] == ':' and basename[0].isascii() and basename[0].isalpha()
    dots = '' in parts or '.' in parts or '..' in parts
    if basename[0] == '/' or '\\' in basename or '\0' in basename or drive or dots:
        raise UnsafePathError(f'{where}: file name {basename!r} escapes the dataset directory or is not a plain '
                              f'relative path; refusing to read or write it.')
    if not basename.isascii():
        try:
            basename.encode('utf-8')
        except UnicodeEncodeError:  # a lone surrogate: "\ud800" in JSON text, or a name in another encoding
            raise IndexFormatError(f'{where}: file name {basename!r} is not UTF-8 text (a file named in another '
                                   f'encoding, or an unpaired surrogate such as "\\ud800" in an index.json); rename '
                                   f'the file to UTF-8, or fix the index.') from None
    return basename


def resolve_inside(root: str, basename: str, where: str, real_root: str | None = None) -> str:
    """``root/basename`` after checking that no symlink on the way leads outside ``root``.

    The basename was already checked (:func:`check_basename`), so only symlinks can escape: each component under
    ``root`` is tested with one ``lstat`` and only a symlink is resolved. ``real_root`` (the resolved ``root``) may be
    passed to save resolving it again.
    """
    parts = basename.split('/')
    path = root
    for part in parts:
        path = os.path.join(path, part)
        if os.path.islink(path):
            real_root = real_root or os.path.realpath(root)
            real = os.path.realpath(path)
            if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
                raise UnsafePathError(f'{where}: {basename!r} resolves (through a symlink) to {real}, outside the '
                                      f'dataset directory {real_root}. Links that lead out of a dataset directory '
                                      f'are refused: move or copy the files in (a directory read in place can also '
                                      f'be read as a remote, with a local= cache, which copies them).')
    return path


@dataclass(frozen=True)
class FileInfo:
    """One file of a shard: its name relative to the index, its exact size and its hashes."""

    basename: str
    bytes: int
    hashes: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any, where: str) -> 'FileInfo':
        """Validate ``{"basename": str, "bytes": int, "hashes": {algo: hex}}``."""
        if not isinstance(obj, dict):
            raise IndexFormatError(f'{where}: expected a file object, got {type(obj).__name__}.')
        if set(obj) != {'basename', 'bytes', 'hashes'}:
            raise IndexFormatError(f'{where}: a file object has exactly the keys basename, bytes, hashes; got '
                                   f'{sorted(obj)}.')
        basename = check_basename(obj['basename'], where)
        size = obj['bytes']
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise IndexFormatError(f'{where}: "bytes" must be a non-negative integer, got {size!r}.')
        hashes = obj['hashes']
        if not isinstance(hashes, dict) or not all(isinstance(k, str) and isinstance(v, str) and _HEX.fullmatch(v)
                                                   for k, v in hashes.items()):
            raise IndexFormatError(f'{where}: "hashes" must map algorithm names to lowercase hex, got {hashes!r}.')
        return cls(basename, size, dict(hashes))

    def to_json(self) -> dict[str, Any]:
        """The index form of this file."""
        return {'basename': self.basename, 'bytes': self.bytes, 'hashes': dict(self.hashes)}


#: The error of an index with two ``shards`` keys (``json.loads`` would keep the last list, a streamed read both).
TWO_SHARDS_KEYS = ('Index file at {path} has two "shards" keys; an index has one list of shards (the file is corrupt '
                   'or was edited by hand): rewrite it with one.')


def present_copy(root: str, name: str, where: str, real_root: str | None = None) -> str | None:
    """The path of the file ``name`` under ``root`` when it is a safe name (:func:`check_basename`,
    :func:`resolve_inside`) and something is there; None otherwise (a name that would leave ``root`` is skipped:
    its index is refused when its shards are read)."""
    try:
        check_basename(name, where)
        path = resolve_inside(root, name, where, real_root)
    except (IndexFormatError, UnsafePathError):
        return None
    return path if os.path.lexists(path) else None


def parse_index_text(text: str | bytes, path: str) -> dict[str, Any]:
    """Parse and check the top level of an index: a JSON object with ``version == 2`` and a ``shards`` list.

    Unknown top-level keys are ignored (the reference does the same).

    Raises:
        IndexJSONError: the text is not valid JSON (a ``json.JSONDecodeError`` too, as in the reference).
        IndexFormatError: the text is not UTF-8, nests too deeply, is not a version 2 index, or has two ``shards``
            keys.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise IndexJSONError(f'Index file at {path} is empty or corrupted. {err}', err.doc, err.pos) from err
    except (UnicodeDecodeError, RecursionError) as err:
        raise IndexFormatError(f'Index file at {path} is empty or corrupted. {err}') from err
    if not isinstance(obj, dict):
        raise IndexFormatError(f'Index file at {path} is not a JSON object (got {type(obj).__name__}).')
    version = obj.get('version')
    if version != 2 or isinstance(version, bool):
        raise IndexFormatError(f'Unsupported streaming data version: {version!r} in {path}. Expected 2.')
    shards = obj.get('shards')
    if not isinstance(shards, list) or not all(isinstance(entry, dict) for entry in shards):
        raise IndexFormatError(f'Index file at {path}: "shards" must be a list of objects.')
    if may_have_two_shards_keys(text) and \
            [key for key, _ in json.loads(text, object_pairs_hook=_pairs)].count('shards') > 1:
        raise IndexFormatError(TWO_SHARDS_KEYS.format(path=path))
    return obj


def _pairs(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return pairs


def may_have_two_shards_keys(text: str | bytes) -> bool:
    r"""Whether an index text may have a second ``shards`` key: ``"shards"`` twice, or an escaped printable ASCII
    character (``json.dumps`` never writes one; a key can hide behind one, as in ``"\u0073hards"``)."""
    if isinstance(text, bytes):  # a backslash is found by memchr, many times faster than a longer pattern
        return text.count(b'"shards"') > 1 or (b'\\' in text and _ESCAPED_ASCII_BYTES.search(text) is not None)
    return text.count('"shards"') > 1 or ('\\' in text and _ESCAPED_ASCII.search(text) is not None)


def load_index(path: str) -> dict[str, Any]:
    """Read and check an ``index.json`` file."""
    with open(path, 'rb') as handle:
        data = handle.read()
    return parse_index_text(data, path)


def shard_readers(index: Mapping[str, Any], path: str, *, allow_unsafe_types: bool = False) -> list[Any]:
    """One reader per shard entry, built by the format plugin the entry names."""
    from streaming_core.machinery.lookup import get_registry
    formats = get_registry('format')
    readers = []
    for i, entry in enumerate(index['shards']):
        where = f'{path} shard {i}'
        name = entry.get('format')
        if not isinstance(name, str):
            raise IndexFormatError(f'{where}: missing or invalid "format" field: {name!r}.')
        if entry.get('version') != 2:
            raise IndexFormatError(f'{where}: unsupported shard version {entry.get("version")!r}; expected 2.')
        try:
            shard_format = formats.get(name)
        except UnknownNameError as err:
            raise UnknownNameError(f'{where}: {err}') from None
        readers.append(shard_format.reader(entry, allow_unsafe_types=allow_unsafe_types, where=where))
    return readers


def index_text(shards: Sequence[Mapping[str, Any]]) -> str:
    """The exact text a writer puts in ``index.json``."""
    return pyjson_sorted({'shards': list(shards), 'version': 2})


def write_index(path: str, shards: Sequence[Mapping[str, Any]], text: str | None = None) -> None:
    """Write ``index.json`` atomically (a temporary name, then a rename)."""
    from streaming_core.storage.facade import write_file_atomic
    write_file_atomic(path, (index_text(shards) if text is None else text).encode('utf-8'))

