"""The `streaming` CLI: help, inspect, verify, merge-index, cache, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from streaming_core.cli import COMMANDS, build_parser, main
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_has_help_that_builds(capsys):
    parser = build_parser()
    text = parser.format_help()
    for name in COMMANDS:
        assert name in text
        with pytest.raises(SystemExit) as info:
            main([name, '--help'])
        assert info.value.code == 0
        assert capsys.readouterr().out.startswith(f'usage: streaming {name}')
    for kind in ('jsonl', 'csv', 'parquet', 'imagefolder'):
        with pytest.raises(SystemExit):
            main(['convert', kind, '--help'])
        assert '--workers' in capsys.readouterr().out


def test_console_script_runs():
    exe = os.path.join(os.path.dirname(sys.executable), 'streaming')
    if not os.path.exists(exe):
        pytest.skip('console script not installed')
    done = subprocess.run([exe, 'inspect', '/no/such/dir'], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().count('\n') == 0
    assert 'streaming inspect: error: No dataset at /no/such/dir' in done.stderr


def test_a_reader_that_leaves_the_pipe_early_is_no_error(tmp_path):
    """`streaming cache --json | head -1`: the reader closes the pipe; the command ends quietly (it printed
    "streaming cache: error: [Errno 32] Broken pipe")."""
    for i in range(800):  # enough state entries that the JSON outgrows the pipe's buffer (64 KiB)
        os.makedirs(tmp_path / 'root' / 'state' / f'{i:032x}')
    env = dict(os.environ, STREAMING_CORE_CACHE_DIR=str(tmp_path / 'root'))
    command = f'{sys.executable} -m streaming_core.cli cache --json | head -c 10 >/dev/null; echo "${{PIPESTATUS[0]}}"'
    done = subprocess.run(['bash', '-c', command], capture_output=True, text=True, timeout=120, env=env)
    assert done.stderr == '' and done.stdout.strip() in ('0', '141'), (done.stdout, done.stderr)


# ---------------------------------------------------------------------------------------------------------------
def test_inspect_text_and_json(tmp_path, capsys):
    out = write_mds(str(tmp_path / 'ds'), 50, compression='zstd', hashes=['sha1', 'xxh64'], size_limit=600)
    code, text, _ = run(capsys, 'inspect', out)
    assert code == 0
    assert 'Format:        mds' in text and 'data (bytes), id (int)' in text and 'Samples:       50' in text
    assert 'zstd' in text and 'sha1, xxh64' in text and 'Compressed:' in text
    code, text, _ = run(capsys, 'inspect', os.path.join(out, 'index.json'), '--json', '--shards')
    info = json.loads(text)
    assert info['samples'] == 50 and info['shards'] == len(info['shard_list']) > 1
    assert info['columns'] == {'data': 'bytes', 'id': 'int'} and info['compression'] == {'zstd': info['shards']}
    assert info['raw_bytes'] == sum(row['raw_bytes'] for row in info['shard_list'])


def test_inspect_remote_and_split(tmp_path, capsys, http_server):
    write_mds(os.path.join(http_server.root, 'insp', 'train'), 20)
    code, text, _ = run(capsys, 'inspect', f'{http_server.url}/insp', '--split', 'train', '--json')
    assert code == 0 and json.loads(text)['samples'] == 20
    code, _, err = run(capsys, 'inspect', f'{http_server.url}/insp')
    assert code == 1 and err.startswith('streaming inspect: error:') and err.count('\n') == 1


# ---------------------------------------------------------------------------------------------------------------
def _dataset(tmp_path, name='v', **kwargs):
    return write_mds(str(tmp_path / name), 60, hashes=['sha1', 'xxh64'], size_limit=700, **kwargs)


def _shard_files(path):
    with open(os.path.join(path, 'index.json')) as handle:
        index = json.load(handle)
    return [(entry.get('zip_data') or entry['raw_data'])['basename'] for entry in index['shards']]


def test_verify_ok_and_selected_hash(tmp_path, capsys):
    out = _dataset(tmp_path)
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 0 and 'hashes sha1, xxh64' in text and 'every sample decoded' in text and 'OK' in text
    code, text, _ = run(capsys, 'verify', out, '--quiet', '--hash', 'xxh64')
    assert code == 0 and 'hashes xxh64;' in text
    code, _, err = run(capsys, 'verify', out, '--hash', 'md5')
    assert code == 1 and "records no 'md5' hashes" in err


def test_verify_reports_each_bad_shard(tmp_path, capsys):
    out = _dataset(tmp_path)
    files = _shard_files(out)
    assert len(files) >= 4
    path = os.path.join(out, files[1])
    data = bytearray(open(path, 'rb').read())
    data[-3] ^= 0xFF  # same size, different content
    open(path, 'wb').write(bytes(data))
    with open(os.path.join(out, files[2]), 'r+b') as handle:
        handle.truncate(20)
    os.remove(os.path.join(out, files[3]))
    code, text, err = run(capsys, 'verify', out, '--quiet')
    assert code == 1
    assert f'BAD shard 1 ({files[1]}): {files[1]}: sha1 mismatch' in text
    assert 'xxh64 mismatch' in text
    assert f'BAD shard 2 ({files[2]}): {files[2]}: 20 bytes, but the index declares' in text
    assert f'BAD shard 3 ({files[3]}): {files[3]}: missing' in text
    assert 'FAILED: 3 of' in text and 'shard 0 ' not in text
    code, text, _ = run(capsys, 'verify', out, '--json')
    report = json.loads(text)
    assert code == 1 and report['bad'] == 3 and [r['shard'] for r in report['results'] if r['problems']] == [1, 2, 3]


def test_verify_names_shard_files_the_index_does_not_name(tmp_path, capsys):
    """A shard file copied into a dataset (or left by an earlier write) that the index does not name: verify said
    "OK" with no word, though readers never read it. It is named in a note (the exit status stays 0: the indexed
    shards are sound); a split with its own index is its own, and a temporary file is not a shard."""
    import shutil
    out = _dataset(tmp_path)
    files = _shard_files(out)
    shutil.copy(os.path.join(out, files[0]), os.path.join(out, 'shard.09999.mds'))
    write_mds(os.path.join(out, 'val'), 5, size_limit=200)  # a split of its own, in a subdirectory
    open(os.path.join(out, 'shard.00000.mds.123-abc.tmp'), 'wb').close()
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 0 and 'OK' in text
    assert (f'NOTE: 1 shard file is under {out} but not named by the index (readers never read them; left by an '
            'earlier write, or copied in?): shard.09999.mds') in text
    code, text, _ = run(capsys, 'verify', out, '--json')
    assert code == 0 and json.loads(text)['unindexed'] == ['shard.09999.mds']
    os.remove(os.path.join(out, 'shard.09999.mds'))
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 0 and 'NOTE' not in text


def test_verify_decodes_samples_without_hashes(tmp_path, capsys):
    out = write_mds(str(tmp_path / 'nohash'), 30, size_limit=700)
    path = os.path.join(out, _shard_files(out)[0])
    data = bytearray(open(path, 'rb').read())
    data[8:12] = (10**6).to_bytes(4, 'little')  # the first sample offset now points past the file
    open(path, 'wb').write(bytes(data))
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 1 and 'sizes only (the index records no hashes)' in text
    assert 'BAD shard 0' in text and 'cannot be opened' in text


def test_verify_no_decode_checks_files_of_a_pkl_dataset(tmp_path, capsys):
    """``--no-decode`` checks sizes and hashes only, so a ``pkl`` column (refused unless allowed, because decoding
    it runs code) does not make every shard bad; the summary says what was checked when every shard failed."""
    mds = pytest.importorskip('streaming_mds')
    out = str(tmp_path / 'pk')
    with mds.MDSWriter(out=out, columns={'p': 'pkl', 'i': 'int'}, hashes=['sha1']) as writer:
        for i in range(5):
            writer.write({'p': {'k': i}, 'i': i})
    code, text, _ = run(capsys, 'verify', out, '--quiet', '--no-decode')
    assert code == 0 and 'hashes sha1; not decoded' in text and 'BAD' not in text
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 1 and 'unsafe type: pkl' in text and 'no shard passed' in text and 'every sample' not in text
    code, text, _ = run(capsys, 'verify', out, '--quiet', '--allow-unsafe-types')
    assert code == 0 and 'every sample decoded' in text


def test_verify_compressed_and_remote(tmp_path, capsys, http_server):
    out = _dataset(tmp_path, 'z', compression='zstd')
    code, text, _ = run(capsys, 'verify', out, '--quiet')
    assert code == 0
    remote_dir = os.path.join(http_server.root, 'verify-z')
    shutil.copytree(out, remote_dir)
    code, text, _ = run(capsys, 'verify', f'{http_server.url}/verify-z', '--quiet')
    assert code == 0 and '60 samples' in text
    zipped = os.path.join(remote_dir, _shard_files(out)[0])
    data = bytearray(open(zipped, 'rb').read())
    data[len(data) // 2] ^= 0x55
    open(zipped, 'wb').write(bytes(data))
    code, text, _ = run(capsys, 'verify', f'{http_server.url}/verify-z', '--quiet', '--no-decode')
    assert code == 1 and 'BAD shard 0' in text and 'sha1 mismatch' in text


def test_verify_checks_raw_files_of_a_cache(tmp_path, capsys):
    """A local copy that holds only the decompressed files (as a cache does) is checked through them."""
    from streaming_core import StreamingDataset
    out = _dataset(tmp_path, 'c', compression='zstd')
    cache = str(tmp_path / 'cache')
    dataset = StreamingDataset(remote=f'file://{out}', local=cache, batch_size=1)
    for i in range(dataset.num_samples):
        dataset[i]
    assert not any(name.endswith('.zstd') for name in os.listdir(cache))
    code, text, _ = run(capsys, 'verify', cache, '--quiet')
    assert code == 0 and 'OK' in text


# ---------------------------------------------------------------------------------------------------------------
def test_merge_index_both_forms(tmp_path, capsys):
    root = tmp_path / 'parts'
    for i, name in enumerate(['0', '1', '2']):
        write_mds(str(root / name), 10, start=10 * i)
    code, text, _ = run(capsys, 'merge-index', str(root))
    assert code == 0 and 'Merged' in text and '(30 samples)' in text
    from streaming_core import LocalDataset
    assert [LocalDataset(str(root))[i]['id'] for i in range(30)] == list(range(30))
    listed = [str(root / name / 'index.json') for name in ('2', '0')]
    code, text, _ = run(capsys, 'merge-index', str(root), *listed)
    assert code == 0 and '(20 samples)' in text
    data = LocalDataset(str(root))
    assert [data[i]['id'] for i in range(20)] == list(range(20, 30)) + list(range(10))
    remote = tmp_path / 'remote'
    code, _, err = run(capsys, 'merge-index', str(root), '--remote', f'file://{remote}')
    assert code == 1 and 'lacks' in err and not os.path.exists(remote / 'index.json')  # the shards are not there
    import shutil
    shutil.copytree(root, remote, ignore=shutil.ignore_patterns('index.json'))  # the partitions' uploads
    for name in ('0', '1', '2'):
        shutil.copy(root / name / 'index.json', remote / name / 'index.json')
    code, text, _ = run(capsys, 'merge-index', str(root), '--remote', f'file://{remote}')
    assert code == 0 and os.path.isfile(remote / 'index.json')
    code, _, err = run(capsys, 'merge-index', str(tmp_path / 'empty'))
    assert code == 1 and 'found no partition index.json' in err


# ---------------------------------------------------------------------------------------------------------------
def test_cache_show_and_clear(tmp_path, capsys, monkeypatch):
    from streaming_core import StreamingDataset
    from streaming_core.common.paths import cache_root, default_local
    source = write_mds(str(tmp_path / 'src'), 40)
    url = f'file://{source}'
    dataset = StreamingDataset(remote=url, batch_size=4)  # downloads under the cache root
    assert len(list(dataset)) == 40
    root = cache_root()
    os.makedirs(os.path.join(root, 'mine'))
    code, text, _ = run(capsys, 'cache', '--json')
    info = json.loads(text)
    assert code == 0 and info['root'] == root
    [entry] = info['datasets']
    assert entry['path'] == default_local(url) and entry['samples_in_index'] == 40 and entry['bytes'] > 0
    assert info['plans']['count'] >= 1 and info['other_entries'] == ['mine']
    code, text, _ = run(capsys, 'cache', 'show')
    assert 'Cache root: ' + root in text and '40 samples in index' in text
    monkeypatch.setattr('sys.stdin', open(os.devnull))
    code, _, err = run(capsys, 'cache', 'clear')
    assert code == 1 and 'Pass --yes' in err
    code, _, err = run(capsys, 'cache', 'clear', '--dataset', 'file:///not/cached', '--yes')
    assert code == 1 and 'No cached dataset' in err
    code, text, _ = run(capsys, 'cache', 'clear', '--dataset', url, '--yes')
    assert code == 0 and not os.path.exists(default_local(url)) and os.path.isdir(os.path.join(root, 'plans'))
    code, text, _ = run(capsys, 'cache', 'clear', '-y')
    assert code == 0 and 'datasets' not in os.listdir(root) and 'mine' in os.listdir(root)
    assert 'Kept: the records of 1 local dataset(s) written or read in place' in text
    from streaming_core.reading.cache_record import read_record

    def left() -> list[str]:  # the files left under the managed directories
        return sorted(os.path.relpath(os.path.join(d, n), root) for name in ('plans', 'state', 'cache-state')
                      for d, _, names in os.walk(os.path.join(root, name)) for n in names)

    records = [p for p in left() if p.endswith('record.json')]
    assert [read_record(os.path.join(root, os.path.dirname(p))).local_dir for p in records] == \
        [os.path.realpath(source)]  # the written dataset's record is kept
    assert all(p.endswith('.lock') for p in left() if p not in records)  # and the lock files, nothing else
    shutil.rmtree(source)
    code, text, _ = run(capsys, 'cache', 'clear', '-y')  # its directory gone: nothing left to protect
    assert code == 0 and all(p.endswith('.lock') for p in left())


def test_cache_show_and_clear_of_relative_path_remotes_and_datasets_written_in_place(tmp_path, capsys, monkeypatch):
    """A user in a project directory writes ``ds`` and reads it as ``remote='ds'``: ``streaming cache`` shows the
    remote as the directory it names (not a text that names another directory from elsewhere), lists ``ds`` itself
    as a dataset written in place (not as a cache of itself), and ``clear --dataset ds`` finds the copy by that same
    relative path."""
    from streaming_core import StreamingDataset
    from streaming_core.common.paths import default_local
    from streaming_core.reading.cache_record import CacheRemoteMismatchError
    project = tmp_path / 'project'
    project.mkdir()
    monkeypatch.chdir(project)
    write_mds('ds', 5)
    assert len(list(StreamingDataset(remote='ds', batch_size=1))) == 5
    here = str(project / 'ds')
    code, text, _ = run(capsys, 'cache', '--json')
    info = json.loads(text)
    [entry] = info['datasets']
    assert code == 0 and entry['remote'] == here and entry['path'] == default_local('ds')
    [own] = [e for e in info['state']['entries'] if e['local_dir'] == here]
    assert own['in_place'] is True
    code, text, _ = run(capsys, 'cache')
    lines = text.splitlines()
    assert f'      remote: {here}' in lines
    assert 'Local datasets written or read in place (no remote; their files are never cleared): 1' in lines
    assert f'  {here}' in lines and f'  {here}  remote: {here}' not in lines
    assert 'Other local directories read with a remote' not in text
    before = sorted(os.listdir(here))
    code, _, err = run(capsys, 'cache', 'clear', '--dataset', 'ds', '--yes')
    assert code == 0 and not os.path.exists(default_local('ds'))
    assert sorted(os.listdir(here)) == before and 'index.json' in before  # the user's data untouched
    code, _, err = run(capsys, 'cache', 'clear', '--dataset', 'ds', '--yes')
    assert code == 1 and 'No cached dataset' in err and 'relative path' in err
    # Clearing the whole cache keeps the record that ``ds`` is a dataset of its own: another remote is still refused
    # as its cache, never adopted with ``ds``'s files replaced.
    other = write_mds(str(tmp_path / 'other'), 7)
    code, _, _ = run(capsys, 'cache', 'clear', '--yes')
    assert code == 0
    with pytest.raises(CacheRemoteMismatchError, match='written or read in place'):
        StreamingDataset(remote=other, local='ds', batch_size=1)
    assert sorted(os.listdir(here)) == before


def test_plugins_still_listed(capsys):
    code, text, _ = run(capsys, 'plugins', '--json')
    assert code == 0 and any(r['distribution'] == 'streaming-core' for r in json.loads(text))


def test_a_password_in_a_dataset_url_is_never_shown(tmp_path, capsys, http_server):
    """inspect, verify and simulate name the index they could not read: without the URL's password."""
    secret = 'cli-pa55-s3cr3t'
    os.makedirs(os.path.join(http_server.root, 'leaky'), exist_ok=True)
    with open(os.path.join(http_server.root, 'leaky', 'index.json'), 'w') as handle:
        handle.write('{"version": 2, "shards": 5}')
    url = http_server.url.replace('://', f'://alice:{secret}@') + '/leaky'
    for argv in (('inspect', url), ('verify', url), ('simulate', '--index', url)):
        code, out, err = run(capsys, *argv)
        assert code == 1 and 'leaky/index.json' in err and 'http://***@' in err, err
        assert secret not in out + err


