"""A Parquet file replaced while a job reads it, through the user's own loop: a ``StreamingDataLoader`` whose
workers are forked or spawned, and threads reading one dataset at once. Every sample a
job serves is of the version its index was derived from, and the replacement stops the job with
``DatasetVersionError`` (raised in the training loop, from the worker that met it) before any row of the new file
is served."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.errors import DatasetVersionError

FILES, ROWS = 8, 40


def _write(path: str, tag: str, start: int) -> None:
    """``ROWS`` rows ``start..`` tagged ``tag`` (``old`` and ``new`` files have the same size and row groups)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    ids = range(start, start + ROWS)
    pq.write_table(pa.table({'id': pa.array(ids, pa.int64()), 'text': [f'{tag}-{i:04d}' for i in ids]}), path,
                   row_group_size=20, compression='none', use_dictionary=False, write_statistics=False)


def _dataset_dir(root: str) -> str:
    data = os.path.join(root, 'data')
    os.makedirs(data)
    for f in range(FILES):
        _write(os.path.join(data, f'f{f}.parquet'), 'old', f * ROWS)
    return data


def _replace_last(data: str, root: str) -> None:
    """Replace the last file (the same size, later rows, a new modification time), as a sync of a new version."""
    path = os.path.join(data, f'f{FILES - 1}.parquet')
    _write(os.path.join(root, 'new.parquet'), 'new', (FILES - 1) * ROWS)
    assert os.path.getsize(os.path.join(root, 'new.parquet')) == os.path.getsize(path)
    os.replace(os.path.join(root, 'new.parquet'), path)
    later = os.stat(path).st_mtime + 10
    os.utime(path, (later, later))


@pytest.mark.parametrize('context, remote', [('spawn', True), ('fork', False)], ids=['spawn-remote', 'fork-in-place'])
def test_a_file_replaced_while_dataloader_workers_read_stops_the_loop(tmp_path: Any, context: str,
                                                                      remote: bool) -> None:
    _stopped_loop(tmp_path, context, remote, _replace_last, r'f7\.parquet was replaced')


def _stopped_loop(tmp_path: Any, context: str, remote: bool, change: Any, match: str) -> None:
    """A ``StreamingDataLoader`` (2 workers of ``context``) over the files in place or from a path remote, the last
    file changed by ``change(data, root)`` after the first batch: the loop stops with ``DatasetVersionError``
    matching ``match``, having served only rows of the old files."""
    data = _dataset_dir(str(tmp_path))
    where = {'remote': data, 'local': str(tmp_path / 'cache')} if remote else {'local': data}
    dataset = StreamingDataset(**where, batch_size=4, predownload=4)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=context)
    texts: list[str] = []
    batches = iter(loader)
    texts += next(batches)['text']
    change(data, str(tmp_path))
    with pytest.raises(DatasetVersionError, match=match):
        for batch in batches:
            texts += batch['text']
    assert texts and all(text.startswith('old-') for text in texts)  # nothing of the new file, ever
    assert len(texts) < FILES * ROWS


def test_threads_reading_one_dataset_stop_at_a_replaced_file(tmp_path: Any) -> None:
    """Four threads read one in-place dataset by index (as a threaded data pipeline does); the file replaced
    meanwhile is refused to every thread that reaches it, and no thread gets a row of it."""
    data = _dataset_dir(str(tmp_path))
    dataset = StreamingDataset(local=data, batch_size=4)
    assert dataset[0]['text'] == 'old-0000'
    _replace_last(data, str(tmp_path))
    got: list[str] = []
    refused: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def read(thread: int) -> None:
        for i in range(thread, FILES * ROWS, 4):
            try:
                text = dataset[i]['text']
            except DatasetVersionError:
                with lock:
                    refused.append(i)
                continue
            except BaseException as err:  # noqa: BLE001 - reported below
                failures.append(err)
                return
            with lock:
                got.append(text)
    threads = [threading.Thread(target=read, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures and not any(thread.is_alive() for thread in threads)
    assert sorted(refused) == list(range((FILES - 1) * ROWS, FILES * ROWS))
    assert sorted(got) == sorted(f'old-{i:04d}' for i in range((FILES - 1) * ROWS))


def test_threads_reading_one_parquet_dataset_at_once_get_every_row(tmp_path: Any) -> None:
    """Four threads reading rows of the same row groups at once: pyarrow's ``ParquetFile`` is not safe to read from
    two threads, and answered with errors taken for a corrupt file ("ReadRangeCache did not find matching cache
    entry", a realloc of 10^14 bytes), or hung; each view now decodes a row group once, the other threads waiting."""
    data = _dataset_dir(str(tmp_path))
    for _ in range(30):
        dataset = StreamingDataset(local=data, batch_size=4)
        failures: list[BaseException] = []

        def read(thread: int, dataset: StreamingDataset, failures: list[BaseException]) -> None:
            for i in range(thread, FILES * ROWS, 4):
                try:
                    assert dataset[i]['id'] == i
                except BaseException as err:  # noqa: BLE001 - reported below
                    failures.append(err)
                    return
        threads = [threading.Thread(target=read, args=(t, dataset, failures), daemon=True) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures and not any(thread.is_alive() for thread in threads), failures[:1]


def _rewrite_last_keeping_its_stat(data: str, root: str) -> None:
    """Overwrite the last file in place with later rows, then put its modification time back (``cp -p``): its size
    and modification time are what the listing named; only its change time moved."""
    path = os.path.join(data, f'f{FILES - 1}.parquet')
    _write(os.path.join(root, 'new.parquet'), 'new', (FILES - 1) * ROWS)
    before = os.stat(path)
    with open(os.path.join(root, 'new.parquet'), 'rb') as source, open(path, 'r+b') as target:
        target.write(source.read())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.mark.parametrize('context, remote', [('spawn', False), ('fork', False), ('spawn', True)],
                         ids=['spawn-in-place', 'fork-in-place', 'spawn-remote'])
def test_a_file_rewritten_keeping_its_stat_while_dataloader_workers_read_stops_the_loop(
        tmp_path: Any, context: str, remote: bool) -> None:
    """The rewrite a stat cannot show, met by DataLoader workers: each worker (a spawned one unpickles the dataset,
    a forked one inherits it) compares the file's print taken when the index was derived before it opens the file
    or copies it, and the loop stops before any row of the new bytes is served."""
    _stopped_loop(tmp_path, context, remote, _rewrite_last_keeping_its_stat, r'f7\.parquet was rewritten in place')
