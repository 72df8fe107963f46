"""``columns=`` on WebDataset streams: a sample keeps only the fields asked for (``__key__`` and ``__url__`` always),
the other members' bytes are never read, an unknown field fails at construction naming the directory and the fields
there are; with a sidecar index, ``.tar.gz`` shards, a ``decode_sample`` transform, and in a dataset mixing MDS,
WebDataset and litdata streams read by two DataLoader workers."""

from __future__ import annotations

import functools
import io
import os
import shutil
import tarfile
from typing import Any

import pytest
from wds_data import members_of, read_with_tarfile, write_tar, write_tars

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.errors import IndexFormatError, ShardCorruptError
from streaming_core.plugin_api import FormatOptionError
from streaming_core.reading.derived_index import build_index

KEPT = ('__key__', '__url__')


def _subset(sample: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    return {name: sample[name] for name in (*KEPT, *columns) if name in sample}


def test_projection_is_the_unprojected_sample_restricted(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=3, per_tar=10)
    full = list(StreamingDataset(local=data, batch_size=5))
    assert len(full) == 30
    for columns in (['cls'], ['txt', 'jpg'], ['json', 'cls', 'txt', 'jpg']):
        projected = StreamingDataset(local=data, batch_size=5, columns=columns)
        assert list(projected) == [_subset(s, columns) for s in full]
        assert list(projected[13]) == [*KEPT, *columns]          # __key__, __url__, then the order asked for
        assert projected[13] == _subset(full[13], columns)       # random access too
    # Naming __key__ / __url__ is allowed and changes nothing.
    same = StreamingDataset(local=data, batch_size=5, columns=['__key__', 'cls'])
    assert same[4] == {'__key__': '000004', '__url__': 'shard-00000.tar', 'cls': 4}


def test_unknown_field_fails_at_construction_naming_it_and_the_fields(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=5)
    with pytest.raises(IndexFormatError) as err:
        StreamingDataset(local=data, batch_size=5, columns=['cls', 'png'])
    assert isinstance(err.value, FormatOptionError)  # what every format raises for an unknown column
    message = str(err.value)
    assert "'png'" in message and data in message
    assert "['jpg', 'cls', 'json', 'txt']" in message


def test_fields_some_samples_lack_and_a_field_only_one_tar_has(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tar(os.path.join(data, 'a.tar'), [('k0.jpg', b'j0'), ('k0.cls', b'0'), ('k1.jpg', b'j1')])
    write_tar(os.path.join(data, 'b.tar'), [('k2.jpg', b'j2'), ('k2.seg.png', b's2')])
    projected = StreamingDataset(local=data, batch_size=1, columns=['seg.png', 'cls'])
    assert list(projected) == [{'__key__': 'k0', '__url__': 'a.tar', 'cls': 0},
                               {'__key__': 'k1', '__url__': 'a.tar'},
                               {'__key__': 'k2', '__url__': 'b.tar', 'seg.png': b's2'}]


class _Recording:
    """A view's memory map that records the byte ranges read from it."""

    def __init__(self, mapping: Any) -> None:
        self.mapping = mapping
        self.reads: list[tuple[int, int]] = []

    def __getitem__(self, key: slice) -> bytes:
        self.reads.append((key.start, key.stop))
        return self.mapping[key]


def _member_spans(path: str) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(key, field): (start, end)}`` of each member's data in the tar, as :mod:`tarfile` finds it."""
    spans = {}
    with tarfile.open(path) as tar:
        for info in tar:
            stem, _, field = info.name.partition('.')
            spans[(stem, field)] = (info.offset_data, info.offset_data + info.size)
    return spans


def test_only_the_kept_members_bytes_are_read(tmp_path: Any) -> None:
    from streaming_webdataset import WebDatasetFormat
    data = str(tmp_path / 'data')
    write_tars(data, tars=1, per_tar=8)
    entry = build_index(data, format_options={'columns': ['cls', 'json']})['shards'][0]
    assert entry['projection'] == ['cls', 'json'] and entry['columns'] == [['cls', 'int'], ['json', 'json']]
    path = os.path.join(data, 'shard-00000.tar')
    spans = _member_spans(path)
    with WebDatasetFormat().reader(entry).open([path]) as view:
        recording = _Recording(view._map)
        view._map = recording
        got = [view[i] for i in range(len(view))] + list(view.samples([5, 2]))
        view._map = recording.mapping
    assert [sample['json']['id'] for sample in got] == [*range(8), 5, 2]
    allowed = {spans[(f'{i:06d}', field)] for i in range(8) for field in ('cls', 'json')}
    assert recording.reads and set(recording.reads) <= allowed    # no jpg or txt byte was read


def test_a_field_left_out_is_not_decoded(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    members = members_of(0) + [('000001.jpg', b'img'), ('000001.cls', b'1'), ('000001.txt', b'\xff\xfe bad utf-8')]
    write_tar(os.path.join(data, 'one.tar'), members)
    with pytest.raises(ShardCorruptError, match="'txt' field is not valid UTF-8"):
        StreamingDataset(local=data, batch_size=1)[1]
    projected = StreamingDataset(local=data, batch_size=1, columns=['jpg', 'cls'])
    assert projected[1] == {'__key__': '000001', '__url__': 'one.tar', 'jpg': b'img', 'cls': 1}


def test_with_a_decode_sample_transform(tmp_path: Any) -> None:
    import numpy as np

    from streaming_webdataset import decode_sample
    data = str(tmp_path / 'data')
    buffer = io.BytesIO()
    np.save(buffer, np.arange(6, dtype=np.int16))
    write_tar(os.path.join(data, 'one.tar'), [('a.npy', buffer.getvalue()), ('a.cls', b'3'), ('a.txt', b'x')])
    decoded = StreamingDataset(local=data, batch_size=1, columns=['npy', 'cls'],
                               transform=functools.partial(decode_sample, kinds=['npy']))
    sample = decoded[0]
    assert sorted(sample) == ['__key__', '__url__', 'cls', 'npy'] and sample['cls'] == 3
    assert sample['npy'].dtype == np.int16 and sample['npy'].tolist() == list(range(6))


def test_with_a_sidecar_and_gzipped_tars(tmp_path: Any) -> None:
    from streaming_core.cli import main
    plain = str(tmp_path / 'plain')
    write_tars(plain, tars=2, per_tar=6)
    expected = [_subset(s, ['cls', 'txt']) for s in read_with_tarfile(plain)]
    assert main(['index', plain]) == 0                       # a sidecar recording each tar's fields
    projected = StreamingDataset(local=plain, batch_size=2, columns=['cls', 'txt'])
    assert list(projected) == expected
    with pytest.raises(IndexFormatError, match="'png'"):     # checked against the sidecar's fields too
        StreamingDataset(local=plain, batch_size=2, columns=['png'])
    # A wids index with counts only: the tars are walked to learn their fields.
    with open(os.path.join(plain, 'webdataset-index.json'), 'w') as handle:
        handle.write('{"__kind__": "wids-shard-index-v1", "shardlist": [{"url": "shard-00000.tar", "nsamples": 6},'
                     ' {"url": "shard-00001.tar", "nsamples": 6}]}')
    assert list(StreamingDataset(local=plain, batch_size=2, columns=['txt', 'cls'])) == [
        _subset(s, ['txt', 'cls']) for s in read_with_tarfile(plain)]
    zipped = str(tmp_path / 'gz')
    os.makedirs(zipped)
    for name in ('shard-00000', 'shard-00001'):
        with tarfile.open(os.path.join(zipped, f'{name}.tar.gz'), 'w:gz') as out, \
                tarfile.open(os.path.join(plain, f'{name}.tar')) as src:
            for info in src:
                out.addfile(info, src.extractfile(info))
    gz = StreamingDataset(remote=zipped, local=str(tmp_path / 'gz-cache'), batch_size=2, columns=['cls', 'txt'])
    assert list(gz) == [dict(s, __url__=s['__url__'] + '.gz') for s in expected]


@pytest.mark.slow
def test_mixed_mds_webdataset_litdata_with_two_workers(tmp_path: Any) -> None:
    """``StreamingDataset(columns=[...])`` applies to every stream: MDS, WebDataset tars and a litdata directory."""
    import streaming_litdata
    from streaming_mds import MDSWriter
    mds = str(tmp_path / 'mds')
    with MDSWriter(out=mds, columns={'jpg': 'bytes', 'cls': 'int', 'note': 'str'}, size_limit=1 << 10) as writer:
        for i in range(20):
            writer.write({'jpg': bytes([i]) * 50, 'cls': 1000 + i, 'note': f'note {i}'})
    tars = str(tmp_path / 'tars')
    write_tars(tars, tars=2, per_tar=10)
    golden = os.path.join(os.path.dirname(streaming_litdata.__file__), os.pardir, 'tests', 'golden', 'arrow-zstd')
    lit = str(tmp_path / 'lit')
    shutil.copytree(golden, lit)                            # keys jpg, cls, id, name, empty
    streams = [Stream(remote=mds, local=str(tmp_path / 'c-mds')), Stream(remote=tars, local=str(tmp_path / 'c-wds')),
               Stream(remote=lit, local=str(tmp_path / 'c-lit'))]
    full = StreamingDataset(streams=streams, batch_size=4)
    expected = sorted((sorted(_subset(full[i], ['cls', 'jpg']).items()) for i in range(len(full))), key=repr)
    streams = [Stream(remote=mds, local=str(tmp_path / 'c-mds')), Stream(remote=tars, local=str(tmp_path / 'c-wds')),
               Stream(remote=lit, local=str(tmp_path / 'c-lit'))]
    dataset = StreamingDataset(streams=streams, batch_size=4, columns=['cls', 'jpg'], shuffle=True)
    assert len(dataset) == 20 + 20 + 40
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert len(seen) == 80
    for sample in seen:
        assert [key for key in sample if key not in KEPT] == ['cls', 'jpg']
        assert set(sample) - {'cls', 'jpg'} in (set(), set(KEPT))   # only WebDataset samples carry key and url
    assert sorted((sorted(s.items()) for s in seen), key=repr) == expected   # each sample once, restricted
    assert sum('__key__' in s for s in seen) == 20