def test_a_format_s_unit_word_names_its_units():
    """plugins/writing.md: an optional ``unit_word`` on a format names its units in inspect's output."""
    from streaming_core.hookspecs import hookimpl
    from streaming_core.machinery.lookup import get_registry
    from streaming_core.testing import registered_plugin
    from streaming_core.tools.commands.inspect import units_word

    mds_format = get_registry('format').get('mds')

    class RowGroups:
        unit_word = 'row group'

        def __getattr__(self, name):
            return getattr(mds_format, name)

    class Plugin:
        @hookimpl
        def register_shard_formats(self, registry):
            registry.add('rowgroups-test', RowGroups())

    with registered_plugin(Plugin(), name='unit-word-test'):
        assert units_word(['rowgroups-test']) == 'row groups'
        assert units_word(['rowgroups-test', 'mds']) == units_word(['mds']) == 'units'


def test_cache_clear_keeps_what_a_running_writer_holds_locked(tmp_path, capsys):
    """A writer at work holds a lock file in the state directory: removed, a second writer of the same output would
    lock a new file of that name and both would write (the clear let it in). ``clear`` keeps every lock file, and
    shows the size of each file it removes."""
    from streaming_core.errors import OutputBusyError
    from streaming_mds import MDSWriter
    out = str(tmp_path / 'out')
    writer = MDSWriter(out=out, columns={'x': 'int'})
    writer.write({'x': 1})
    try:  # the clear runs in another process, as a user's shell does (a process's own locks are not in its way)
        cleared = subprocess.run([sys.executable, '-c', 'from streaming_core.cli import main\n'
                                  'raise SystemExit(main(["cache", "clear", "--yes"]))'],
                                 capture_output=True, text=True, cwd=ROOT)
        assert cleared.returncode == 0, cleared.stderr
        assert 'Kept: the lock files' in cleared.stdout and '(0 B)' not in cleared.stdout
        second = subprocess.run([sys.executable, '-c', 'from streaming_mds import MDSWriter\n'
                                 f'MDSWriter(out={out!r}, columns={{"x": "int"}})'],
                                capture_output=True, text=True, cwd=ROOT)
        assert second.returncode != 0 and OutputBusyError.__name__ in second.stderr  # another process's writer
    finally:
        writer.finish()
    MDSWriter(out=out, columns={'x': 'int'}, exist_ok=True).abandon()  # the output is free again


