"""Tars written by the ``webdataset`` package's own ``TarWriter`` read the same through us as through
``webdataset.WebDataset(...).decode()``: every sample, every field."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from streaming_core import StreamingDataset
from tests.deps import require


def _write(directory: str, tars: int, per_tar: int) -> None:
    import webdataset as wds
    os.makedirs(directory, exist_ok=True)
    for t in range(tars):
        with wds.TarWriter(os.path.join(directory, f'train-{t:04d}.tar')) as sink:
            for i in range(t * per_tar, (t + 1) * per_tar):
                sink.write({'__key__': f'sample{i:05d}', 'jpg': bytes([i % 256]) * (50 + i), 'cls': i % 7,
                            'json': {'id': i, 'words': ['x'] * (i % 3)}, 'txt': f'caption {i}',
                            'emb.npy': np.arange(4, dtype=np.float32) * i})


def test_samples_equal_the_webdataset_librarys(tmp_path: Any) -> None:
    require('webdataset')
    import webdataset as wds

    from streaming_webdataset import decode_sample
    data = str(tmp_path / 'data')
    _write(data, tars=3, per_tar=15)
    urls = [os.path.join(data, f'train-{t:04d}.tar') for t in range(3)]
    theirs = list(wds.WebDataset(urls, shardshuffle=False, empty_check=False).decode())
    ours = list(StreamingDataset(local=data, batch_size=1))
    assert len(ours) == len(theirs) == 45
    for mine, their in zip(ours, theirs):
        assert mine['__key__'] == their['__key__']
        assert os.path.basename(their['__url__']) == mine['__url__']
        for field in ('jpg', 'cls', 'json', 'txt'):
            assert mine[field] == their[field], field
        assert isinstance(mine['emb.npy'], bytes)
        np.testing.assert_array_equal(decode_sample(mine, ['npy'])['emb.npy'], their['emb.npy'])
        assert set(mine) == set(their) - {'__local_path__'}


def test_an_integer_field_that_is_not_an_integer(tmp_path: Any) -> None:
    """``.cls`` holding ``x1``: webdataset 1.0.2's ``.decode()`` raises ``DecodingError``; we give ``None``."""
    require('webdataset')
    import webdataset as wds
    from wds_data import write_tar
    from webdataset.autodecode import DecodingError
    data = str(tmp_path / 'data')
    write_tar(os.path.join(data, 'one.tar'), [('a.cls', b'x1'), ('a.txt', b'hi'), ('b.cls', b'4'), ('b.txt', b'ho')])
    with pytest.raises(DecodingError):
        list(wds.WebDataset(os.path.join(data, 'one.tar'), shardshuffle=False, empty_check=False).decode())
    ours = StreamingDataset(local=data, batch_size=1)
    assert ours[0]['cls'] is None and ours[0]['txt'] == 'hi'
    assert ours[1]['cls'] == 4
