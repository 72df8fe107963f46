"""Issue 14's dead code and moved helpers: ``redact_url`` lives in ``redact.py``, ``gc_paused`` in ``iteration.py``
(next to the iterator it is used for); ``streaming_core.util`` re-exports both as the same objects; the unused
``Spanner(span_size=)`` and ``StreamingDataset.epoch_seed_change`` are gone."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest

import streaming_core.reading.iteration as iteration
import streaming_core.storage.redact as redact
import streaming_core.util as util
from streaming_core import StreamingDataset
from streaming_core.ordering.planner import EpochPlanner
from streaming_core.reading.spanner import Spanner


def test_the_old_import_paths_give_the_same_objects():
    from streaming_core.util import _URL_SECRET, _URL_USERINFO, gc_paused, redact_url
    assert redact_url is redact.redact_url and gc_paused is iteration.gc_paused
    assert _URL_SECRET is redact._URL_SECRET and _URL_USERINFO is redact._URL_USERINFO
    assert {'redact_url', 'gc_paused'} <= set(util.__all__)
    assert 'redact_url' in redact.__all__ and 'gc_paused' in iteration.__all__


@pytest.mark.parametrize(('url', 'shown'), [
    ('s3://u:p@b/k?X-Amz-Signature=s', 's3://***@b/k?X-Amz-Signature=***'),
    ('https://h/p?sv=1&sig=abc&token=t', 'https://h/p?sv=1&sig=***&token=***'),
    ('gs://bucket/key', 'gs://bucket/key'),
])
def test_redact_url(url, shown):
    assert redact.redact_url(url) == shown


def test_gc_paused_restores_the_previous_state():
    assert gc.isenabled()
    with iteration.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(KeyError), iteration.gc_paused():
            raise KeyError('inside')
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_dead_code_is_gone(mds_dir):
    # span_size (the reference's per-sample span table) is gone; `ends` lets the catalogue share its prefix sums.
    assert list(inspect.signature(Spanner).parameters) == ['shard_sizes', 'ends']
    spanner = Spanner([3, 0, 2])
    shared = Spanner([3, 0, 2], ends=np.cumsum([3, 0, 2]))
    assert [shared[i] for i in range(5)] == [spanner[i] for i in range(5)]
    assert (spanner[0], spanner[2], spanner[3], spanner[4]) == ((0, 0), (0, 2), (2, 0), (2, 1))
    with pytest.raises(IndexError):
        spanner[5]
    dataset = StreamingDataset(local=mds_dir(6), batch_size=2, shuffle=True)
    assert not hasattr(dataset, 'epoch_seed_change')  # the planner's property is the one planning reads
    order = dataset.order_config.resolved(1)
    planner = EpochPlanner([6], [1], [6], [1.0], 6, **order.planner_arguments())
    assert planner.epoch_seed_change is True
