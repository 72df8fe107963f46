"""What every runner shares: the sample cases, the source arrays, the timed DataLoader epoch, percentiles.

Imported by ``runner.py`` and the ``impl_*.py`` modules in both virtualenvs, so it needs only numpy and torch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

#: Column encodings (MDS) per case. ``small``: 256 random bytes + an int; ``image``: a 32x32x3 uint8 array + an int.
COLUMNS = {'small': {'id': 'int', 'data': 'bytes'}, 'image': {'id': 'int', 'image': 'ndarray:uint8:32,32,3'}}
#: The payload column of each case.
PAYLOAD = {'small': 'data', 'image': 'image'}
#: Sample shape of each case's source array (one row per sample).
SHAPES = {'small': (256,), 'image': (32, 32, 3)}
#: Bytes of one encoded MDS sample (head + columns) per case, for sizing shards.
MDS_SAMPLE_BYTES = {'small': 4 + 256 + 8, 'image': 32 * 32 * 3 + 8}


def make_source(case: str, count: int, seed: int = 1234) -> np.ndarray:
    """The case's payloads for ``count`` samples: ``(count, 256)`` or ``(count, 32, 32, 3)`` random uint8."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (count, *SHAPES[case]), dtype=np.uint8)


def load_source(path: str) -> np.ndarray:
    """The source array written by the driver (memory-mapped, read-only)."""
    return np.load(path, mmap_mode='r')


def sample(case: str, source: np.ndarray, index: int) -> dict[str, Any]:
    """Sample ``index`` as every library writes it: ``{'id': int, 'data': bytes}`` or ``{'id', 'image': ndarray}``."""
    if case == 'small':
        return {'id': index, 'data': source[index].tobytes()}
    return {'id': index, 'image': np.ascontiguousarray(source[index])}


def check_sample(case: str, source: np.ndarray, item: dict[str, Any]) -> None:
    """Raise if one iterated or fetched sample differs from the source (type included)."""
    index = int(item['id'])
    payload = item[PAYLOAD[case]]
    if case == 'small':
        if type(payload) is not bytes:
            raise AssertionError(f'the data column came back as {type(payload).__name__}, not bytes')
        if payload != source[index].tobytes():
            raise AssertionError(f'sample {index}: data differs from the source')
    else:
        array = np.asarray(payload)
        if array.shape != SHAPES[case] or array.dtype != np.uint8 or not np.array_equal(array, source[index]):
            raise AssertionError(f'sample {index}: image differs from the source ({array.dtype} {array.shape})')


def check_batch(case: str, source: np.ndarray, batch: dict[str, Any]) -> None:
    """Raise unless a collated batch has the expected types and the source's content."""
    ids = batch['id'].tolist()
    payload = batch[PAYLOAD[case]]
    if case == 'small':
        if not isinstance(payload, list) or type(payload[0]) is not bytes:
            raise AssertionError(f'the collated data column is {type(payload).__name__} of '
                                 f'{type(payload[0]).__name__}; expected a list of bytes')
        for index, data in zip(ids, payload):
            check_sample(case, source, {'id': index, 'data': data})
    else:
        array = payload.numpy()
        if array.shape != (len(ids), *SHAPES[case]):
            raise AssertionError(f'the collated image batch has shape {array.shape}')
        if not np.array_equal(array, source[np.array(ids)]):
            raise AssertionError('an image in the first batch differs from the source')


def warm_page_cache(path: str) -> int:
    """Read every file under ``path`` once (so "warm cache" means in the page cache); returns the bytes read."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), 'rb') as handle:
                while True:
                    chunk = handle.read(1 << 24)
                    if not chunk:
                        break
                    total += len(chunk)
    return total


def time_epoch(dataset: Any, case: str, source: np.ndarray, *, batch_size: int, workers: int,
               max_seconds: float | None = None) -> dict[str, Any]:
    """Iterate one epoch through a torch DataLoader (``default_collate``) and time it.

    The clock starts before ``iter(loader)`` (so DataLoader worker start-up counts) and stops after the last
    batch. The first batch is checked against the source outside the clock; every batch adds its ids to a sum
    (one tensor reduction per batch) so a missing or repeated sample shows.
    """
    from torch.utils.data import DataLoader
    from torch.utils.data._utils.collate import default_collate

    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=default_collate)
    checked = 0.0
    count = 0
    id_sum = 0
    first = None
    start = time.perf_counter()
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
            mark = time.perf_counter()
            check_batch(case, source, batch)
            checked = time.perf_counter() - mark
        count += len(batch['id'])
        id_sum += int(batch['id'].sum())
        if max_seconds is not None and time.perf_counter() - start - checked > max_seconds:
            break
    seconds = time.perf_counter() - start - checked
    return {'seconds': seconds, 'first_batch_s': first, 'samples': count, 'id_sum': id_sum,
            'rate': count / seconds if seconds > 0 else 0.0}


def percentiles(values_s: Iterable[float]) -> dict[str, float]:
    """p50/p90/p99 and the mean, in microseconds."""
    array = np.asarray(list(values_s), dtype=np.float64) * 1e6
    return {'p50_us': float(np.percentile(array, 50)), 'p90_us': float(np.percentile(array, 90)),
            'p99_us': float(np.percentile(array, 99)), 'mean_us': float(array.mean())}


def time_random_access(dataset: Any, ids: list[int]) -> tuple[list[float], list[Any]]:
    """Time ``dataset[i]`` for each id (one ``perf_counter`` pair per call); returns the times and the answers."""
    clock = time.perf_counter
    times = []
    answers = []
    for index in ids:
        start = clock()
        item = dataset[index]
        times.append(clock() - start)
        answers.append(item)
    return times, answers


def check_answers(case: str, source: np.ndarray, ids: list[int], answers: list[Any]) -> None:
    """Raise unless every ``dataset[i]`` answer is sample ``i`` of the source."""
    for index, item in zip(ids, answers):
        if int(item['id']) != index:
            raise AssertionError(f'dataset[{index}] returned sample {item["id"]}')
        check_sample(case, source, item)
