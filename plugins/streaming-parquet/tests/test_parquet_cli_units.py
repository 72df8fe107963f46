"""``streaming inspect`` and ``streaming verify`` on Parquet files of several row groups (units that share a file):
a file's bytes are counted once, the counts say units and files, a remote file is downloaded once for all of its
units (into a scratch directory that holds one file at a time), and a bad file makes each of its units bad. Local
directories and a loopback HTTP server as the remote; the real CLI entry point, in process."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest
from parquet_data import write_parquet

from streaming_core import StreamingDataset
from streaming_core.cli import main
from streaming_core.common.paths import state_dir
from streaming_core.plugin_api import hookimpl
from streaming_core.reading.derived_index import DERIVED_INDEX_NAME
from streaming_core.testing import registered_plugin
from streaming_core.tools.commands.inspect import units_word


def _units() -> str:
    """How the CLI names Parquet units: 'row groups' once the format declares ``unit_word``, 'units' until then."""
    return units_word(['parquet'])


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if name.endswith('.parquet')}


def _parquet_dir(directory: str) -> list[int]:
    return write_parquet(directory, files=3, rows=70, row_group=30)  # row groups of 30, 30, 10 rows per file


def _with_index(directory: str, fmt: str = 'parquet') -> None:
    """Write next to the files the index the ``parquet`` builder derives for them (a streaming ``index.json``
    whose entries are row groups), so an HTTP server that cannot list serves the dataset; ``fmt`` renames the
    entries' format."""
    StreamingDataset(local=directory, batch_size=1)
    with open(os.path.join(state_dir(directory), DERIVED_INDEX_NAME), 'rb') as handle:
        index = json.loads(handle.read())
    for entry in index['shards']:
        entry['format'] = fmt
    with open(os.path.join(directory, 'index.json'), 'w') as handle:
        json.dump(index, handle)


def _count_downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each file ``streaming verify`` downloads, and check the scratch directory holds no other file then."""
    import streaming_core.tools.commands.verify as verify_module
    real = verify_module.download_file
    fetched: list[str] = []

    def counting(url: str, path: str, **kwargs: Any) -> Any:
        fetched.append(url.rsplit('/', 1)[-1])
        scratch = os.path.dirname(path)
        assert os.listdir(scratch) == [], f'{os.listdir(scratch)} still in the scratch directory'
        return real(url, path, **kwargs)

    monkeypatch.setattr(verify_module, 'download_file', counting)
    return fetched


def test_inspect_counts_each_file_once(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    _parquet_dir(data)
    sizes = _sizes(data)
    code, text, _ = _run(capsys, 'inspect', data, '--shards')
    assert code == 0
    assert f'parquet (9 {_units()} in 3 files)' in text and f'Shards:        9 {_units()} in 3 files' in text
    lines = {line.split(':')[0]: line for line in text.splitlines() if ':' in line}
    assert lines['Raw bytes'].endswith(f'({sum(sizes.values())} B)')  # each file once, not once per row group
    assert f'per {_units()[:-1]}: min 10, mean 23.3, max 30' in text and 'Largest file' in lines
    assert text.count('(same file as shard 0)') == 2 and text.count('(same file as shard 6)') == 2
    code, text, _ = _run(capsys, 'inspect', data, '--json', '--shards')
    summary = json.loads(text)
    assert (summary['shards'], summary['files'], summary['files_per_format']) == (9, 3, {'parquet': 3})
    assert summary['raw_bytes'] == sum(sizes.values()) and summary['largest_shard_bytes'] == max(sizes.values())
    assert [row['file_shard'] for row in summary['shard_list']] == [0, 0, 0, 3, 3, 3, 6, 6, 6]


def test_verify_checks_each_local_file_once(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    _parquet_dir(data)
    sizes = _sizes(data)
    code, text, _ = _run(capsys, 'verify', data, '--json')
    report = json.loads(text)
    assert code == 0 and report['bad'] == 0
    assert [r['file_shard'] for r in report['results']] == [0, 0, 0, 3, 3, 3, 6, 6, 6]
    assert sum(r['checked_bytes'] for r in report['results']) == sum(sizes.values())  # each file read once
    assert sum(r['samples'] for r in report['results']) == 210
    code, text, _ = _run(capsys, 'verify', data, '--quiet')
    assert code == 0 and f'Verified 9 {_units()} in 3 files, 210 samples' in text


@pytest.mark.slow
def test_remote_files_are_downloaded_once_and_a_bad_one_fails_its_units(tmp_path: Any, capsys: Any,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        http_server: Any) -> None:
    remote_dir = os.path.join(http_server.root, 'parquet-units')
    _parquet_dir(remote_dir)
    _with_index(remote_dir)
    sizes = _sizes(remote_dir)
    url = f'{http_server.url}/parquet-units'
    code, text, _ = _run(capsys, 'inspect', url, '--json')
    summary = json.loads(text)
    assert code == 0 and (summary['shards'], summary['files']) == (9, 3)
    assert summary['raw_bytes'] == sum(sizes.values())
    fetched = _count_downloads(monkeypatch)
    code, text, _ = _run(capsys, 'verify', url, '--quiet')
    assert code == 0 and f'Verified 9 {_units()} in 3 files, 210 samples' in text, text
    assert fetched == list(sizes)  # each file once, for all of its row groups
    # A truncated file: each of its units is bad, with the file's problem; the others decode.
    middle = os.path.join(remote_dir, list(sizes)[1])
    with open(middle, 'r+b') as handle:
        handle.truncate(sizes[list(sizes)[1]] - 100)
    fetched.clear()
    code, text, _ = _run(capsys, 'verify', url, '--quiet')
    assert code == 1 and 'FAILED: 3 of 9 shards are bad: 3, 4, 5' in text, text
    assert text.count(f'{list(sizes)[1]}: {sizes[list(sizes)[1]] - 100} bytes, but the index declares') == 3
    assert fetched == list(sizes)


class _RowGroupFormat:
    """The ``parquet`` format under another name, declaring the word for its units."""

    name = 'parquet-rg'
    units_share_files = True
    unit_word = 'row group'

    def reader(self, entry: Any, *, allow_unsafe_types: bool = False, where: str = '') -> Any:
        from streaming_parquet.reader import ParquetReader
        return ParquetReader({**entry, 'format': 'parquet'}, allow_unsafe_types=allow_unsafe_types, where=where)


class _Plugin:
    @hookimpl
    def register_shard_formats(self, registry: Any) -> None:
        registry.add('parquet-rg', _RowGroupFormat())


def test_a_format_names_its_units(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    _parquet_dir(data)
    _with_index(data, fmt='parquet-rg')
    with registered_plugin(_Plugin(), 'row-group-words'):
        code, text, _ = _run(capsys, 'inspect', data)
        assert code == 0 and 'parquet-rg (9 row groups in 3 files)' in text
        assert 'Shards:        9 row groups in 3 files' in text and 'per row group: min 10' in text
        code, text, _ = _run(capsys, 'verify', data, '--quiet')
        assert code == 0 and 'Verified 9 row groups in 3 files, 210 samples' in text, text
    shutil.rmtree(data)
