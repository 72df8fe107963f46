"""The streamed index reader: the same entries as ``json.loads`` whatever the layout and chunking, one error per bad
file, and a big index converted to the binary form in bounded memory (a child process without torch)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from streaming_core.errors import IndexFormatError
from streaming_core.reading import index_file_stream as index_stream
from streaming_core.reading.binary_index import build_binary
from streaming_core.reading.index_file import parse_index_text
from streaming_core.reading.index_file_stream import iter_index_entries
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _entries(text: str | bytes, top: dict | None = None) -> list:
    data = text.encode('utf-8') if isinstance(text, str) else text
    return list(iter_index_entries(io.BytesIO(data), '/x/index.json', top))


@pytest.mark.parametrize('chunk', [1, 7, 1 << 20])
def test_same_entries_as_json_loads(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(index_stream, 'CHUNK', chunk)
    local = write_mds(str(tmp_path / 'ds'), 60, size_limit=300, compression='zstd', hashes=['sha1'])
    real = open(os.path.join(local, 'index.json'), 'rb').read()
    parsed = json.loads(real)
    texts = [real, json.dumps({'version': 2, 'shards': parsed['shards']}, indent=3),
             json.dumps({'shards': [{'n': 12345678901234, 'x': [1.5e3, None, True, 'é\u2603'], 'y': {}}],
                         'extra': {'k': [1, 2]}, 'version': 2}, ensure_ascii=False),
             '{"shards": [], "version": 2}', ' {\n"version":2 ,"shards":[ {} , {"a":-1}]}\n ']
    for text in texts:
        top: dict = {}
        assert _entries(text, top) == json.loads(text)['shards']
        assert top['version'] == 2


@pytest.mark.parametrize('text,message', [
    ('', 'empty or corrupted'),
    ('{"shards": [{"a": 1}, {"b"', 'empty or corrupted'),
    ('{"shards": [], "version": 3}', 'Unsupported streaming data version: 3'),
    ('{"shards": []}', 'Unsupported streaming data version: None'),
    ('[1, 2]', 'is not a JSON object'),
    ('{"version": 2}', '"shards" must be a list'),
    ('{"shards": {"a": 1}, "version": 2}', '"shards" must be a list'),
    ('{"shards": [], "version": 2} {}', 'extra data'),
    (b'{"shards": ["\xff"], "version": 2}', 'empty or corrupted'),
])
def test_bad_text_is_one_error_naming_the_file(text, message):
    with pytest.raises(IndexFormatError, match=message) as info:
        _entries(text)
    assert '/x/index.json' in str(info.value)


@pytest.mark.parametrize('chunk', [1, 3, 1 << 20])
@pytest.mark.parametrize('text', ['{"shards": [x], "version": 2}', '{"shards": [\n {"a": 1},\n  {"b": ]}',
                                  '{\n\n"version": 2,\n "shards": [{"a": tru}]}'])
def test_a_json_error_names_the_position_json_names(text, chunk, monkeypatch):
    """The position is counted in the whole file, as ``json`` counts it, however the file was read in chunks (it
    was counted in the chunk in memory: "line 1 column 1 (char 0)" for an error at char 12)."""
    monkeypatch.setattr(index_stream, 'CHUNK', chunk)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    where = expected.value.args[0].partition(': ')[2]
    with pytest.raises(IndexFormatError) as info:
        _entries(text)
    assert str(info.value).endswith(where) and where.startswith('line ')
    if isinstance(info.value, json.JSONDecodeError):  # its attributes say the same
        assert (info.value.lineno, info.value.colno, info.value.pos) == (
            expected.value.lineno, expected.value.colno, expected.value.pos)


@pytest.mark.parametrize('text', ['{"shards": [{"samples": 1}], "version": 2, "shards": []}',
                                  '{"shards": [{"samples": 1}], "\\u0073hards": [], "version": 2}'])
def test_two_shards_keys_are_refused_by_both_readers(text):
    """``json.loads`` keeps the last list, a streamed read would see both: the index is refused either way."""
    with pytest.raises(IndexFormatError, match='two "shards" keys'):
        _entries(text)
    for given in (text, text.encode()):
        with pytest.raises(IndexFormatError, match='two "shards" keys'):
            parse_index_text(given, '/x/index.json')


def test_escaped_names_are_not_taken_for_a_second_shards_key():
    text = json.dumps({'shards': [{'name': 'caf\u00e9 \u0000 "shards"', 'samples': 1}], 'version': 2})
    assert '\\u00e9' in text and _entries(text) == json.loads(text)['shards']
    assert parse_index_text(text, '/x/index.json') == json.loads(text)


def test_a_non_object_entry_is_refused_by_the_builder():
    with pytest.raises(IndexFormatError, match=r'/x/index.json.*shard 1 is int'):
        build_binary(iter_index_entries(io.BytesIO(b'{"shards": [{"samples": 0}, 5], "version": 2}'),
                                        '/x/index.json'), '/x/index.json', 'id')


_WRITE = '''
import json, sys
path, target = sys.argv[1], int(sys.argv[2])
entry = json.dumps({'column_encodings': ['bytes', 'int'], 'column_names': ['data', 'id'], 'column_sizes': [None, 8],
                    'compression': None, 'format': 'mds', 'hashes': ['sha1', 'xxh64'],
                    'raw_data': {'basename': 'shard.NAME.mds', 'bytes': 600,
                                 'hashes': {'sha1': 'SHA1' * 10, 'xxh64': 'XXH64' * 4}},
                    'samples': 8, 'size_limit': 600, 'version': 2, 'zip_data': None}, sort_keys=True)
template = entry.replace('%', '%%').replace('NAME', '%09d').replace('SHA1' * 10, '%040x').replace('XXH64' * 4, '%016x')
written, i = 0, 0
with open(path, 'w') as out:
    out.write('{"shards": [')
    while written < target:
        batch = ','.join([template % (j, j, j) for j in range(i, i + 10000)])
        out.write((',' if i else '') + batch)
        written += len(batch)
        i += 10000
    out.write('], "version": 2}')
print(i)
'''

_BUILD = '''
import os, sys, time
path, out = sys.argv[1], sys.argv[2]
def hwm():
    with open('/proc/self/status') as f:
        return [int(line.split()[1]) * 1024 for line in f if line.startswith('VmHWM:')][0]
from streaming_core.reading.binary_index import build_binary, open_binary, write_binary
from streaming_core.reading.index_file_stream import iter_index_entries
base = hwm()
start = time.perf_counter()
with open(path, 'rb') as handle:
    header, arrays = build_binary(iter_index_entries(handle, path), path, 'big', spill_dir=os.path.dirname(out))
write_binary(out, header, arrays)
seconds = time.perf_counter() - start
grown = hwm() - base
del header, arrays
header, arrays, mapping = open_binary(out, 'big')
print(header['num_shards'], int(arrays['samples'].sum()), grown, seconds, 'torch' in sys.modules)
'''


@pytest.mark.slow
def test_a_big_index_converts_in_bounded_memory(tmp_path):
    """At least 2 GB of index.json (STREAMING_CORE_BIG_INDEX_MB to change it) converts with peak memory growing by
    less than 64 MB whatever its size (the columns spill to disk), where json.loads needs several times the file's
    size."""
    megabytes = int(os.environ.get('STREAMING_CORE_BIG_INDEX_MB', '2048'))
    needed, free = (megabytes * 2 + 512) << 20, shutil.disk_usage(tmp_path).free  # the index, its spill, the binary
    assert free >= needed, (f'this test writes a {megabytes} MB index.json and its binary form under {tmp_path}: it '
                            f'needs {needed >> 20} MB free there, {free >> 20} MB are (free space, or set '
                            'STREAMING_CORE_BIG_INDEX_MB lower for a local run)')
    path = str(tmp_path / 'index.json')
    env = dict(os.environ, PYTHONPATH=ROOT)
    try:
        made = subprocess.run([sys.executable, '-c', textwrap.dedent(_WRITE), path, str(megabytes << 20)],
                              capture_output=True, text=True, env=env, timeout=1200)
        assert made.returncode == 0, made.stderr
        shards = int(made.stdout)
        size = os.path.getsize(path)
        assert size >= megabytes << 20
        built = subprocess.run([sys.executable, '-c', textwrap.dedent(_BUILD), path, str(tmp_path / 'index.bin')],
                               capture_output=True, text=True, env=env, timeout=1800)
        assert built.returncode == 0, built.stderr
    finally:  # pytest keeps the last runs' tmp_path: do not keep gigabytes there (a killed build's temporary too)
        for leftover in tmp_path.glob('index.*'):
            leftover.unlink()
    num, samples, grown, seconds, torch_loaded = built.stdout.split()
    assert (int(num), int(samples), torch_loaded) == (shards, 8 * shards, 'False')
    assert int(grown) < 64 << 20, f'peak memory grew by {int(grown) >> 20} MB for a {size >> 20} MB index'
    print(f'{size >> 20} MB, {shards} shards: {float(seconds):.1f} s, +{int(grown) >> 20} MB peak')
