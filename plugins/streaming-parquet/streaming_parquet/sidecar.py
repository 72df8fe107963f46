"""The Parquet sidecar index, ``parquet-index.json``: every file's row groups and columns, so a stream reads one file
instead of every footer.

Indexing a directory reads each file's footer (one or two requests per file): a few milliseconds per file on a fast
store, but on the Hugging Face Hub each read is a ``resolve`` answered by a redirect, and 1,000 files cost about
2,000 requests before the first sample. ``streaming index DIR`` writes this sidecar next to the files (uploaded for
a remote directory); streams then read it in one request.

The file (JSON)::

    {"__kind__": "streaming-parquet-index-v1",
     "files": [{"name": "data/train-00000.parquet", "size": 123456, "etag": "...",
                "row_groups": [5000, 5000, 1200], "columns": [["id", "int64"], ["text", "string"]],
                "images": []}, ...]}

``name`` is relative to the directory holding the sidecar, ``etag`` is the store's when its listing gives one (else
absent), ``row_groups`` every row group's row count in file order (empty ones included, so the positions stay the
file's), ``columns`` the Arrow schema as ``[name, type]`` and ``images`` its Hugging Face image columns. A row is
used only for a listed file of the same size and, when both the row and the listing have one, the same etag; any
other file has its footer read. A file rewritten in place with the same size and no etag is caught when it is
opened (its row group's row count is checked against the index).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from streaming_core.plugin_api import IndexFormatError

__all__ = ['SIDECAR', 'KIND', 'Summary', 'summary_of', 'sidecar_json', 'read_sidecar', 'usable_row']

#: The sidecar's file name, in the directory of the files.
SIDECAR = 'parquet-index.json'
#: Its ``__kind__``.
KIND = 'streaming-parquet-index-v1'

#: What the index needs of one file: ``(row counts of every row group, [[column, arrow type], ...], image columns)``.
Summary = tuple[list[int], list[list[str]], list[str]]


def summary_of(metadata: Any) -> Summary:
    """The :data:`Summary` of a file from its ``pyarrow.parquet.FileMetaData``."""
    from streaming_parquet.builder import image_columns
    schema = metadata.schema.to_arrow_schema()
    rows = [int(metadata.row_group(group).num_rows) for group in range(metadata.num_row_groups)]
    return rows, [[field.name, str(field.type)] for field in schema], image_columns(metadata)


def sidecar_json(files: Sequence[Any], summaries: Sequence[Summary]) -> bytes:
    """The sidecar of ``files`` (listing entries: ``name``, ``size``, ``etag``) and their summaries."""
    rows = []
    for item, (groups, columns, images) in zip(files, summaries):
        row: dict[str, Any] = {'name': item.name, 'size': int(item.size)}
        if getattr(item, 'etag', None):
            row['etag'] = item.etag
        row.update(row_groups=list(groups), columns=columns, images=list(images))
        rows.append(row)
    return (json.dumps({'__kind__': KIND, 'files': rows}, indent=1) + '\n').encode('utf-8')


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_row(row: Any, number: int, shown: str) -> None:
    fine = (isinstance(row, dict) and isinstance(row.get('name'), str) and row['name'] and _is_count(row.get('size'))
            and isinstance(row.get('row_groups'), list) and all(_is_count(n) for n in row['row_groups'])
            and isinstance(row.get('columns'), list)
            and all(isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c) for c in row['columns'])
            and isinstance(row.get('images', []), list) and all(isinstance(v, str) for v in row.get('images', []))
            and (row.get('etag') is None or isinstance(row['etag'], str)))
    if not fine:
        raise IndexFormatError(f'{shown}: files row {number} needs "name", "size", "row_groups" (row counts), '
                               f'"columns" ([name, type] pairs) and optionally "etag" and "images", got {row!r}. '
                               f'Write it again with "streaming index", or remove it.')


def read_sidecar(data: bytes, shown: str) -> dict[str, dict[str, Any]]:
    """The rows of a sidecar by file name.

    Raises:
        IndexFormatError: not a Parquet sidecar, or a malformed row (naming the file and the row).
    """
    try:
        obj = json.loads(data)
    except ValueError as err:
        raise IndexFormatError(f'{shown} is not valid JSON ({err}); write it again with "streaming index" or remove '
                               f'it.') from None
    rows = obj.get('files') if isinstance(obj, dict) else None
    if not isinstance(rows, list) or obj.get('__kind__') != KIND:
        raise IndexFormatError(f'{shown} is not a Parquet sidecar index ({{"__kind__": "{KIND}", "files": [...]}}); '
                               f'write it again with "streaming index" or remove it.')
    found: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(rows):
        _check_row(row, number, shown)
        found[row['name']] = row
    return found


def usable_row(row: dict[str, Any] | None, item: Any) -> Summary | None:
    """The summary a sidecar row gives for the listed file ``item``, or None when the row is absent or describes
    another version of the file (another size, or another etag when both are known)."""
    if row is None or row['size'] != item.size:
        return None
    etag = getattr(item, 'etag', None)
    if row.get('etag') and etag and row['etag'] != etag:
        return None
    return list(row['row_groups']), [list(c) for c in row['columns']], list(row.get('images', []))
