"""``streaming.base.util.merge_index`` in both call forms, as a parallel conversion uses it (spec formats.md 7.4)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import streaming
from streaming.base.util import merge_index


def _partitions(root: str, names: list[str]) -> list[str]:
    for k, name in enumerate(names):
        with streaming.MDSWriter(out=os.path.join(root, name), columns={'p': 'int', 'i': 'int'},
                                 size_limit=100) as writer:
            for i in range(5):
                writer.write({'p': k, 'i': i})
    return [os.path.join(root, name, 'index.json') for name in names]


def _read(root: str) -> list[tuple[int, int]]:
    dataset = streaming.StreamingDataset(local=root, batch_size=1)
    return [(s['p'], s['i']) for s in (dataset[i] for i in range(dataset.num_samples))]


def test_from_a_list_keeps_the_given_order(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    indexes = _partitions(root, ['a', 'b', 'c'])
    merge_index([indexes[2], indexes[0], indexes[0] + '/'.rstrip('/'), indexes[1]], root)
    with open(os.path.join(root, 'index.json')) as handle:
        merged = json.load(handle)
    assert merged['version'] == 2
    assert merged['shards'][0]['raw_data']['basename'].startswith('c/')
    assert _read(root) == [(2, i) for i in range(5)] + [(0, i) for i in range(5)] + [(1, i) for i in range(5)]


def test_from_the_root_in_lexicographic_order(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    _partitions(root, ['0', '1', '10', '2'])
    merge_index(root)
    assert [p for p, _ in _read(root)[::5]] == [0, 1, 2, 3]  # directories 0, 1, 10, 2 in that order
    with open(os.path.join(root, 'index.json')) as handle:
        first = handle.read()
    merge_index(root)  # the reference fails on an existing index; ours rewrites the same one
    with open(os.path.join(root, 'index.json')) as handle:
        assert handle.read() == first


def test_invalid_arguments(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match='Invalid arguments to merge_index'):
        merge_index(5)
    with pytest.raises(FileNotFoundError):
        merge_index([str(tmp_path / 'missing' / 'index.json')], str(tmp_path / 'out'))
