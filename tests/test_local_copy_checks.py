"""Local shard files are checked when first opened, and ``streaming verify`` checks what readers read.

The user's steps (issue 12, item 3): write a compressed dataset with the MDS writer, read it in place with
``StreamingDataset(local=...)`` (which writes decompressed copies ``shard.N.mds`` next to the compressed files),
damage one decompressed copy, then read it again in a fresh process and run the real ``streaming verify`` CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import ShardCorruptError
from tests.fixtures.data import ids_of, write_mds

READ = textwrap.dedent('''
    import sys
    from streaming_core import StreamingDataset
    dataset = StreamingDataset(local=sys.argv[1], batch_size=1, validate_hash=sys.argv[2] or None)
    print(sorted(int(sample['id']) for sample in dataset) == list(range(60)))
''')


def _read(local: str, validate_hash: str = '') -> subprocess.CompletedProcess:
    """Iterate the whole dataset in a fresh Python process (as a training script would)."""
    return subprocess.run([sys.executable, '-c', READ, local, validate_hash], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())


def _verify(local: str) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), 'streaming')
    command = [exe] if os.path.exists(exe) else [sys.executable, '-m', 'streaming_core.cli']
    return subprocess.run([*command, 'verify', local, '--quiet'], capture_output=True, text=True, timeout=300,
                          env=os.environ.copy())


@pytest.fixture
def read_in_place(tmp_path: Any) -> str:
    """A zstd-compressed MDS dataset (sha1 hashes), read once in place so its decompressed copies exist."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', hashes=['sha1'], size_limit=700)
    done = _read(local)
    assert done.returncode == 0 and done.stdout.strip() == 'True', done.stderr
    assert os.path.isfile(os.path.join(local, 'shard.00001.mds'))
    assert os.path.isfile(os.path.join(local, 'shard.00001.mds.zstd'))  # no other copy: the compressed file stays
    return local


def _flip_byte(path: str) -> None:
    with open(path, 'r+b') as handle:
        handle.seek(-5, os.SEEK_END)
        byte = handle.read(1)
        handle.seek(-5, os.SEEK_END)
        handle.write(bytes([byte[0] ^ 0xFF]))


def _rot(path: str, change: Any = _flip_byte) -> None:
    """Damage the copy at ``path`` behind the record's back (as bit rot would: the record still vouches for it), so
    the second line of defence is what is tested: the size and hash checks when it is opened."""
    from streaming_core.reading import inplace_copies
    change(path)
    local, name = os.path.split(path)
    inplace_copies.note_copy(local, name, os.stat(f'{path}.zstd'), path)


def _append_junk(path: str) -> None:
    with open(path, 'ab') as handle:
        handle.write(b'junk')


def test_a_copy_changed_since_it_was_made_is_decompressed_again_by_a_fresh_reader(read_in_place: str) -> None:
    """A copy written over (another reader's copy synced in, an editor, a damaged write) is not the copy recorded:
    a fresh reader says so and decompresses it again, never reads it."""
    copy = os.path.join(read_in_place, 'shard.00001.mds')
    _append_junk(copy)
    done = _read(read_in_place)
    assert done.returncode == 0 and done.stdout.strip() == 'True', done.stderr
    assert f'{copy} is not what {copy}.zstd decompresses to' in done.stderr
    with open(copy, 'rb') as handle:
        assert not handle.read().endswith(b'junk')


def test_resized_copy_is_refused_by_a_fresh_reader(read_in_place: str) -> None:
    copy = os.path.join(read_in_place, 'shard.00001.mds')
    _rot(copy, _append_junk)
    done = _read(read_in_place)
    assert done.returncode != 0
    assert 'ShardCorruptError' in done.stderr and copy in done.stderr
    assert 'bytes but the index declares' in done.stderr
    # It was a copy of the compressed file, so it was removed: reading again decompresses it afresh.
    assert not os.path.exists(copy)
    assert 'reading again recreates it from' in done.stderr
    again = _read(read_in_place)
    assert again.returncode == 0 and again.stdout.strip() == 'True', again.stderr


