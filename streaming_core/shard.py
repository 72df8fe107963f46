"""Format-independent parts of reading a shard entry: key and type validation, the files it is made of."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from streaming_core.errors import IndexFormatError
from streaming_core.index import FileInfo

__all__ = ['ShardReaderBase', 'require_type']


def require_type(entry: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str,
                 nullable: bool = False) -> Any:
    """``entry[key]`` after checking its type (``bool`` never counts as ``int``)."""
    value = entry[key]
    if value is None and nullable:
        return None
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in (
        types if isinstance(types, tuple) else (types,)))
    if not ok:
        names = types.__name__ if isinstance(types, type) else ' or '.join(t.__name__ for t in types)
        raise IndexFormatError(f'{where}: "{key}" must be {names}{" or null" if nullable else ""}, got {value!r}.')
    return value


class ShardReaderBase:
    """Validates the keys every format shares and exposes the shard's files.

    Subclasses set :attr:`format_name`, :attr:`entry_keys` (the exact key set of an entry), :attr:`part_names`
    (``('data',)`` for single-file formats, ``('data', 'meta')`` for split ones), parse their own keys in
    :meth:`parse` and implement :meth:`open`.
    """

    format_name: ClassVar[str] = ''
    entry_keys: ClassVar[frozenset[str]] = frozenset()
    part_names: ClassVar[tuple[str, ...]] = ('data',)

    def __init__(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> None:
        where = where or f'{self.format_name} shard'
        self.where = where
        keys = set(entry)
        if keys != set(self.entry_keys):
            extra = sorted(keys - self.entry_keys)
            missing = sorted(self.entry_keys - keys)
            raise IndexFormatError(f'{where}: a {self.format_name} shard entry has unexpected keys {extra} and is '
                                   f'missing keys {missing}.')
        if entry['format'] != self.format_name:
            raise IndexFormatError(f'{where}: format {entry["format"]!r} given to the {self.format_name} reader.')
        samples = require_type(entry, 'samples', int, where)
        if samples < 0:
            raise IndexFormatError(f'{where}: "samples" must not be negative, got {samples}.')
        self.samples: int = samples
        self.compression: str | None = require_type(entry, 'compression', str, where, nullable=True) or None
        hashes = require_type(entry, 'hashes', list, where)
        if not all(isinstance(h, str) for h in hashes):
            raise IndexFormatError(f'{where}: "hashes" must be a list of strings, got {hashes!r}.')
        self.hashes: list[str] = list(hashes)
        self.size_limit = require_type(entry, 'size_limit', (int, str), where, nullable=True)
        parts = []
        for part in self.part_names:
            raw = FileInfo.from_json(entry[f'raw_{part}'], f'{where} raw_{part}')
            zipped_obj = entry[f'zip_{part}']
            zipped = None if zipped_obj is None else FileInfo.from_json(zipped_obj, f'{where} zip_{part}')
            if zipped is not None and self.compression is None:
                raise IndexFormatError(f'{where}: Shard is invalid: compression was not used, but has a compressed '
                                       f'form (zip_{part}).')
            if zipped is None and self.compression is not None:
                raise IndexFormatError(f'{where}: compression {self.compression!r} is set but zip_{part} is null.')
            parts.append((raw, zipped))
        self.parts: list[tuple[FileInfo, FileInfo | None]] = parts
        if self.compression is not None:
            from streaming_core.compression import parse_compression
            try:
                parse_compression(self.compression)
            except ValueError as err:
                raise IndexFormatError(f'{where}: {err}') from err
        self.allow_unsafe_types = allow_unsafe_types
        self.parse(entry, where)

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate and store the format's own keys (override)."""

    def open(self, paths: Sequence[str]) -> Any:
        """Open the shard from its local raw files (override)."""
        raise NotImplementedError

    @property
    def raw_bytes(self) -> int:
        """Total size of the uncompressed files."""
        return sum(raw.bytes for raw, _ in self.parts)

    @property
    def zip_bytes(self) -> int:
        """Total size of the compressed files (0 when uncompressed)."""
        return sum(z.bytes for _, z in self.parts if z is not None)

    @property
    def max_size(self) -> int:
        """The most disk this shard occupies at once (raw plus zip)."""
        return self.raw_bytes + self.zip_bytes

    def __repr__(self) -> str:
        return f'<{type(self).__name__} {self.parts[0][0].basename} samples={self.samples}>'
