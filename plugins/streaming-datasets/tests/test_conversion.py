"""The conversion engine: partitions, order, skips, and failures of partition processes."""

from __future__ import annotations

import faulthandler
import functools
import os

import pytest

from streaming_core.local import LocalDataset
from streaming_datasets.conversion import (
    ConversionError,
    Skip,
    SourceLayoutError,
    WriterOptions,
    convert_split,
    partition_items,
)

COLUMNS = {'x': 'int'}
COPY = functools.partial(map, dict)  # a picklable producer: each item is already a sample


def test_partitions_are_contiguous_and_balanced():
    assert partition_items(list(range(10)), 3) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert partition_items(list(range(2)), 5) == [[0], [1]]
    assert partition_items([], 4) == []


def test_parallel_partitions_keep_the_order(tmp_path):
    out = str(tmp_path / 'out')
    items = [{'x': i} for i in range(25)]
    result = convert_split(items, COPY, COLUMNS, out, WriterOptions(workers=3, size_limit=64, progress=False))
    assert (result.samples, result.partitions) == (25, 3)
    dataset = LocalDataset(out)
    assert [dataset[i]['x'] for i in range(25)] == list(range(25))


def test_skips_are_counted(tmp_path):
    def produce(items):
        for item in items:
            yield Skip(f'odd {item}') if item % 2 else {'x': item}

    result = convert_split(list(range(7)), produce, COLUMNS, str(tmp_path / 'out'), WriterOptions(progress=False))
    assert (result.samples, result.skipped, result.skip_reasons) == (4, 3, ['odd 1', 'odd 3', 'odd 5'])


def test_bad_producers_and_empty_sources(tmp_path):
    with pytest.raises(SourceLayoutError, match='nothing to convert'):
        convert_split([], COPY, COLUMNS, str(tmp_path / 'a'))
    with pytest.raises(ValueError, match='cannot be sent to worker processes'):
        convert_split([1, 2], lambda items: iter(()), COLUMNS, str(tmp_path / 'b'), WriterOptions(workers=2))


def test_a_failing_partition_commits_nothing(tmp_path):
    out = str(tmp_path / 'out')
    items = [{'x': 1}, {'x': 2}, {'x': 'three'}]
    with pytest.raises(ConversionError, match=r'partition 1 of 2 .* failed: .*three'):
        convert_split(items, COPY, COLUMNS, out, WriterOptions(workers=2, progress=False))
    assert not os.path.exists(os.path.join(out, 'index.json'))


@pytest.mark.slow
def test_a_partition_process_that_dies_is_reported(tmp_path):
    out = str(tmp_path / 'out')
    crash = functools.partial(map, faulthandler._sigsegv)  # the first item crashes the process with SIGSEGV
    with pytest.raises(ConversionError, match='died with exit code -11'):
        convert_split([1, 2], crash, COLUMNS, out, WriterOptions(workers=2, progress=False))
    assert not os.path.exists(os.path.join(out, 'index.json'))
