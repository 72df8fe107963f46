"""Every bad compression, hash, encoding or scheme name is explained once (issue 12, item 6).

The message says what was given, what is valid and what to install, without repeating itself (it used to read
``Invalid compression: zstdd. 'zstdd' is not a supported compression algorithm.\\nUnknown compression 'zstdd'.``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from streaming_core.errors import IndexFormatError, UnknownNameError
from streaming_core.storage.compression import UnknownCompressionError, parse_compression
from streaming_core.storage.hashing import UnknownHashError, get_hash
from tests.fixtures.data import write_mds

mds = pytest.importorskip('streaming_mds')


def _error(call: Any, kind: type[BaseException] = Exception) -> str:
    with pytest.raises(kind) as info:
        call()
    return str(info.value)


def _once(text: str, *phrases: str) -> None:
    for phrase in phrases:
        assert text.count(phrase) == 1, f'{phrase!r} appears {text.count(phrase)} times in:\n{text}'


@pytest.mark.parametrize('writer', ['mds', 'json', 'csv'])
def test_writer_bad_compression(writer: str, tmp_path: Any) -> None:
    cls = {'mds': mds.MDSWriter, 'json': pytest.importorskip('streaming_jsonl').JSONWriter,
           'csv': pytest.importorskip('streaming_csv').CSVWriter}[writer]
    text = _error(lambda: cls(out=str(tmp_path / 'o'), columns={'a': 'int'}, compression='zstdd'), ValueError)
    _once(text, 'zstdd', 'Invalid compression: zstdd is not a supported compression algorithm.', "Did you mean 'zstd'?",
          'Installed compression names:')
    assert 'Unknown compression' not in text
    text = _error(lambda: cls(out=str(tmp_path / 'o'), columns={'a': 'int'}, compression='zstd:99'), ValueError)
    assert text == 'Invalid compression: zstd:99 is not a supported compression algorithm: zstd takes levels 1..22.'
    assert not (tmp_path / 'o').exists()


def test_bad_compression_is_one_error_of_both_kinds() -> None:
    with pytest.raises(UnknownCompressionError) as info:
        parse_compression('xz:3')
    assert isinstance(info.value, ValueError) and isinstance(info.value, LookupError)
    text = str(info.value)
    _once(text, 'xz:3', 'not a supported compression algorithm', 'Installed compression names:')
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert info.value.hint and info.value.hint in text


def test_uninstalled_first_party_compression_says_what_to_install() -> None:
    from streaming_core.testing import fresh_plugin_manager
    with fresh_plugin_manager(blocked=('compression',)):
        text = _error(lambda: parse_compression('zstd'), UnknownCompressionError)
    _once(text, 'Invalid compression: zstd is not a supported compression algorithm.', 'pip install '
          'streaming-compression', 'Installed compression names:')


def test_writer_bad_hash(tmp_path: Any) -> None:
    text = _error(lambda: mds.MDSWriter(out=str(tmp_path / 'o'), columns={'a': 'int'}, hashes=['sha11']),
                  UnknownHashError)
    _once(text, 'sha11', 'Invalid hash: sha11 is not a supported hash algorithm.', "Did you mean 'sha1'?",
          'Installed hash algorithm names:')
    assert 'Unknown hash' not in text
    assert isinstance(_error_object(lambda: get_hash('sha11')), ValueError)


def _error_object(call: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def test_writer_bad_encoding_names_the_column_once(tmp_path: Any) -> None:
    text = _error(lambda: mds.MDSWriter(out=str(tmp_path / 'o'), columns={'label': 'intt'}), TypeError)
    _once(text, 'intt', "MDSWriter passed column 'label' with encoding 'intt' is unsupported.", "Did you mean 'int'?",
          'Installed column encoding names:')
    assert 'Unsupported MDS encoding' not in text and 'Unknown column encoding' not in text


def test_reader_bad_encoding_once(tmp_path: Any) -> None:
    """An index naming an encoding no plugin provides: the reader's error names the file, the column, once."""
    from streaming_core import StreamingDataset
    local = write_mds(str(tmp_path / 'ds'), 5)
    path = os.path.join(local, 'index.json')
    with open(path) as handle:
        index = json.load(handle)
    for entry in index['shards']:
        entry['column_encodings'] = ['bytez' if e == 'bytes' else e for e in entry['column_encodings']]
    with open(path, 'w') as handle:
        json.dump(index, handle)
    text = _error(lambda: StreamingDataset(local=local, batch_size=1), UnknownNameError)
    _once(text, "'bytez'", "column 'data'", 'Installed column encoding names:')
    assert path in text and 'Unknown column encoding' not in text


def test_index_with_unknown_compression_once(tmp_path: Any) -> None:
    from streaming_core import StreamingDataset
    local = write_mds(str(tmp_path / 'ds'), 5, compression='zstd')
    path = os.path.join(local, 'index.json')
    with open(path) as handle:
        index = json.load(handle)
    for entry in index['shards']:
        entry['compression'] = 'zstdd'
    with open(path, 'w') as handle:
        json.dump(index, handle)
    text = _error(lambda: StreamingDataset(local=local, batch_size=1), IndexFormatError)
    _once(text, 'zstdd', 'not a supported compression algorithm', 'Installed compression names:')
    assert path in text


def test_unknown_output_scheme_once(tmp_path: Any) -> None:
    text = _error(lambda: mds.MDSWriter(out=(str(tmp_path / 'o'), 'nosuch://bucket/x'), columns={'a': 'int'}),
                  UnknownNameError)
    _once(text, 'Invalid Cloud provider prefix: nosuch', 'Installed storage scheme names:')
    assert 'Unknown storage scheme' not in text
