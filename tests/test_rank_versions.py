"""Ranks of one job reading different versions of a dataset: an error, never lost or repeated samples.

Real rank processes in a gloo process group (torchrun's environment), the dataset rewritten between the first rank's
construction and the second's, as happens when a job starts while ``index.json`` is replaced or an ``hf://`` branch
gets a push.
"""

from __future__ import annotations

import pytest

from streaming_core.ordering.rank_versions import same_dataset_version
from tests.deps import require
from tests.fixtures.data import write_mds
from tests.multiproc import run_two_ranks_across_a_change

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize('init, workers, context', [
    ('before', 0, None),        # the group exists at construction: the second rank's constructor raises
    ('after', 2, 'fork'),       # a DataModule built before the group: the forked workers raise what the rank found
    ('after', 2, 'spawn'),      # pickled for spawned workers: the rank's main process raises
])
def test_ranks_on_different_versions_of_a_dataset_stop_with_an_error(tmp_path, init, workers, context):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    results = run_two_ranks_across_a_change(
        tmp_path, {'remote': remote, 'local': str(tmp_path / 'local')}, init, workers, context,
        change=lambda: write_mds(remote, 48, exist_ok=True), first_reads=init == 'after')
    assert results[0]['len'] == 20
    if init == 'before':  # rank 0 compared at construction, before the rewrite: its version is the job's
        assert results[0] == {'len': 20}, results[0]  # (its files were rewritten under it: it does not read)
        late, first = 1, 0
    else:  # compared once the group exists, in whichever order the ranks get there; the other rank's version
        late = next(i for i, r in enumerate(results) if r.get('error', [''])[0] == 'DatasetVersionError')
        first = 1 - late
        assert results[1]['len'] == 24
    name, message = results[late]['error']
    assert name == 'DatasetVersionError', results
    compared = f'Rank {late} reads another version of the dataset than rank {first}' in message and 'hf://' in message
    # The ranks share one node's cache: the rank on the old version may also first meet the directory refreshed for
    # the new one when it opens a file (the same error class, another message).
    assert compared or (init == 'after' and late == 0 and 'changed while this job read it' in message), message
    assert remote in message


def test_ranks_on_two_nodes_across_a_rewrite_with_an_identical_index_stop(tmp_path, monkeypatch):
    """Fixed-size samples without hashes rewritten with new content: the same index.json bytes. Rank 0's node already
    holds the old version (an earlier run), so it downloads nothing; rank 1's node downloads the new one. Their
    shard names and counts agree: the remote version each loaded (its index's stat) tells them apart."""
    import os

    from streaming_core import StreamingDataset
    remote = write_mds(str(tmp_path / 'remote'), 40)
    nodes = [{'local': str(tmp_path / f'local{rank}'), 'cache': str(tmp_path / f'cache{rank}')} for rank in range(2)]
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', nodes[0]['cache'])
    assert sorted(s['id'] for s in StreamingDataset(remote=remote, local=nodes[0]['local'], batch_size=4)) == \
        list(range(40))
    with open(os.path.join(remote, 'index.json'), 'rb') as handle:
        before = handle.read()

    def rewrite() -> None:
        write_mds(remote, 40, start=1000, exist_ok=True)
        with open(os.path.join(remote, 'index.json'), 'rb') as handle:
            assert handle.read() == before  # the hard case: nothing in the index differs

    results = run_two_ranks_across_a_change(tmp_path, {'remote': remote}, 'before', 0, None, change=rewrite,
                                            nodes=nodes)
    assert results[0].get('ids') is not None and sorted(results[0]['ids']) != [], results
    name, message = results[1]['error']
    assert name == 'DatasetVersionError' and 'Rank 1 reads another version of the dataset than rank 0' in message
    assert 'The shards, hashes and sample counts are the same' in message and 'cp -p, rsync -a' in message


def test_each_nodes_own_copy_at_the_remote_path_is_one_version(tmp_path, monkeypatch):
    """Nodes that each hold their own copy of the dataset at the remote path (``rsync -a``: the same sizes and
    modification times, other inodes and change times) offer the same version; a rewrite is another. (Two nodes' one
    path cannot be made on one machine: the two copies' versions are compared directly.)"""
    import os
    import shutil

    from streaming_core import Stream, StreamingDataset
    from streaming_core.ordering.rank_versions import VersionCheck
    first = write_mds(str(tmp_path / 'node0'), 40)
    second = shutil.copytree(first, str(tmp_path / 'node1'))  # copy2: modification times kept
    assert os.stat(first).st_ino != os.stat(second).st_ino
    versions = []
    for path in (first, second, first):
        monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / f'cache-{len(versions)}'))
        dataset = StreamingDataset(streams=[Stream(remote=path, local=str(tmp_path / f'local-{len(versions)}'))],
                                   batch_size=4)
        versions.append(VersionCheck.of_dataset(dataset.streams, dataset.catalogue).version)
        if len(versions) == 2:
            write_mds(first, 40, start=1000, exist_ok=True)  # the same index bytes, a new modification time
    assert same_dataset_version(versions[0], versions[1]) and not same_dataset_version(versions[1], versions[2])