def test_inspect_and_verify_take_the_format_of_a_directory_holding_several(tmp_path, capsys):
    """A directory without index.json holding Parquet and tar files: the error says to pass a format, and the
    commands take it (they had no such option), and streaming index on a dataset with an index.json says so."""
    pytest.importorskip('streaming_parquet')
    pytest.importorskip('streaming_webdataset')
    import io
    import tarfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    data = tmp_path / 'mixed'
    data.mkdir()
    pq.write_table(pa.table({'id': list(range(5))}), str(data / 'a.parquet'))
    with tarfile.open(str(data / 'b.tar'), 'w') as tar:
        for i in range(3):
            member = tarfile.TarInfo(f'{i:04d}.txt')
            member.size = 1
            tar.addfile(member, io.BytesIO(str(i).encode()))
    code, _, err = run(capsys, 'inspect', str(data))
    assert code == 1 and '--format NAME for streaming inspect, verify and index' in err
    code, text, _ = run(capsys, 'inspect', str(data), '--format', 'parquet', '--json')
    assert code == 0 and json.loads(text)['samples'] == 5
    code, text, _ = run(capsys, 'verify', str(data), '--format', 'webdataset', '--quiet')
    assert code == 0 and 'OK' in text
    code, _, err = run(capsys, 'index', write_mds(str(tmp_path / 'mds'), 5))
    assert code == 1 and 'has an index.json: it is a dataset with an index already' in err


