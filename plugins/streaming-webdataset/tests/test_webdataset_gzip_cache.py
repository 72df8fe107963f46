"""Gzip-compressed WebDataset shards under a ``cache_limit``: the decompressed tars are counted and evicted like
any shard (the cache directory, measured while DataLoader workers read, never exceeds the limit), ``ds[i]`` on an
evicted shard downloads it again, and a sidecar index records the decompressed sizes so no node decompresses a tar
to index it."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest
from test_webdataset_gzip import expected_of, gzip_dir, plain_copies
from wds_data import sample_id, write_tars

from streaming_core import StreamingDataLoader, StreamingDataset


def tree_bytes(root: str) -> tuple[int, int]:
    """``(bytes, decompressed tars)`` of every file under ``root`` now (files vanishing meanwhile count 0)."""
    total = tars = 0
    for directory, _, names in os.walk(root):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(directory, name))
            except OSError:
                continue
            tars += name.endswith('.tar')
    return total, tars


class Meter:
    """Measures a directory every few milliseconds in a thread: the most bytes and decompressed tars seen."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.most = self.most_tars = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.measure()
            time.sleep(0.002)

    def measure(self) -> None:
        """Record the directory's size now."""
        size, tars = tree_bytes(self.root)
        self.most, self.most_tars = max(self.most, size), max(self.most_tars, tars)

    def __enter__(self) -> 'Meter':
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.measure()


def gz_remote(tmp_path: Any, tars: int, per_tar: int) -> tuple[str, str, int, int]:
    """``(plain dir, remote dir of .tar.gz, plain tar size, largest .tar.gz size)``."""
    plain, remote = str(tmp_path / 'plain'), str(tmp_path / 'remote')
    write_tars(plain, tars=tars, per_tar=per_tar)
    gzip_dir(plain, remote)
    raw = max(os.path.getsize(os.path.join(plain, name)) for name in os.listdir(plain))
    zipped = max(os.path.getsize(os.path.join(remote, name)) for name in os.listdir(remote))
    return plain, remote, raw, zipped


@pytest.mark.slow
def test_cache_limit_counts_and_evicts_the_decompressed_tars(tmp_path: Any) -> None:
    plain, remote, raw, zipped = gz_remote(tmp_path, tars=6, per_tar=20)
    assert raw > 4 * zipped  # the plain tars are what must be counted, not the .tar.gz files
    limit = 2 * (raw + zipped) + 1024  # about two decompressed tars (each with its .tar.gz while it decompresses)
    local = str(tmp_path / 'cache')
    with pytest.warns(UserWarning, match='cache_limit'):
        # A shuffle block of one tar, so two workers reading together need about two tars at a time.
        dataset = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, cache_limit=limit,
                                   num_canonical_nodes=1, shuffle_block_size=20)
    assert [reader.raw_bytes for reader in dataset.shards] == [raw] * 6
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    with Meter(local) as meter:
        keys = [sample['__key__'] for batch in loader for sample in batch]
    assert sorted(keys) == sorted(s['__key__'] for s in expected_of(plain)) and len(set(keys)) == 120
    assert 0 < meter.most <= limit, (meter.most, limit)
    assert meter.most_tars <= 2 < 6  # evicted: never more than two of the six decompressed tars at once
    assert meter.most > 2 * zipped + raw // 2  # what was measured includes decompressed tars
    assert not [name for name in os.listdir(local) if name.endswith('.tar.gz')]  # keep_zip=False: dropped


def test_getitem_after_eviction_downloads_again(tmp_path: Any) -> None:
    plain, remote, raw, zipped = gz_remote(tmp_path, tars=4, per_tar=10)
    limit = 2 * (raw + zipped) + 1024
    local = str(tmp_path / 'cache')
    with pytest.warns(UserWarning, match='cache_limit'):
        dataset = StreamingDataset(remote=remote, local=local, batch_size=2, cache_limit=limit)
    expected = expected_of(plain)
    with Meter(local) as meter:
        assert list(dataset) == expected  # in order: shards 0, 1, 2, 3, the first ones evicted for the last ones
    assert meter.most <= limit
    copies = plain_copies(local)
    assert copies['shard-00000.tar.gz'] == [] and len([c for c in copies.values() if c]) <= 2  # shard 0 evicted
    assert dataset[3] == expected[3]  # downloaded and decompressed again (evicting another shard)
    assert len(plain_copies(local)['shard-00000.tar.gz']) == 1
    assert tree_bytes(local)[0] <= limit and dataset.cache_usage >= raw