@pytest.mark.parametrize('hashes', [None, ['xxh64']])
def test_each_nodes_copy_made_without_modification_times_is_one_version_when_hashed(tmp_path, monkeypatch, hashes):
    """Copies made with `cp -r` (new modification times): with a hash for every file, the content (which holds
    them) decides, so the nodes agree; without hashes nothing but the stat tells a same-size rewrite apart, so
    they are another version (and the error says how to copy)."""
    import os
    import shutil

    from streaming_core import Stream, StreamingDataset
    from streaming_core.ordering.rank_versions import VersionCheck
    first = write_mds(str(tmp_path / 'node0'), 40, hashes=hashes)
    second = shutil.copytree(first, str(tmp_path / 'node1'), copy_function=shutil.copyfile)  # mtimes not kept
    index = os.path.join(second, 'index.json')
    os.utime(index, ns=(os.stat(index).st_atime_ns, os.stat(index).st_mtime_ns + 7_000_000_000))
    versions = []
    for path in (first, second):
        monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / f'cache-{len(versions)}'))
        dataset = StreamingDataset(streams=[Stream(remote=path, local=str(tmp_path / f'local-{len(versions)}'))],
                                   batch_size=4)
        versions.append(VersionCheck.of_dataset(dataset.streams, dataset.catalogue).version)
    assert same_dataset_version(versions[0], versions[1]) == bool(hashes)


def test_versions_compare_remote_identities_only_of_one_kind():
    """A rank whose stat of the remote failed names its version by the index bytes (``sha256:``): that cannot be
    compared with another rank's ``stat:``, so only the content decides; two stats (or two digests) must agree."""
    assert same_dataset_version('c1|stat:aa,', 'c1|stat:aa,')
    assert not same_dataset_version('c1|stat:aa,', 'c1|stat:bb,')
    assert same_dataset_version('c1|stat:aa,', 'c1|sha256:cc,')
    assert not same_dataset_version('c1|sha256:dd', 'c1|sha256:cc')
    assert not same_dataset_version('c2|stat:aa,', 'c1|stat:aa,')
    assert same_dataset_version('c1|,derived:ee', 'c1|,derived:ee') and not same_dataset_version('c1|', 'c1|,')


def test_ranks_on_one_version_read_every_sample_once(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    results = run_two_ranks_across_a_change(tmp_path, {'remote': remote, 'local': str(tmp_path / 'local')}, 'after',
                                            2, 'fork', change=None)
    ids = [i for result in results for i in result['ids']]
    assert all('error' not in result for result in results), results
    assert sorted(ids) == list(range(40))


def test_a_store_that_cannot_compare_is_a_warning_not_a_failure(tmp_path, monkeypatch, caplog):
    """A process group whose store has no working ``compare_set``: datasets construct and read, with a warning."""
    import streaming_core.ordering.rank_versions as rank_versions
    from streaming_core import StreamingDataset

    class Store:
        def compare_set(self, *args):
            raise RuntimeError('compare_set is not supported by this store')

    class Dist:
        @staticmethod
        def get_rank():
            return 0

    store = Store()
    monkeypatch.setattr(rank_versions, '_dist', lambda: Dist)
    monkeypatch.setattr(rank_versions, '_store_key', lambda dist: (store, (id(store), 2)))
    remote = write_mds(str(tmp_path / 'remote'), 20)
    with caplog.at_level('WARNING', logger='streaming_core.ordering.rank_versions'):
        dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4)
    assert sorted(sample['id'] for sample in dataset) == list(range(20))
    assert 'Cannot compare the dataset version across ranks' in caplog.text and 'not supported' in caplog.text


def test_splits_chosen_by_format_options_are_different_datasets(tmp_path, monkeypatch):
    """Train and validation of one Hugging Face-layout Parquet directory (the split is a format option), with a
    dataset built on rank 0 only first (Lightning's ``prepare_data``): no rank sees another version. Before, the two
    splits had one name, so rank 1's validation set was compared with rank 0's second training set."""
    require('pyarrow')
    import pyarrow as pa
    import pyarrow.parquet as pq

    import streaming_core.ordering.rank_versions as rank_versions
    from streaming_core import Stream, StreamingDataset
    root = tmp_path / 'hub'
    (root / 'data').mkdir(parents=True)
    pq.write_table(pa.table({'id': list(range(40))}), str(root / 'data' / 'train-00000-of-00001.parquet'))
    pq.write_table(pa.table({'id': list(range(6))}), str(root / 'data' / 'validation-00000-of-00001.parquet'))

    class Store(dict):
        def compare_set(self, key, expected, desired):
            return self.setdefault(key, desired).encode()

    class Dist:
        rank = 0

        @classmethod
        def get_rank(cls):
            return cls.rank

    store = Store()
    monkeypatch.setattr(rank_versions, '_dist', lambda: Dist)
    monkeypatch.setattr(rank_versions, '_store_key', lambda dist: (store, (id(store), 2)))

    def build(split):
        return StreamingDataset(streams=[Stream(local=str(root), format_options={'split': split})], batch_size=4)

    build('train')  # rank 0 only
    assert [len(build('train')), len(build('validation'))] == [40, 6]
    Dist.rank = 1  # the other rank's process: its own construction order
    monkeypatch.setattr(rank_versions, '_ordinals', type(rank_versions._ordinals)())
    assert [len(build('train')), len(build('validation'))] == [40, 6]