def test_flipped_byte_is_refused_with_validate_hash(read_in_place: str) -> None:
    copy = os.path.join(read_in_place, 'shard.00001.mds')
    _rot(copy)
    done = _read(read_in_place, 'sha1')
    assert done.returncode != 0
    assert 'ShardCorruptError' in done.stderr and copy in done.stderr
    assert 'its sha1 is' in done.stderr and 'but the index records' in done.stderr
    again = _read(read_in_place, 'sha1')
    assert again.returncode == 0 and again.stdout.strip() == 'True', again.stderr


def test_verify_reports_the_bad_copy(read_in_place: str) -> None:
    done = _verify(read_in_place)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'also 6 decompressed copies' in done.stdout and 'OK: every shard matches the index.' in done.stdout
    _flip_byte(os.path.join(read_in_place, 'shard.00001.mds'))
    with open(os.path.join(read_in_place, 'shard.00002.mds'), 'ab') as handle:
        handle.write(b'junk')
    done = _verify(read_in_place)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'OK' not in done.stdout
    assert ('BAD shard 1 (shard.00001.mds): shard.00001.mds (the decompressed copy readers read): sha1 mismatch'
            in done.stdout)
    assert ('BAD shard 2 (shard.00002.mds): shard.00002.mds (the decompressed copy readers read): '
            in done.stdout) and 'but the index declares' in done.stdout
    assert 'delete it and readers decompress shard.00001.mds.zstd again' in done.stdout
    assert 'FAILED: 2 of 6 shards are bad: 1, 2' in done.stdout


def test_verify_compares_a_copy_without_hashes_to_its_compressed_file(tmp_path: Any, capsys: Any) -> None:
    """With no hashes recorded, a same-size damaged copy is still found: it is compared with the decompressed data."""
    from streaming_core.cli import main
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    dataset = StreamingDataset(local=local, batch_size=1)
    assert sorted(ids_of(dataset)) == list(range(60))
    _flip_byte(os.path.join(local, 'shard.00000.mds'))
    assert main(['verify', local, '--quiet']) == 1
    out = capsys.readouterr().out
    assert 'shard.00000.mds (the decompressed copy readers read): differs from what shard.00000.mds.zstd ' in out


def test_only_copy_is_never_deleted(tmp_path: Any) -> None:
    """An uncompressed local dataset has no other copy: a bad file is reported and left in place."""
    local = write_mds(str(tmp_path / 'plain'), 60, hashes=['sha1'], size_limit=700)
    path = os.path.join(local, 'shard.00001.mds')
    _flip_byte(path)
    dataset = StreamingDataset(local=local, batch_size=1, validate_hash='sha1')
    with pytest.raises(ShardCorruptError) as info:
        list(dataset)
    assert path in str(info.value) and 'only copy' in str(info.value)
    assert os.path.exists(path)


def test_checked_once_per_process(tmp_path: Any) -> None:
    """The check runs on the first open in a process, not again when a view is reopened (hot path stays free)."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', hashes=['sha1'], size_limit=700)
    dataset = StreamingDataset(local=local, batch_size=1, validate_hash='sha1')
    assert sorted(ids_of(dataset)) == list(range(60))
    manager = dataset._shards_manager
    assert manager._checked == set(range(len(manager.readers)))
    # Damage an already-checked copy: this process does not look again (that is the promise: once per process) ...
    _rot(os.path.join(local, 'shard.00001.mds'))
    manager.close_all()
    manager.view(1)
    # ... but a fresh manager (a new process, a new dataset) does.
    fresh = StreamingDataset(local=local, batch_size=1, validate_hash='sha1')
    with pytest.raises(ShardCorruptError, match='shard.00001.mds'):
        list(fresh)


def test_random_access_checks_too(tmp_path: Any) -> None:
    """``dataset[i]`` (a one-off positioned read on the first touch of a shard) checks the file first as well."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', hashes=['sha1'], size_limit=700)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    _rot(os.path.join(local, 'shard.00000.mds'))
    dataset = StreamingDataset(local=local, batch_size=1, validate_hash='sha1')
    with pytest.raises(ShardCorruptError, match='shard.00000.mds.*its sha1 is'):
        dataset[0]
    assert dataset[0]['id'] == 0  # the bad copy was removed, so this read decompressed it again


