"""Bad WebDataset input is refused with an error naming the file and the member: truncated or corrupt tars, members
that belong to no sample, duplicate keys and fields, a tar replaced after it was indexed."""

from __future__ import annotations

import os
from typing import Any

import pytest
from wds_data import members_of, write_tar, write_tars

from streaming_core import StreamingDataset
from streaming_core.errors import ShardCorruptError


def _one_tar(tmp_path: Any, members: list[tuple[str, bytes]]) -> str:
    data = str(tmp_path / 'data')
    write_tar(os.path.join(data, 'bad.tar'), members)
    return data


def test_truncated_member_names_the_file_and_the_member(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=1, per_tar=5)
    path = os.path.join(data, 'shard-00000.tar')
    with open(path, 'r+b') as handle:
        handle.truncate(700)  # inside the data of the first member (bytes 512-815)
    with pytest.raises(ShardCorruptError, match=r"shard-00000\.tar is truncated: member '000000\.jpg'"):
        StreamingDataset(local=data, batch_size=1)


def test_tar_cut_at_a_member_boundary_is_truncated(tmp_path: Any) -> None:
    data = _one_tar(tmp_path, [('000000.cls', b'1'), ('000001.cls', b'2')])
    with open(os.path.join(data, 'bad.tar'), 'r+b') as handle:
        handle.truncate(1024)  # one header and one data block: no end-of-archive block
    with pytest.raises(ShardCorruptError, match=r"bad\.tar is truncated: it ends at byte 1024 \(after "
                                                 r"member '000000\.cls'\)"):
        StreamingDataset(local=data, batch_size=1)


def test_tars_joined_with_cat_are_refused_not_cut(tmp_path: Any) -> None:
    """``cat a.tar b.tar > c.tar``: readers stop at the first end-of-archive block, and b's samples were left out
    silently; the data after the end block is refused, naming the file."""
    parts = str(tmp_path / 'parts')
    write_tars(parts, tars=2, per_tar=5)
    data = str(tmp_path / 'data')
    os.makedirs(data)
    with open(os.path.join(data, 'joined.tar'), 'wb') as out:
        for name in ('shard-00000.tar', 'shard-00001.tar'):
            with open(os.path.join(parts, name), 'rb') as handle:
                out.write(handle.read())
    with pytest.raises(ShardCorruptError, match=r'joined\.tar holds data at byte \d+, after its end-of-archive'):
        StreamingDataset(local=data, batch_size=1)
    assert len(StreamingDataset(local=parts, batch_size=1)) == 10  # the padding after a tar's end is fine


def test_corrupt_header_and_not_a_tar(tmp_path: Any) -> None:
    data = _one_tar(tmp_path, members_of(0) + members_of(1))
    path = os.path.join(data, 'bad.tar')
    with open(path, 'r+b') as handle:
        handle.seek(1024 + 10)  # the second member's header (the first member's data fits one block)
        handle.write(b'garbage')
    with pytest.raises(ShardCorruptError, match=r"bad\.tar has a corrupt tar header at byte 1024 \(after member "
                                                 r"'000000\.jpg'\)"):
        StreamingDataset(local=data, batch_size=1)
    with open(path, 'wb') as handle:
        handle.write(b'not a tar at all' * 100)
    with pytest.raises(ShardCorruptError, match=r'bad\.tar is not a tar file'):
        StreamingDataset(local=data, batch_size=1)


@pytest.mark.parametrize('members, message', [
    ([('000000.jpg', b'x'), ('README', b'text')], r"bad\.tar: member 'README' belongs to no sample"),
    ([('a.jpg', b'x'), ('b.jpg', b'y'), ('a.cls', b'1')], r"member 'a\.cls' repeats the key 'a' of an earlier "
                                                          r"sample"),
    ([('a.jpg', b'x'), ('a.JPG', b'y')], r"member 'a\.JPG' repeats the field 'jpg' of sample 'a'"),
])
def test_layout_errors_name_the_member(tmp_path: Any, members: list[tuple[str, bytes]], message: str) -> None:
    from streaming_webdataset import TarLayoutError
    data = _one_tar(tmp_path, members)
    with pytest.raises(TarLayoutError, match=message):
        StreamingDataset(local=data, batch_size=1)


def test_tar_replaced_after_indexing_is_caught_on_open(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_tars(remote, tars=1, per_tar=6)
    dataset = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert len(dataset) == 6 and dataset[5]['json']['id'] == 5  # downloaded
    # The local copy is replaced by a tar of the same size but fewer samples (bypassing the listing check).
    path = os.path.join(local, 'shard-00000.tar')
    size = os.path.getsize(path)
    members = members_of(0) + members_of(1)
    write_tar(path, members)
    with open(path, 'r+b') as handle:
        handle.truncate(size)  # zero padding keeps it a valid tar of 2 samples
    fresh = StreamingDataset(local=local, remote=remote, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r'holds 2 samples but the index says 6'):
        fresh[0]


def test_bad_json_field_names_the_sample(tmp_path: Any) -> None:
    data = _one_tar(tmp_path, [('k.json', b'{not json')])
    dataset = StreamingDataset(local=data, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r"sample 'k': the 'json' field is not valid JSON"):
        dataset[0]


def test_a_tar_rewritten_in_place_keeping_its_stat_stops_the_job_and_a_chmod_does_not(tmp_path: Any) -> None:
    """A tar of a directory read in place, overwritten with another tar of the same size and its modification time
    put back (``cp -p``): a tar ends in zero padding, so a print of its last bytes alone cannot tell the versions
    apart (a review read the new samples under the old index, in this process and a fresh one). Blocks spread over
    the tar are printed (a small tar whole), so the job stops; a ``chmod`` or a hard link (a snapshot) stops
    nothing."""
    import io
    import pickle
    import subprocess
    import sys
    import tarfile
    import time

    def make_tar(path: str, tag: str, size: int) -> None:
        with tarfile.open(path, 'w') as tar:
            for i in range(10):
                payload = f'{tag}{i}'.encode().ljust(size, b'.')
                info = tarfile.TarInfo(f'{i:04d}.txt')
                info.size, info.mtime = len(payload), 0
                tar.addfile(info, io.BytesIO(payload))

    for size in (2, 20_000):  # a tar printed whole, and one printed by spread blocks
        data = tmp_path / f'data-{size}'
        data.mkdir()
        target = str(data / 'a.tar')
        make_tar(target, 'o', size)
        old = time.time_ns() - 3_600 * 10**9
        os.utime(target, ns=(old, old))
        dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
        os.chmod(target, 0o600)
        os.link(target, tmp_path / f'snapshot-{size}.tar')
        assert dataset[0]['txt'].startswith('o0')  # neither moved its data
        make_tar(str(tmp_path / 'new.tar'), 'n', size)
        before = os.stat(target)
        with open(tmp_path / 'new.tar', 'rb') as source, open(target, 'r+b') as old_file:
            old_file.write(source.read())
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (os.stat(target).st_size, os.stat(target).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        fresh = subprocess.run(
            [sys.executable, '-c', 'import pickle, sys; dataset = pickle.load(sys.stdin.buffer); '
                                   'print(dataset[1]["txt"])'],
            input=pickle.dumps(dataset), capture_output=True, timeout=120)
        assert fresh.returncode != 0 and b'DatasetVersionError' in fresh.stderr, (fresh.stdout, fresh.stderr[-2000:])
        assert b'rewritten in place with the same size' in fresh.stderr, fresh.stderr[-2000:]
        again = StreamingDataset(local=str(data), batch_size=1, shuffle=False)  # a new job reads the new version
        assert again[0]['txt'].startswith('n0')
