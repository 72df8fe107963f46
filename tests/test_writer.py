"""Writer machinery: keyword arguments and their validation, size_limit parsing, the flush rule (spec 2.4, 3.3),
shard naming and counts, exist_ok, the 4 GiB guard, sample validation and determinism."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from streaming_core.errors import CodecError, UnknownNameError
from streaming_core.util import bytes_to_int
from streaming_core.writing import writer as writer_module
from streaming_core.writing.writer import MissingColumnError, ShardTooLargeError, parse_size_limit

mds = pytest.importorskip('streaming_mds')
jsonl = pytest.importorskip('streaming_jsonl')
csv = pytest.importorskip('streaming_csv')
MDSWriter, JSONWriter = mds.MDSWriter, jsonl.JSONWriter
CSVWriter, TSVWriter, XSVWriter = csv.CSVWriter, csv.TSVWriter, csv.XSVWriter

COLUMNS = {'words': 'str', 'number': 'int', 'x': 'float'}
WRITERS = {
    'mds': lambda out, **kw: MDSWriter(columns={'words': 'str', 'number': 'int', 'x': 'float32'}, out=out, **kw),
    'json': lambda out, **kw: JSONWriter(columns=COLUMNS, out=out, **kw),
    'csv': lambda out, **kw: CSVWriter(columns=COLUMNS, out=out, **kw),
    'tsv': lambda out, **kw: TSVWriter(columns=COLUMNS, out=out, **kw),
    'xsv': lambda out, **kw: XSVWriter(columns=COLUMNS, separator='|', out=out, **kw),
}


def sample(i: int, width: int = 4) -> dict[str, Any]:
    return {'words': f'w{i:0{width}d}', 'number': i, 'x': float(i)}


def index_of(root: str) -> dict[str, Any]:
    with open(os.path.join(root, 'index.json')) as handle:
        return json.load(handle)


# ---------------------------------------------------------------------------------------------------------------
# bytes_to_int and size_limit (spec 7.1)


@pytest.mark.parametrize('value,expected', [
    (1234, 1234), (35.78, 35), ('1234', 1234), ('1234b', 1234), ('  1234 B ', 1234), ('1kb', 1024),
    (' 100 kb', 102400), ('1.39gb', 1492501135), ('2mb', 2 << 20), ('1tb', 1 << 40), ('1pb', 1 << 50),
    ('1eb', 1 << 60), ('1zb', 1 << 70), ('1yb', 1 << 80), ('1.5KB', 1536), ('0', 0),
    ('512MiB', 512 << 20), ('1kib', 1024), ('1.5 GiB', 3 << 29),  # the binary prefixes (a superset of the reference)
])
def test_bytes_to_int_table(value: Any, expected: int) -> None:
    assert bytes_to_int(value) == expected


@pytest.mark.parametrize('value', ['', '12kbb', '27mxb', '79kkb', 'kb', '1k', '1ki', '1kibb', '1iib'])
def test_bytes_to_int_errors(value: str) -> None:
    with pytest.raises(ValueError, match='Unsupported value/suffix'):
        bytes_to_int(value)


@pytest.mark.parametrize('value,expected', [
    (None, None), (0, None), ('', None), ('0', 0), ('1kb', 1024), (1 << 26, 1 << 26), ((1 << 32) - 1, (1 << 32) - 1),
])
def test_size_limit_parsing(value: Any, expected: int | None) -> None:
    assert parse_size_limit(value) == expected


@pytest.mark.parametrize('value,match', [(-1, 'greater than zero'), (1 << 32, 'less than 2\\*\\*32'),
                                         ('4gb', 'less than 2\\*\\*32')])
def test_size_limit_errors(value: Any, match: str, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match=match):
        WRITERS['mds'](str(tmp_path / 'out'), size_limit=value)
    assert not (tmp_path / 'out').exists()  # validation happens before anything is created


def test_zero_string_size_limit_is_stored_and_means_no_limit(tmp_path: Any) -> None:
    with WRITERS['mds'](str(tmp_path / 'out'), size_limit='0') as writer:
        for i in range(50):
            writer.write(sample(i))
    shards = index_of(str(tmp_path / 'out'))['shards']
    assert len(shards) == 1 and shards[0]['size_limit'] == 0


# ---------------------------------------------------------------------------------------------------------------
# Keyword arguments and their validation


@pytest.mark.parametrize('kwargs,error,match', [
    ({'bogus': 1}, ValueError, "Invalid Writer argument\\(s\\): \\['bogus'\\]"),
    ({'hashes': ['sha256', 'md5']}, ValueError, 'Hashes must be unique and in sorted order.'),
    ({'hashes': ['sha3']}, ValueError, 'Invalid hash: sha3'),
    ({'hashes': 'sha1'}, ValueError, 'Invalid hashes'),
    ({'compression': 'zstd:0'}, ValueError, 'Invalid compression: zstd:0'),
    ({'compression': 'zstd:07'}, ValueError, 'Invalid compression: zstd:07'),
    ({'compression': 'snappy:1'}, ValueError, 'Invalid compression: snappy:1'),
    ({'compression': 'gzip'}, ValueError, 'Invalid compression: gzip'),
    ({'compression': 'br:99'}, ValueError, 'Invalid compression'),
    ({'retry': 0}, ValueError, 'retry must be an integer of at least 1'),
    ({'retry': 1.5}, ValueError, 'retry must be'),
    ({'max_workers': 0}, ValueError, 'max_workers must be a positive integer'),
])
@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_kwarg_validation(fmt: str, kwargs: dict[str, Any], error: type, match: str, tmp_path: Any) -> None:
    with pytest.raises(error, match=match):
        WRITERS[fmt](str(tmp_path / 'out'), **kwargs)
    assert not (tmp_path / 'out').exists()


def test_duplicate_hashes_pass_like_the_reference(tmp_path: Any) -> None:
    with WRITERS['mds'](str(tmp_path / 'out'), hashes=['sha1', 'sha1']) as writer:
        writer.write(sample(0))
    assert index_of(str(tmp_path / 'out'))['shards'][0]['hashes'] == ['sha1', 'sha1']


@pytest.mark.parametrize('out,match', [('', 'empty string'), (('a',), 'tuple'), (('a', 'b', 'c'), 'tuple'),
                                       (5, 'Invalid `out`'), (('s3://b/x', '/tmp/y'), 'local directory')])
def test_out_validation(out: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WRITERS['mds'](out)


def test_unknown_remote_scheme(tmp_path: Any) -> None:
    with pytest.raises(UnknownNameError, match='Invalid Cloud provider prefix: nosuch'):
        WRITERS['mds']((str(tmp_path / 'out'), 'nosuch://bucket/x'))


def test_progress_bar_and_max_workers(tmp_path: Any) -> None:
    with WRITERS['json'](str(tmp_path / 'out'), progress_bar=True, max_workers=2, retry=3) as writer:
        for i in range(3):
            writer.write(sample(i))
    assert index_of(str(tmp_path / 'out'))['shards'][0]['samples'] == 3


# ---------------------------------------------------------------------------------------------------------------
# get_config


def test_get_config_of_every_writer(tmp_path: Any) -> None:
    base = {'compression': 'zstd:7', 'hashes': ['sha1', 'xxh3_64'], 'size_limit': 1 << 20, 'version': 2}
    kwargs = {'compression': 'zstd:7', 'hashes': ['sha1', 'xxh3_64'], 'size_limit': '1mb'}
    configs = {fmt: make(str(tmp_path / fmt), **kwargs).get_config() for fmt, make in WRITERS.items()}
    assert configs['mds'] == {**base, 'format': 'mds', 'column_encodings': ['int', 'str', 'float32'],
                              'column_names': ['number', 'words', 'x'], 'column_sizes': [8, None, 4]}
    assert configs['json'] == {**base, 'format': 'json', 'columns': COLUMNS, 'newline': '\n'}
    xsv = {**base, 'column_encodings': ['int', 'str', 'float'], 'column_names': ['number', 'words', 'x'],
           'newline': '\n'}
    assert configs['xsv'] == {**xsv, 'format': 'xsv', 'separator': '|'}
    assert configs['csv'] == {**xsv, 'format': 'csv'}
    assert configs['tsv'] == {**xsv, 'format': 'tsv'}


# ---------------------------------------------------------------------------------------------------------------
# The flush rule


def _mds_overhead(tmp_path: Any, size_limit: int) -> int:
    writer = WRITERS['mds'](str(tmp_path / 'probe'), size_limit=size_limit)
    return writer.extra_bytes_per_shard


@pytest.mark.parametrize('size_limit', [1 << 10, 1 << 12, 5000])
def test_number_of_files_formula(size_limit: int, tmp_path: Any) -> None:
    total = 1000
    out = str(tmp_path / 'out')
    with WRITERS['mds'](out, size_limit=size_limit) as writer:
        for i in range(total):
            writer.write(sample(i))
    bytes_per_sample = 4 + 8 + 5 + 4 + 4  # head, int, 'wNNNN', float32, offset entry
    per_shard = (size_limit - _mds_overhead(tmp_path, size_limit)) // bytes_per_sample
    shards = index_of(out)['shards']
    assert [s['samples'] for s in shards] == [per_shard] * (total // per_shard) + \
        ([total % per_shard] if total % per_shard else [])
    assert len(os.listdir(out)) == -(-total // per_shard) + 1
    assert all(s['raw_data']['bytes'] <= size_limit for s in shards)


@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_empty_first_shard_quirk_and_oversize_samples(fmt: str, tmp_path: Any) -> None:
    out = str(tmp_path / 'out')
    big = {'words': 'x' * 400, 'number': 1, 'x': 1.0}
    with WRITERS[fmt](out, size_limit=300) as writer:
        writer.write(big)  # larger than the limit: shard 0 is flushed empty, big goes into shard 1
        writer.write(sample(1))  # does not fit next to big: shard 1 = [big]
        writer.write(sample(2))  # fits next to sample 1
        writer.write(big)  # shard 2 = [sample 1, sample 2]
        writer.write(big)  # shard 3 = [big]: each oversize sample ends up alone
        writer.write(sample(3))  # shard 4 = [big]; the last shard = [sample 3]
    counts = [s['samples'] for s in index_of(out)['shards']]
    assert counts == [0, 1, 2, 1, 1, 1]
    assert index_of(out)['shards'][0]['raw_data']['basename'] == f'shard.00000.{fmt}'


def test_split_formats_count_only_sample_lines(tmp_path: Any) -> None:
    out = str(tmp_path / 'out')
    line = len('0,w0000,0.0\n')
    with WRITERS['csv'](out, size_limit=3 * line) as writer:
        for i in range(7):
            writer.write({'words': f'w{i:04d}', 'number': 0, 'x': 0.0})
    assert [s['samples'] for s in index_of(out)['shards']] == [3, 3, 1]


def test_no_empty_trailing_shard_and_names(tmp_path: Any) -> None:
    out = str(tmp_path / 'out')
    with WRITERS['json'](out, size_limit=60, compression='gz') as writer:
        for i in range(6):
            writer.write(sample(i))
    shards = index_of(out)['shards']
    assert all(s['samples'] > 0 for s in shards)
    names = sorted(os.listdir(out))
    assert names == sorted(['index.json'] + [f'shard.{i:05}.json{m}.gz' for i in range(len(shards))
                                             for m in ('', '.meta')])


# ---------------------------------------------------------------------------------------------------------------
# exist_ok


@pytest.mark.parametrize('fmt,files', [('mds', 2), ('json', 3), ('csv', 3), ('tsv', 3), ('xsv', 3)])
def test_exist_ok(fmt: str, files: int, tmp_path: Any) -> None:
    out = str(tmp_path / 'out')
    with WRITERS[fmt](out, size_limit=100) as writer:
        for i in range(20):
            writer.write(sample(i))
    assert len(os.listdir(out)) > files
    with pytest.raises(FileExistsError, match='Directory is not empty') as refused:
        WRITERS[fmt](out)
    from streaming_core.errors import DirectoryNotEmptyError
    assert isinstance(refused.value, DirectoryNotEmptyError)  # as docs/migrating.md says: caught by our class too
    with WRITERS[fmt](out, exist_ok=True) as writer:
        writer.write(sample(0))
    assert len(os.listdir(out)) == files
    assert index_of(out)['shards'][0]['samples'] == 1


def test_not_a_directory(tmp_path: Any) -> None:
    path = tmp_path / 'file'
    path.write_text('x')
    with pytest.raises(NotADirectoryError):
        WRITERS['mds'](str(path))


# ---------------------------------------------------------------------------------------------------------------
# 4 GiB guard (with a small patched limit)


@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_shard_over_offset_limit_without_size_limit_raises(fmt: str, tmp_path: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, 'MAX_SHARD_BYTES', 2000 if fmt == 'mds' else 1000)
    writer = WRITERS[fmt](str(tmp_path / 'out'), size_limit=None)
    with pytest.raises(ShardTooLargeError, match='would pass 4 GiB'):
        for i in range(1000):
            writer.write(sample(i))
    assert i > 10  # samples were written until the limit was near


def test_sample_over_offset_limit_raises_even_with_size_limit(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, 'MAX_SHARD_BYTES', 2000)
    with WRITERS['mds'](str(tmp_path / 'out'), size_limit=1000) as writer:
        writer.write(sample(0))
        with pytest.raises(ShardTooLargeError, match='does not fit'):
            writer.write({'words': 'x' * 3000, 'number': 1, 'x': 1.0})
        writer.write({'words': 'x' * 1500, 'number': 1, 'x': 1.0})  # over size_limit but under the hard limit
    assert [s['samples'] for s in index_of(str(tmp_path / 'out'))['shards']] == [1, 1]


# ---------------------------------------------------------------------------------------------------------------
# Samples


@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_missing_column(fmt: str, tmp_path: Any) -> None:
    writer = WRITERS[fmt](str(tmp_path / 'out'))
    with pytest.raises(MissingColumnError, match="no column 'x'") as info:
        writer.write({'words': 'a', 'number': 1})
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize('fmt', ['json', 'csv', 'tsv', 'xsv'])
@pytest.mark.parametrize('bad', [{'number': 1.0}, {'x': 1}, {'words': 3}, {'number': '1'}])
def test_text_format_type_checks(fmt: str, bad: dict[str, Any], tmp_path: Any) -> None:
    writer = WRITERS[fmt](str(tmp_path / 'out'))
    with pytest.raises(CodecError):
        writer.write({**sample(0), **bad})
    writer.write({**sample(0), 'number': True})  # bool counts as int


def test_mds_fixed_size_bypass_checked(tmp_path: Any) -> None:
    writer = WRITERS['mds'](str(tmp_path / 'out'))
    with pytest.raises(CodecError, match='Unexpected data size'):
        writer.write({**sample(0), 'number': b'\x01\x02'})
    writer.write({**sample(0), 'number': b'\x01' * 8, 'words': b'raw'})


def test_mds_unknown_encoding(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="MDSWriter passed column 'a' with encoding 'nope' is unsupported"):
        MDSWriter(columns={'a': 'nope'}, out=str(tmp_path / 'out'))
    with pytest.raises(CodecError):
        MDSWriter(columns={'a': 'str:x'}, out=str(tmp_path / 'out'))
    assert not (tmp_path / 'out').exists()


def test_write_after_finish(tmp_path: Any) -> None:
    writer = WRITERS['mds'](str(tmp_path / 'out'))
    writer.finish()
    writer.finish()  # idempotent
    with pytest.raises(RuntimeError, match='finished'):
        writer.write(sample(0))


@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_deterministic_bytes(fmt: str, tmp_path: Any) -> None:
    for name in ('a', 'b'):
        with WRITERS[fmt](str(tmp_path / name), size_limit=500, hashes=['md5', 'sha1'], compression='zstd') as w:
            for i in range(100):
                w.write(sample(i))
    files = sorted(os.listdir(tmp_path / 'a'))
    assert files == sorted(os.listdir(tmp_path / 'b'))
    for name in files:
        assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes()


@pytest.mark.parametrize('kind', ['mds', 'json'])
def test_a_writer_shared_by_threads_keeps_every_sample_once(tmp_path: Any, kind: str) -> None:
    """Threads writing through one writer (a thread pool feeding it) while it flushes small shards: every sample is
    read back exactly once. The buffer used to be swapped out under a concurrent ``write``, losing and repeating
    samples."""
    import sys
    import threading

    from streaming_core import StreamingDataset
    out = str(tmp_path / kind)
    writer = WRITERS[kind](out, size_limit=300)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=lambda b=b: [writer.write(sample(b + i, 6)) for i in range(1000)])
                   for b in (0, 100_000, 200_000)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    writer.finish()
    got = sorted(int(s['number']) for s in StreamingDataset(local=out, batch_size=1))
    assert got == sorted(b + i for b in (0, 100_000, 200_000) for i in range(1000))
    with pytest.raises(RuntimeError, match='finished'):
        writer.write(sample(1))


def test_a_second_process_writing_the_same_output_is_refused(tmp_path):
    """Two processes writing one directory (or remote) at once overwrote each other's shards and both reported
    success: the dataset read 50 samples mixed from both. The second is refused, naming the first process; once the
    first finishes (or is killed) the output can be written again."""
    import signal
    import subprocess
    import sys
    import time
    out, remote = str(tmp_path / 'ds'), f'file://{tmp_path / "remote"}'
    holder = ('import sys, time\n'
              'from streaming_mds import MDSWriter\n'
              'out = sys.argv[1] if len(sys.argv) < 3 else (sys.argv[1] + "-local", sys.argv[2])\n'
              'writer = MDSWriter(out=out, columns={"id": "int"})\n'
              'writer.write({"id": 1})\n'
              'print("holding", flush=True)\n'
              'sys.stdin.readline()\n'
              'writer.finish()\n')
    from streaming_core.errors import OutputBusyError
    for target in ((out,), (out, remote)):
        first = subprocess.Popen([sys.executable, '-c', holder, *target], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
        assert first.stdout.readline().strip() == 'holding'
        given = target[0] if len(target) == 1 else (str(tmp_path / 'other-local'), target[1])
        with pytest.raises(OutputBusyError, match=rf'Another writer is writing to .*\(process {first.pid}\)'):
            MDSWriter(out=given, columns={'id': 'int'}, exist_ok=True)
        if len(target) == 1:
            first.communicate('\n', timeout=60)
            assert first.returncode == 0
        else:
            first.send_signal(signal.SIGKILL)  # a crash releases it
            first.wait(timeout=60)
            time.sleep(0.1)
        with MDSWriter(out=given, columns={'id': 'int'}, exist_ok=True) as writer:
            writer.write({'id': 2})


def test_a_directory_named_as_one_writer_s_output_and_another_s_remote_is_one_output(tmp_path):
    """A process writing ``out=D`` and another writing ``out=(staging, D)`` (or ``file://D``: an NFS mount used as the
    remote) were not told apart: both finished, and D's index mixed their shards (half of one writer's samples lost).
    The second is refused, naming the first; and the other way round."""
    import json
    import subprocess
    import sys

    from streaming_core.errors import OutputBusyError
    holder = ('import json, sys\n'
              'from streaming_mds import MDSWriter\n'
              'out = json.loads(sys.argv[1])\n'
              'writer = MDSWriter(out=tuple(out) if isinstance(out, list) else out, columns={"id": "int"})\n'
              'writer.write({"id": 1})\n'
              'print("holding", flush=True)\n'
              'sys.stdin.readline()\n'
              'writer.finish()\n')
    for k in range(3):
        shared, staging = str(tmp_path / f'shared-{k}'), str(tmp_path / f'staging-{k}')
        held, given = [(shared, (staging, shared)), (shared, (staging, f'file://{shared}')),
                       ([staging, shared], shared)][k]
        first = subprocess.Popen([sys.executable, '-c', holder, json.dumps(held)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
        try:
            assert first.stdout.readline().strip() == 'holding'
            with pytest.raises(OutputBusyError, match=rf'Another writer is writing to .*\(process {first.pid}\)'):
                MDSWriter(out=given, columns={'id': 'int'}, exist_ok=True)
        finally:
            first.communicate('\n', timeout=60)
        assert first.returncode == 0


def test_the_output_lock_stays_while_any_writer_of_the_process_holds_it(tmp_path):
    """Record locks belong to the process: a second writer of the same output in the process, finished first, must
    not drop the lock the first still needs (closing its descriptor did, and another process then cleared the first
    writer's shards). A cache root that cannot be written leaves writers unlocked, not failing."""
    import subprocess
    import sys
    out = str(tmp_path / 'ds')
    probe = ('import sys\n'
             'from streaming_core.errors import OutputBusyError\n'
             'from streaming_mds import MDSWriter\n'
             'try:\n'
             '    MDSWriter(out=sys.argv[1], columns={"id": "int"}, exist_ok=True).finish()\n'
             '    print("written")\n'
             'except OutputBusyError:\n'
             '    print("busy")\n')

    def other_process() -> str:
        return subprocess.run([sys.executable, '-c', probe, out], capture_output=True, text=True, check=True,
                              cwd=str(tmp_path)).stdout.strip()

    first = MDSWriter(out=out, columns={'id': 'int'})
    first.write({'id': 1})
    second = MDSWriter(out=out, columns={'id': 'int'}, exist_ok=True)
    second.finish()
    assert other_process() == 'busy'
    first.finish()
    assert other_process() == 'written'


def test_finish_after_a_failed_finish_raises_again(tmp_path: Any) -> None:
    """``try: writer.finish() except UploadError: writer.finish()``: the second call returned normally with nothing
    committed, so a retry loop took the dataset for written. It raises again, saying the dataset was not committed
    and must be written again; a second call after a commit still does nothing."""
    from streaming_core.errors import UploadError
    local, remote = str(tmp_path / 'local'), str(tmp_path / 'remote')
    writer = MDSWriter(columns={'id': 'int'}, out=(local, remote), size_limit=100, retry=1)
    for i in range(5):
        writer.write({'id': i})
    last = os.path.join(remote, f'shard.{len(writer.shards):05}.mds')  # the shard finish() flushes
    os.makedirs(os.path.join(last, 'in-the-way'))  # its upload cannot succeed
    with pytest.raises(UploadError, match='upload'):
        writer.finish()
    with pytest.raises(UploadError, match=r"finish\(\) failed, so the dataset was not committed.*write the dataset "
                                          r'again'):
        writer.finish()
    assert not os.path.exists(os.path.join(remote, 'index.json'))
    done = MDSWriter(columns={'id': 'int'}, out=str(tmp_path / 'ok'))
    done.write({'id': 1})
    done.finish()
    done.finish()


def test_a_writer_dropped_without_finish_says_its_samples_were_not_committed(tmp_path: Any,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A writer never finished (no ``with``, ``finish()`` forgotten) lost its samples with no word. Dropping it logs
    a warning naming the output and the number of samples; a finished or empty writer logs nothing."""
    import gc

    def convert(count: int, finish: bool) -> None:
        writer = MDSWriter(columns={'id': 'int'}, out=str(tmp_path / f'{count}-{finish}'))
        for i in range(count):
            writer.write({'id': i})
        if finish:
            writer.finish()

    with caplog.at_level('WARNING', logger='streaming_core.writing.writer'):
        convert(100, finish=False)
        gc.collect()
        assert [r.getMessage() for r in caplog.records] == [
            f'The mds writer of {tmp_path / "100-False"} was dropped without finish(): its 100 sample(s) were not '
            'committed (no index.json). Use it as a context manager (with ... as writer:) or call writer.finish().']
        caplog.clear()
        convert(100, finish=True)
        convert(0, finish=False)
        gc.collect()
        assert not caplog.records


def test_exist_ok_on_a_link_to_a_directory_replaces_what_the_directory_holds(tmp_path: Any) -> None:
    """``out`` a symbolic link to a non-empty directory with ``exist_ok=True``: the writer logged that it removed the
    contents, then failed with a bare ``OSError: Cannot call rmtree on a symbolic link`` naming no path. It empties
    the target (links inside are removed, never followed) and writes there; the link stays."""
    from streaming_core import StreamingDataset
    target, link, elsewhere = tmp_path / 'target', tmp_path / 'link', tmp_path / 'elsewhere'
    (target / 'old').mkdir(parents=True)
    (target / 'old' / 'shard.00000.mds').write_bytes(b'old')
    elsewhere.mkdir()
    (elsewhere / 'keep.txt').write_text('not ours')
    (target / 'to-elsewhere').symlink_to(elsewhere)
    link.symlink_to(target)
    with MDSWriter(columns={'id': 'int'}, out=str(link), exist_ok=True) as writer:
        for i in range(3):
            writer.write({'id': i})
    assert link.is_symlink() and sorted(os.listdir(target)) == ['index.json', 'shard.00000.mds']
    assert (elsewhere / 'keep.txt').read_text() == 'not ours'
    assert [int(s['id']) for s in StreamingDataset(local=str(link), batch_size=1)] == [0, 1, 2]


def test_abandon_commits_nothing_and_frees_the_output(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """``abandon()``: for code that must not commit a partial dataset when it fails. No index.json, no "dropped"
    warning when collected, ``finish()`` afterwards does nothing, and the output can be written again at once."""
    import gc
    out = str(tmp_path / 'out')
    writer = MDSWriter(columns={'id': 'int'}, out=out, size_limit=100)
    for i in range(10):
        writer.write({'id': i})
    with caplog.at_level('WARNING', logger='streaming_core.writing.writer'):
        writer.abandon()
        writer.finish()
        del writer
        gc.collect()
    assert not caplog.records and not os.path.exists(os.path.join(out, 'index.json'))
    with MDSWriter(columns={'id': 'int'}, out=out, exist_ok=True) as again:
        again.write({'id': 7})
    assert index_of(out)['shards'][0]['samples'] == 1


def test_the_output_key_of_a_path_is_the_path_as_the_writer_uses_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    """The writer does not expand ``~`` (``out='~/d'`` is ``./~/d``), so neither does its output's key: keyed as
    ``$HOME/d``, a second writer of ``./~/d`` was not refused and emptied the first one's directory."""
    from streaming_core.reading.cache_record import path_key, remote_key
    monkeypatch.chdir(tmp_path)
    assert path_key('~/d') == path_key('./~/d') == path_key(str(tmp_path / '~' / 'd'))
    assert path_key('~/d') != path_key(os.path.expanduser('~/d'))
    assert path_key(str(tmp_path / 'x')) == remote_key(str(tmp_path / 'x')) == remote_key(f'file://{tmp_path}/x')
