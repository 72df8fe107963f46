"""``ndarray`` columns decode to writable arrays, so torch's ``default_collate`` takes them without a warning
(issue 13, item 8: "The given NumPy array is not writable" on every run)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from streaming_mds import MDSWriter, mds_decode, mds_encode

torch = pytest.importorskip('torch')

ENCODINGS = ['ndarray', 'ndarray:float32', 'ndarray:float32:4,3']


@pytest.mark.parametrize('encoding', ENCODINGS)
def test_decoded_array_is_fresh_and_writable(encoding: str) -> None:
    array = np.arange(12, dtype=np.float32).reshape(4, 3)
    data = mds_encode(encoding, array)
    back = mds_decode(encoding, data)
    assert back.flags.writeable and back.flags.c_contiguous and back.base is None
    back[0, 0] = 99.0  # writing to it changes neither the stored bytes nor another decode
    assert mds_decode(encoding, data)[0, 0] == 0.0
    assert np.array_equal(mds_decode(encoding, data), array)


def test_default_collate_of_streamed_samples_gives_no_warning(tmp_path: Any) -> None:
    """The user's steps: write ndarray columns, stream them, collate a batch with torch's default collate."""
    from torch.utils.data import default_collate

    from streaming_core import StreamingDataset
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'x': 'ndarray:float32:4,3', 'y': 'ndarray', 'label': 'int'},
                   size_limit=1 << 12) as writer:
        for i in range(40):
            writer.write({'x': np.full((4, 3), i, np.float32), 'y': np.arange(i % 5 + 1, dtype=np.int64),
                          'label': i})
    dataset = StreamingDataset(local=out, batch_size=8)
    samples = list(dataset)[:8]
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # any warning (the not-writable UserWarning included) fails the test
        batch = default_collate([{'x': s['x'], 'label': s['label']} for s in samples])
        singles = [default_collate([s['y']]) for s in samples]
        random_access = default_collate([dataset[i]['x'] for i in range(3)])
    assert batch['x'].shape == (8, 4, 3) and batch['x'].dtype == torch.float32
    assert [int(v) for v in batch['label']] == [int(s['label']) for s in samples]
    assert all(torch.equal(one[0], torch.from_numpy(s['y'])) for one, s in zip(singles, samples))
    assert random_access.shape == (3, 4, 3)
