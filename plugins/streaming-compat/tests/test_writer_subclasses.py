"""Writer subclasses written for mosaicml-streaming 0.13: their overrides run (a faster path of ours used to skip
``encode_sample``, so a subclass that transforms samples wrote them untransformed, silently)."""

from __future__ import annotations

import json
import os
from typing import Any

import streaming
from streaming import JSONWriter, LocalDataset, MDSWriter


class Upper(MDSWriter):
    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        return super().encode_sample({**sample, 'x': sample['x'].upper()})


class UpperJSON(JSONWriter):
    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        return super().encode_sample({**sample, 'x': sample['x'].upper()})


class Trailer(MDSWriter):
    """Counts the shards it writes through the reference's hook."""

    flushed = 0

    def encode_joint_shard(self) -> bytes:
        type(self).flushed += len(self.new_samples)
        return super().encode_joint_shard()


class SplitCount(JSONWriter):
    seen: list[int] = []

    def encode_split_shard(self) -> tuple[bytes, bytes]:
        type(self).seen.append(len(self.new_samples))
        return super().encode_split_shard()


def _read(path: str) -> list[dict[str, Any]]:
    dataset = LocalDataset(path)
    return [dataset[i] for i in range(len(dataset))]


def test_an_encode_sample_override_runs(tmp_path: Any) -> None:
    for cls in (Upper, UpperJSON):
        out = str(tmp_path / cls.__name__)
        columns = {'x': 'str', 'i': 'int'}
        with cls(out=out, columns=columns) as writer:
            for i in range(5):
                writer.write({'x': f'hello {i}', 'i': i})
        assert [(s['x'], s['i']) for s in _read(out)] == [(f'HELLO {i}', i) for i in range(5)]


def test_the_reference_s_shard_hooks_and_reset_idiom(tmp_path: Any) -> None:
    out = str(tmp_path / 'joint')
    Trailer.flushed = 0
    with Trailer(out=out, columns={'i': 'int'}) as writer:
        for i in range(7):
            writer.write({'i': i})
            if i == 2:  # the reference's manual flush: flush_shard() then _reset_cache()
                writer.flush_shard()
                writer._reset_cache()
                assert writer.new_samples == [] and writer.new_shard_size == writer.extra_bytes_per_shard
    assert Trailer.flushed == 7
    assert [s['i'] for s in _read(out)] == list(range(7))
    assert len(json.load(open(os.path.join(out, 'index.json')))['shards']) == 2

    out = str(tmp_path / 'split')
    SplitCount.seen = []
    with SplitCount(out=out, columns={'i': 'int'}, size_limit=60) as writer:
        for i in range(10):
            writer.write({'i': i})
    assert sum(SplitCount.seen) == 10 and len(SplitCount.seen) > 1
    assert [s['i'] for s in _read(out)] == list(range(10))
    assert streaming.MDSWriter is MDSWriter


def test_the_reference_s_writer_base_module_imports() -> None:
    from streaming.base.format.base.writer import JointWriter, SplitWriter, Writer
    assert issubclass(MDSWriter, JointWriter) and issubclass(JSONWriter, SplitWriter) and JointWriter is Writer
