"""The conversion engine: partitions, order, skips, and failures of partition processes."""

from __future__ import annotations

import copy
import faulthandler
import functools
import io
import os

import pytest

from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets.conversion import (
    ConversionError,
    Skip,
    SourceLayoutError,
    WriterOptions,
    convert_split,
    partition_items,
)
from streaming_datasets.progress import Progress

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


AS_IS = functools.partial(map, copy.copy)  # a picklable producer yielding each item (a sample dict or a Skip)


def test_a_partition_of_only_skips_merges_and_a_run_of_only_skips_commits_nothing(tmp_path):
    items = [Skip('a'), Skip('b'), Skip('c'), {'x': 3}, {'x': 4}, {'x': 5}]
    out = str(tmp_path / 'mixed')
    result = convert_split(items, AS_IS, COLUMNS, out, WriterOptions(workers=2, progress=False), total=6)
    assert (result.samples, result.skipped, result.skip_reasons) == (3, 3, ['a', 'b', 'c'])
    assert [LocalDataset(out)[i]['x'] for i in range(3)] == [3, 4, 5]
    for workers in (1, 2):
        empty = str(tmp_path / f'empty{workers}')
        with pytest.raises(SourceLayoutError, match=r'no sample was written: all 3 source record\(s\) were skipped '
                                                    r'\(first: a\)'):
            convert_split(items[:3], AS_IS, COLUMNS, empty, WriterOptions(workers=workers, progress=False))
        assert not os.path.exists(os.path.join(empty, 'index.json'))


def test_progress_counts_skipped_records_to_the_total(tmp_path):
    log = io.StringIO()  # not a terminal: plain lines, the last one at the end
    with Progress('Demo', records=6, items=2, unit='rows', stream=log) as progress:
        for sample in (1, 0, 1, 1, 0, 1):
            progress.update(samples=sample, skipped=1 - sample)
    assert log.getvalue().splitlines()[-1].startswith('Demo: 6/6 rows (100%), 4 samples, 2 skipped')
    log = io.StringIO()
    with Progress('Files', records=None, items=3, item_unit='files', stream=log) as progress:
        progress.update(samples=10)
        progress.update(items=3)
    assert log.getvalue().splitlines()[-1].startswith('Files: 3/3 files (100%), 10 samples')