IDS = textwrap.dedent('''
    import sys
    from streaming_core import StreamingDataset
    print(sorted(int(sample['id']) for sample in StreamingDataset(local=sys.argv[1], batch_size=1)))
''')


@pytest.mark.parametrize('older', [False, True], ids=['written-over', 'synced-with-older-mtimes'])
def test_a_compressed_dataset_rewritten_in_place_is_read_anew(tmp_path: Any, older: bool) -> None:
    """The user's steps: read a compressed dataset in place (its decompressed copies are written beside it), write a
    new version of the same shape and copy it over the old one (``cp``; or ``rsync -a``/``cp -p``, which keep the
    new files' older modification times), read again in two fresh processes at once: every sample is the new
    version's (the old copies were served as the new version before)."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    first = subprocess.run([sys.executable, '-c', IDS, local], capture_output=True, text=True, timeout=300)
    assert first.stdout.strip() == str(list(range(60))), first.stderr
    new = write_mds(str(tmp_path / 'v2'), 60, start=1000, compression='zstd', size_limit=700)
    for name in sorted(os.listdir(new)):
        if older:
            os.utime(os.path.join(new, name), (1_000_000_000, 1_000_000_000))  # 2001: older than the copies
            shutil.copy2(os.path.join(new, name), os.path.join(local, name))
        else:
            shutil.copyfile(os.path.join(new, name), os.path.join(local, name))
    readers = [subprocess.Popen([sys.executable, '-c', IDS, local], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    for reader in readers:
        out, err = reader.communicate(timeout=300)
        assert out.strip() == str(list(range(1000, 1060))), err
    with open(os.path.join(local, 'shard.00000.mds'), 'rb') as copy, \
            open(os.path.join(new, 'shard.00000.mds.zstd'), 'rb') as zipped:
        import zstandard
        assert copy.read() == zstandard.ZstdDecompressor().decompress(zipped.read())


def _inodes(local: str) -> dict[str, int]:
    return {name: os.stat(os.path.join(local, name)).st_ino for name in sorted(os.listdir(local))
            if name.endswith('.mds')}


def test_a_copy_is_decompressed_once_and_again_only_when_its_compressed_file_changes(tmp_path: Any) -> None:
    """A copy this library made is read as it is at every start; its compressed file touched (even a ``chmod``)
    makes it decompressed again; a copy without a record (made by another tool, or the cache root wiped) is compared
    once with what its compressed file decompresses to, and read as it is (never replaced: another cache root's job
    may be reading it)."""
    from streaming_core.common.paths import cache_root
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    before = _inodes(local)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert _inodes(local) == before
    os.chmod(os.path.join(local, 'shard.00001.mds.zstd'), 0o600)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    after = _inodes(local)
    assert [name for name in before if before[name] != after[name]] == ['shard.00001.mds']
    shutil.rmtree(cache_root())  # its records with it: the copies are of unknown origin
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert _inodes(local) == after
    from streaming_core.reading import inplace_copies
    log = os.path.join(inplace_copies.state_dir(local), inplace_copies.RECORD_NAME)
    with open(log, 'rb') as handle:  # each compared copy recorded: not compared again
        assert len([line for line in handle.read().splitlines() if line]) == len(after)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert _inodes(local) == after


def _sync_over(new: str, local: str) -> None:
    """``rsync -a``: every file of ``new`` renamed over ``local``'s, with its (older) modification time."""
    for name in sorted(os.listdir(new)):
        os.utime(os.path.join(new, name), (1_000_000_000, 1_000_000_000))
        shutil.copy2(os.path.join(new, name), os.path.join(local, name + '.part'))
        os.replace(os.path.join(local, name + '.part'), os.path.join(local, name))


