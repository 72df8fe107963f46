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


def test_resized_copy_is_refused_by_a_fresh_reader(read_in_place: str) -> None:
    copy = os.path.join(read_in_place, 'shard.00001.mds')
    with open(copy, 'ab') as handle:
        handle.write(b'junk')
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
    _flip_byte(copy)
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
    _flip_byte(os.path.join(local, 'shard.00001.mds'))
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
    _flip_byte(os.path.join(local, 'shard.00000.mds'))
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


def test_a_copy_newer_than_its_compressed_file_is_read_without_decompressing(tmp_path: Any) -> None:
    """A copy made after its compressed file (by us, by the reference, by hand) is read as it is: not decompressed
    again at every start."""
    local = write_mds(str(tmp_path / 'ds'), 60, compression='zstd', size_limit=700)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    before = {name: os.stat(os.path.join(local, name)).st_ino for name in os.listdir(local) if name.endswith('.mds')}
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    assert before == {name: os.stat(os.path.join(local, name)).st_ino for name in before}
    os.chmod(os.path.join(local, 'shard.00001.mds.zstd'), 0o600)  # its inode changed: decompressed once more
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(60))
    after = {name: os.stat(os.path.join(local, name)).st_ino for name in before}
    assert [name for name in before if before[name] != after[name]] == ['shard.00001.mds']