def test_sidecar_records_decompressed_sizes_and_spares_the_walk(tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_webdataset.builder as builder_module
    from streaming_core.cli import main
    plain, remote, raw, _ = gz_remote(tmp_path, tars=2, per_tar=10)
    assert main(['index', remote]) == 0
    sidecar_path = os.path.join(remote, 'webdataset-index.json')
    with open(sidecar_path) as handle:
        rows = json.load(handle)['shardlist']
    assert [(r['url'], r['nsamples'], r['filesize'], r['uncompressed_size']) for r in rows] == [
        (name, 10, os.path.getsize(os.path.join(remote, name)), raw)
        for name in ('shard-00000.tar.gz', 'shard-00001.tar.gz')]

    def no_walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('a .tar.gz was decompressed to index it')
    monkeypatch.setattr(builder_module, 'gunzip', no_walk)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2)
    assert [reader.raw_bytes for reader in dataset.shards] == [raw, raw]
    assert list(dataset) == expected_of(plain)
    # A wids index with counts only (no uncompressed_size) is not enough for a compressed tar: it is walked.
    for row in rows:
        del row['uncompressed_size']
    with open(sidecar_path, 'w') as handle:
        json.dump({'__kind__': 'wids-shard-index-v1', 'shardlist': rows}, handle)
    with pytest.raises(AssertionError, match='decompressed to index it'):
        StreamingDataset(local=remote, batch_size=2)
    monkeypatch.undo()
    assert [sample_id(s) for s in StreamingDataset(local=remote, batch_size=2)] == list(range(20))


def _sidecar_then(tmp_path: Any, change: Any) -> tuple[str, StreamingDataset]:
    """A sidecar-indexed ``.tar.gz`` (remote) changed afterwards by ``change(path, data, rows)``, and a dataset."""
    from streaming_core.cli import main
    _, remote, _, _ = gz_remote(tmp_path, tars=1, per_tar=10)
    assert main(['index', remote]) == 0
    path = os.path.join(remote, 'shard-00000.tar.gz')
    sidecar_path = os.path.join(remote, 'webdataset-index.json')
    with open(path, 'rb') as handle:
        data = handle.read()
    with open(sidecar_path) as handle:
        obj = json.load(handle)
    change(path, data, obj['shardlist'])
    with open(sidecar_path, 'w') as handle:
        json.dump(obj, handle)
    return path, StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1)


def test_a_gzip_corrupted_after_indexing_fails_naming_the_file(tmp_path: Any) -> None:
    from streaming_core.plugin_api import ShardCorruptError

    def corrupt(path: str, data: bytes, rows: list[dict[str, Any]]) -> None:
        with open(path, 'wb') as handle:  # same size, so the sidecar still covers it
            handle.write(data[:10] + bytes(b ^ 0x5A for b in data[10:60]) + data[60:])
    path, dataset = _sidecar_then(tmp_path, corrupt)
    with pytest.raises(OSError, match=r'shard-00000\.tar\.gz: gz data is corrupt') as caught:
        dataset[0]
    assert isinstance(caught.value.__cause__, ShardCorruptError)  # the core's ShardPrepareError wraps it


def test_decompression_is_bounded_by_the_size_the_index_declares(tmp_path: Any) -> None:
    def understate(path: str, data: bytes, rows: list[dict[str, Any]]) -> None:
        rows[0]['uncompressed_size'] = 8192
    _, dataset = _sidecar_then(tmp_path, understate)
    with pytest.raises(OSError, match=r'shard-00000\.tar\.gz: gz data expands past the declared size of 8192 bytes'):
        dataset[0]
