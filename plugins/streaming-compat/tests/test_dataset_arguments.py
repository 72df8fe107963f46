"""``streaming.StreamingDataset`` arguments (the reference's defaults and validations, spec runtime.md 1.1) and its
state dicts (9.1-9.3): the reference's keys, ``num_samples``/``from_beginning``, and resuming a reference-shaped
state."""

from __future__ import annotations

from typing import Any

import pytest
import streaming
from streaming import Stream, StreamingDataLoader, StreamingDataset

REFERENCE_DEFAULTS = {'download_retry': 2, 'download_timeout': 60.0, 'validate_hash': None, 'keep_zip': False,
                      'predownload': 64, 'cache_limit': None, 'sampling_method': 'balanced',
                      'sampling_granularity': 1, 'partition_algo': 'relaxed', 'num_canonical_nodes': None,
                      'batch_size': None, 'shuffle': False, 'shuffle_algo': 'py1e', 'shuffle_seed': 9176,
                      'shuffle_block_size': None, 'batching_method': 'random', 'allow_unsafe_types': False,
                      'replication': None}


def test_defaults_are_the_references(int_dataset: str) -> None:
    dataset = StreamingDataset(local=int_dataset)
    assert {name: getattr(dataset, name) for name in REFERENCE_DEFAULTS} == REFERENCE_DEFAULTS
    assert StreamingDataset(local=int_dataset, batch_size=3).predownload == 24  # 8 * batch_size


def test_the_signature_lists_every_argument() -> None:
    """Frameworks filter config keys by ``inspect.signature(StreamingDataset)``."""
    import inspect
    parameters = inspect.signature(StreamingDataset).parameters
    for name in [*REFERENCE_DEFAULTS, 'streams', 'remote', 'local', 'split', 'epoch_size', 'stream_name',
                 'stream_config']:
        assert name in parameters and parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert parameters['stream_name'].default == 'stream' and parameters['shuffle_seed'].default == 9176


@pytest.mark.parametrize('kwargs,match', [
    ({'sampling_method': 'x'}, 'Invalid sampling method'),
    ({'shuffle_seed': -1}, 'shuffle_seed'),
    ({'epoch_size': -1}, 'Epoch size cannot be negative'),
    ({'epoch_size': '12q'}, 'Unsupported value/suffix'),
    ({'replication': 0}, 'Replication factor must be positive'),
    ({'sampling_granularity': 0}, 'sampling_granularity'),
])
def test_invalid_arguments_are_value_errors(int_dataset: str, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StreamingDataset(local=int_dataset, **kwargs)


def test_streams_or_remote_local_not_both(int_dataset: str) -> None:
    with pytest.raises(ValueError, match='You must provide either `streams` or `remote`/`local`, but not both'):
        StreamingDataset(streams=[Stream(local=int_dataset)], local=int_dataset)
    with pytest.raises(ValueError, match='You must provide either'):
        StreamingDataset()
    with pytest.raises(ValueError, match='At most one of `proportion`, `repeat`, and `choose`'):
        Stream(local=int_dataset, proportion=0.5, repeat=2)


def test_unknown_batching_method_is_a_value_error(int_dataset: str) -> None:
    with pytest.raises(ValueError, match='batching method'):
        StreamingDataset(local=int_dataset, batching_method='nope')


def test_epoch_size_and_weights(int_dataset: str, tmp_path: Any) -> None:
    assert StreamingDataset(local=int_dataset, epoch_size='0.1k', batch_size=4).epoch_size == 100
    assert len(StreamingDataset(local=int_dataset, epoch_size=90, batch_size=4)) == 90
    second = str(tmp_path / 'second')
    with streaming.MDSWriter(out=second, columns={'id': 'int', 'text': 'str'}) as writer:
        for i in range(10):
            writer.write({'id': 100 + i, 'text': 'x'})
    dataset = StreamingDataset(streams=[Stream(local=int_dataset, repeat=0.5), Stream(local=second, choose=25)],
                               batch_size=5)
    first, other = dataset.streams
    assert (first.choose, other.choose, dataset.epoch_size) == (20, 25, 45)
    assert (first.repeat, other.repeat) == (0.5, 2.5)
    assert first.proportion == pytest.approx(20 / 45)
    ids = [s['id'] for s in dataset]
    assert len(ids) == 45 and sum(i >= 100 for i in ids) == 25


def test_state_dict_has_the_reference_keys_and_meaning(int_dataset: str) -> None:
    dataset = StreamingDataset(local=int_dataset, batch_size=4, shuffle=True, num_canonical_nodes=1)
    loader = StreamingDataLoader(dataset, batch_size=4)
    seen = []
    for k, batch in enumerate(loader):
        seen += [int(i) for i in batch['id']]
        if k == 2:
            state = loader.state_dict()
            break
    assert {'epoch', 'sample_in_epoch', 'num_canonical_nodes', 'shuffle_seed', 'initial_physical_nodes'} <= set(state)
    assert (state['epoch'], state['sample_in_epoch'], state['num_canonical_nodes'], state['shuffle_seed']) == \
        (0, 12, 1, 9176)
    assert dataset.state_dict(5, True)['sample_in_epoch'] == 5  # from_beginning: num_samples itself
    full = [int(i) for batch in StreamingDataLoader(
        StreamingDataset(local=int_dataset, batch_size=4, shuffle=True, num_canonical_nodes=1), batch_size=4)
        for i in batch['id']]
    resumed = StreamingDataLoader(StreamingDataset(local=int_dataset, batch_size=4, shuffle=True,
                                                   num_canonical_nodes=1), batch_size=4)
    resumed.load_state_dict(state)
    assert seen + [int(i) for batch in resumed for i in batch['id']] == full


def test_a_reference_shaped_state_resumes(int_dataset: str) -> None:
    """What the reference writes (no keys of ours), also with the older form lacking initial_physical_nodes."""
    def order(state: dict[str, Any] | None) -> list[int]:
        dataset = StreamingDataset(local=int_dataset, batch_size=4, shuffle=True, shuffle_seed=5)
        if state is not None:
            dataset.load_state_dict(state)
        return [s['id'] for s in dataset]
    full = order(None)
    assert order({'epoch': 0, 'sample_in_epoch': 8, 'num_canonical_nodes': 1, 'shuffle_seed': 5,
                  'initial_physical_nodes': 1}) == full[8:]
    assert order({'epoch': 0, 'sample_in_epoch': 16, 'num_canonical_nodes': 1, 'shuffle_seed': 5}) == full[16:]