def test_a_chmod_after_a_sync_does_not_make_the_old_copies_current(tmp_path: Any) -> None:
    """``rsync -a`` of a new version, then ``chmod -R`` (a shared scratch directory's routine): every old copy now
    has a newer change time than the new compressed files, and is still decompressed again."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    _sync_over(write_mds(str(tmp_path / 'v2'), 60, start=1000, compression='zstd', size_limit=700), local)
    for name in sorted(os.listdir(local)):
        os.chmod(os.path.join(local, name), 0o644)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(1000, 1060))


def test_a_sync_during_a_decompression_leaves_no_copy_taken_for_the_new_version(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job decompresses a shard of the old version while a sync renames the new version into place: its copy of
    the old data lands after the new compressed file. The job may serve that sample (it began before the sync) or
    stop; every later job reads the new version."""
    import streaming_core.storage.compression as compression
    from streaming_core.errors import DatasetVersionError
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    new = write_mds(str(tmp_path / 'v2'), 60, start=1000, compression='zstd', size_limit=700)
    real = compression.decompress_file

    def syncing_meanwhile(*args: Any, **kwargs: Any) -> int:
        written = real(*args, **kwargs)  # the old file read whole
        monkeypatch.setattr(compression, 'decompress_file', real)
        _sync_over(new, local)
        return written
    monkeypatch.setattr(compression, 'decompress_file', syncing_meanwhile)
    try:
        assert StreamingDataset(local=local, batch_size=1)[0]['id'] == 0
    except DatasetVersionError:
        pass
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(1000, 1060))