def test_cache_clear_under_a_running_job_keeps_its_locks_and_one_shared_account(tmp_path, capsys):
    """A job with a ``cache_limit`` reads while the cache is cleared: its lock files keep their inodes (a job started
    after locks the same files), and its cache-limit account is kept and marked to be recounted from the disk,
    instead of removed (the running job kept the deleted account and a new job made a second one: together they
    passed the limit)."""
    import glob

    import numpy as np

    from streaming_core import StreamingDataset
    from streaming_core.common.paths import cache_root
    source = write_mds(str(tmp_path / 'src'), 60, size_limit=1 << 11)
    url = f'file://{source}'
    running = StreamingDataset(remote=url, batch_size=4, cache_limit=1 << 20)
    it = iter(running)
    for _ in range(10):
        next(it)
    root = cache_root()
    def inodes(pattern: str) -> dict[str, int]:
        return {p: os.stat(p).st_ino for p in glob.glob(os.path.join(root, pattern), recursive=True)}
    locks, accounts = inodes('**/*.lock'), inodes('cache-state/*.bin')
    assert locks and len(accounts) == 1
    code, text, _ = run(capsys, 'cache', 'clear', '--yes')
    assert code == 0 and not os.path.exists(os.path.join(root, 'datasets'))
    assert inodes('**/*.lock') == locks and inodes('cache-state/*.bin') == accounts
    [account] = accounts
    assert np.fromfile(account, dtype=np.int64, count=3)[2] == 1  # to be recounted by the next process
    later = StreamingDataset(remote=url, batch_size=4, cache_limit=1 << 20)
    on_disk = glob.glob(os.path.join(root, 'datasets', '*', '*'))
    assert later.cache_usage == sum(os.path.getsize(p) for p in on_disk)  # recounted: the index.json alone
    assert [os.path.basename(p) for p in on_disk] == ['index.json']
    assert sorted(s['id'] for s in later) == list(range(60))
    rest = [s['id'] for s in it]
    assert len(rest) == 50  # the running job goes on, its shards downloaded again