def test_a_directory_that_cannot_be_written_vouches_for_its_copies(tmp_path: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A prepared dataset published read-only (copies without records here): each copy is compared with what its
    compressed file decompresses to, in the cache root, and read when equal; one that differs is refused naming
    it, never served."""
    from streaming_core.common.paths import cache_root
    from streaming_core.reading.stream import Stream
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    shutil.rmtree(cache_root())

    def read_only(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, 'Permission denied (injected: a read-only directory)')
    monkeypatch.setattr(Stream, '_decompress_shard_part', read_only)
    before = _inodes(local)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert _inodes(local) == before  # read as they are, never replaced
    shutil.rmtree(cache_root())
    copy = os.path.join(local, 'shard.00001.mds')
    _flip_byte(copy)
    dataset = StreamingDataset(local=local, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r'shard\.00001\.mds is not what .*shard\.00001\.mds\.zstd '
                                                r'decompresses to'):
        list(dataset)


def test_the_record_log_is_read_as_it_grows_and_a_torn_line_costs_nothing_else(tmp_path: Any) -> None:
    from streaming_core.reading import inplace_copies
    local = str(tmp_path / 'd')
    os.makedirs(local)
    for name in ('a', 'b', 'c'):
        (tmp_path / 'd' / f'{name}.zst').write_bytes(b'z' + name.encode())
        (tmp_path / 'd' / name).write_bytes(name.encode())

    def current(name: str) -> bool:
        path = os.path.join(local, name)
        return inplace_copies.copy_is_current(local, name, path, f'{path}.zst')
    assert not current('a')  # no record: not vouched for
    inplace_copies.note_copy(local, 'a', os.stat(os.path.join(local, 'a.zst')), os.path.join(local, 'a'))
    assert current('a') and not current('b')
    log = os.path.join(inplace_copies.state_dir(local), inplace_copies.RECORD_NAME)
    with open(log, 'ab') as handle:  # a writer killed mid-line
        handle.write(b'["x", [1, 2')
    inplace_copies.note_copy(local, 'b', os.stat(os.path.join(local, 'b.zst')), os.path.join(local, 'b'))
    inplace_copies.note_copy(local, 'c', os.stat(os.path.join(local, 'c.zst')), os.path.join(local, 'c'))
    assert [current(name) for name in 'abc'] == [True, True, True]  # the torn line costs its own record only
    os.utime(os.path.join(local, 'c.zst'), (1, 1))
    assert not current('c')
    os.remove(log)  # the cache root wiped: nothing is vouched for
    inplace_copies.note_copy(local, 'b', os.stat(os.path.join(local, 'b.zst')), os.path.join(local, 'b'))
    assert [current(name) for name in 'abc'] == [False, True, False]
    os.remove(os.path.join(local, 'a.zst'))
    assert current('a')  # only the copy is left: all there is


def test_a_worker_forked_while_a_thread_reads_the_record_log_can_read_it(tmp_path: Any) -> None:
    """A DataLoader forks its workers while a prefetch thread may hold the record log's lock: the child's copy of
    the lock is free (it would otherwise wait forever at its first check)."""
    import threading

    from streaming_core.reading import inplace_copies
    local = str(tmp_path / 'd')
    os.makedirs(local)
    (tmp_path / 'd' / 'a.zst').write_bytes(b'za')
    (tmp_path / 'd' / 'a').write_bytes(b'a')
    inplace_copies.note_copy(local, 'a', os.stat(os.path.join(local, 'a.zst')), os.path.join(local, 'a'))
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with inplace_copies._lock:
            held.set()
            done.wait(30)
    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: one check, then out (never back into pytest)
        import signal
        signal.alarm(20)
        ok = inplace_copies.copy_is_current(local, 'a', os.path.join(local, 'a'), os.path.join(local, 'a.zst'))
        os._exit(0 if ok else 1)
    done.set()
    thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_old_copies_synced_over_current_ones_are_not_read(tmp_path: Any) -> None:
    """A nightly mirror of another reader's directory: the new compressed files arrive one night, that reader's old
    decompressed copies the next (their compressed files unchanged, so the sync skips those). The copies are not the
    ones recorded: decompressed again, every sample the new version's."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    other = str(tmp_path / 'other-reader')
    shutil.copytree(local, other)
    for directory in (local, other):
        assert sorted(ids_of(StreamingDataset(local=directory, batch_size=1))) == list(range(60))
    _sync_over(write_mds(str(tmp_path / 'v2'), 60, start=1000, compression='zstd', size_limit=700), local)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(1000, 1060))
    for name in sorted(os.listdir(other)):  # the next night: the other reader's (old) copies
        if name.endswith('.mds'):
            shutil.copy2(os.path.join(other, name), os.path.join(local, name + '.part'))
            os.replace(os.path.join(local, name + '.part'), os.path.join(local, name))
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(1000, 1060))


def test_a_full_cache_root_keeps_no_record_and_reads_on(tmp_path: Any) -> None:
    """The record log cannot be written (here: a disk full): the copies are read all the same, and made again by
    the next process."""
    from streaming_core.reading import inplace_copies
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    log = os.path.join(inplace_copies.state_dir(local), inplace_copies.RECORD_NAME)
    os.symlink('/dev/full', log)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))


def test_the_record_log_is_compacted(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies made again and again (a nightly ``chmod -R``) do not grow the log for ever: it is rewritten with the
    live records once superseded lines outnumber them."""
    from streaming_core.reading import inplace_copies
    monkeypatch.setattr(inplace_copies, 'COMPACT_SLACK', 10)
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    log = os.path.join(inplace_copies.state_dir(local), inplace_copies.RECORD_NAME)
    for _ in range(6):
        for name in os.listdir(local):
            os.chmod(os.path.join(local, name), 0o644)
        assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    with open(log, 'rb') as handle:
        lines = [line for line in handle.read().splitlines() if line]
    assert 6 <= len(lines) <= 2 * 6 + 10 + 6
    before = _inodes(local)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert _inodes(local) == before  # every live record kept: nothing decompressed again


BIND = textwrap.dedent('''
    import os, subprocess, sys
    real, alias = sys.argv[1], sys.argv[2]
    subprocess.run(['mount', '--bind', real, alias], check=True)
    from streaming_core import MDSWriter, StreamingDataset
    with MDSWriter(out=(os.path.join(real, 'written'), os.path.join(alias, 'written')), columns={'id': 'int'},
                   compression='zstd', size_limit=200, keep_local=False) as writer:
        for i in range(40):
            writer.write({'id': i})
    dataset = StreamingDataset(remote=os.path.join(alias, 'ds'), local=os.path.join(real, 'ds'), batch_size=1)
    print(sorted(int(sample['id']) for sample in dataset) == list(range(60)))
    print(sorted(int(sample['id']) for sample in StreamingDataset(local=os.path.join(real, 'written'),
                                                                  batch_size=1)) == list(range(40)))
''')


def test_a_remote_that_is_the_local_directory_through_a_bind_mount_is_read_in_place(tmp_path: Any) -> None:
    """``remote`` names the local directory through another mount of it (a container's bind mount): it is the
    dataset's only copy. Its compressed files were deleted once decompressed, as if downloaded; a writer given it as
    its remote deleted what it had "uploaded" there."""
    local = write_mds(str(tmp_path / 'real' / 'ds'), 60, compression='zstd', size_limit=700)
    zipped = sorted(name for name in os.listdir(local) if name.endswith('.zstd'))
    os.makedirs(tmp_path / 'alias')
    done = subprocess.run(['unshare', '--mount', sys.executable, '-c', BIND, str(tmp_path / 'real'),
                           str(tmp_path / 'alias')], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ['True', 'True'], done.stderr
    assert sorted(name for name in os.listdir(local) if name.endswith('.zstd')) == zipped
    assert any(name.endswith('.zstd') for name in os.listdir(tmp_path / 'real' / 'written'))


def test_two_cache_roots_reading_one_directory_never_replace_each_others_copies(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Two users (or nodes) with their own cache roots take turns reading one compressed directory: each compares
    the other's copies once and reads them; no copy is made again, no warning, from the second turn on."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    roots = [str(tmp_path / 'root-a'), str(tmp_path / 'root-b')]
    seen = []
    for turn in range(4):
        monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', roots[turn % 2])
        assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
        seen.append(_inodes(local))
    assert seen[1] == seen[2] == seen[3] == seen[0]
    assert 'decompresses to' not in caplog.text


def test_a_reader_killed_while_comparing_a_copy_leaves_no_scratch_file_for_good(tmp_path: Any) -> None:
    """A compressed dataset read in place under a second cache root: its copies are compared with what their
    compressed files decompress to, through a scratch file in the state directory. A reader killed meanwhile (the OOM
    killer, a launcher's kill) leaves that file, as big as a shard; the next reader's sweep removes it."""
    import glob
    data = write_mds(str(tmp_path / 'data'), 40, compression='zstd')
    env = dict(os.environ, STREAMING_CORE_CACHE_DIR=str(tmp_path / 'root1'))
    code = f'from streaming_core import StreamingDataset\nStreamingDataset(local={data!r}, batch_size=1)[0]\n'
    subprocess.run([sys.executable, '-c', code], env=env, check=True)  # copies made under the first cache root
    env['STREAMING_CORE_CACHE_DIR'] = str(tmp_path / 'root2')
    killed = textwrap.dedent('''
        import os, signal
        import streaming_core.reading.listing_entries as entries
        entries.same_bytes = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    ''') + code
    assert subprocess.run([sys.executable, '-c', killed], env=env).returncode == -9
    scratch = glob.glob(str(tmp_path / 'root2' / 'state' / '*' / 'vouch*'))
    assert len(scratch) == 1 and os.path.getsize(scratch[0]) > 0
    read = ('from streaming_core import StreamingDataset\n'
            f'print(len(list(StreamingDataset(local={data!r}, batch_size=1))))')
    assert subprocess.run([sys.executable, '-c', read], env=env, check=True, capture_output=True,
                          text=True).stdout.split() == ['40']
    assert not os.path.exists(scratch[0])
