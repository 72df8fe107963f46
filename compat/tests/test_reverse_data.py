"""Reverse data compatibility: datasets written by our writers read correctly in mosaicml-streaming 0.13.

Our writers (``streaming_mds.MDSWriter``, ``streaming_jsonl.JSONWriter``, ``streaming_csv.CSVWriter`` /
``TSVWriter`` / ``XSVWriter``, and ``streaming_core.writing.merge.merge_index`` for the merged dataset) write every
golden dataset again from the manifest's inputs and keyword arguments: every format, every MDS encoding, every
compression family and several levels, several hashes, multi-shard and empty-first-shard layouts, and a merged
index over four partitions. The reference then reads each one (in ``.venv-ref``) three ways: its
``StreamingDataset`` by random access and by iteration, and its shard readers directly; hashed datasets are also
read as a remote with ``validate_hash``. Every sample must equal what the reference decoded from its own golden
copy (``tests/fixtures/golden/manifest.json``).
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

import pytest

from compat import tagged

pytestmark = pytest.mark.compat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, 'tests', 'fixtures', 'golden', 'manifest.json')) as _handle:
    MANIFEST = json.load(_handle)
DATASETS = {d['name']: d for d in MANIFEST['datasets']}
WRITER_MODULES = {'MDSWriter': 'streaming_mds', 'JSONWriter': 'streaming_jsonl', 'CSVWriter': 'streaming_csv',
                  'TSVWriter': 'streaming_csv', 'XSVWriter': 'streaming_csv'}


def _hash_reads() -> dict[str, tuple[str, str]]:
    """``{read name: (dataset, hash)}``: each hashed dataset also read as a remote with ``validate_hash``."""
    out = {}
    for name, entry in DATASETS.items():
        hashes = entry.get('kwargs', {}).get('hashes') or []
        for algo in sorted({hashes[0], hashes[-1]} if hashes else set()):
            out[f'{name}+validate_hash={algo}'] = (name, algo)
    return out


HASH_READS = _hash_reads()
READS = sorted(DATASETS) + sorted(HASH_READS)


def _write(writer: str, kwargs: dict[str, Any], inputs: list[Any], out: str) -> None:
    cls = getattr(importlib.import_module(WRITER_MODULES[writer]), writer)
    with cls(out=out, **kwargs) as handle:
        for sample in tagged.decode(inputs):
            handle.write(sample)


def _write_dataset(entry: dict[str, Any], out: str) -> None:
    if entry['writer'] == 'merge_index':
        os.makedirs(out)
        for part in entry['partitions']:
            _write(part['writer'], part['kwargs'], part['inputs'], os.path.join(out, part['dir']))
        from streaming_core.writing.merge import merge_index
        merge_index(out, keep_local=True)
    else:
        _write(entry['writer'], entry['kwargs'], entry['inputs'], out)


@pytest.fixture(scope='module')
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``{name: path or exception}``: every golden dataset written again by our writers."""
    root = tmp_path_factory.mktemp('ours-written')
    out: dict[str, Any] = {}
    for name, entry in DATASETS.items():
        path = str(root / name)
        try:
            _write_dataset(entry, path)
            out[name] = path
        except Exception as err:  # re-raised by that dataset's test
            out[name] = err
    return out


@pytest.fixture(scope='module')
def ref_reads(run_ref: Any, written: dict[str, Any]) -> dict[str, Any]:
    """The reference's reading of each dataset we wrote (one subprocess for all)."""
    request = {name: path for name, path in written.items() if isinstance(path, str)}
    for read, (name, algo) in HASH_READS.items():
        if isinstance(written[name], str):
            request[read] = {'path': written[name], 'validate_hash': algo}
    return run_ref('read_datasets.py', {'datasets': request}) if request else {}


@pytest.mark.parametrize('read', READS)
def test_reference_reads_our_dataset(read: str, written: dict[str, Any], ref_reads: dict[str, Any]) -> None:
    """The reference decodes our dataset to the samples it decoded from its own golden copy."""
    name = HASH_READS[read][0] if read in HASH_READS else read
    if isinstance(written[name], Exception):
        raise written[name]
    result = ref_reads[read]
    assert 'error' not in result, f'the reference cannot read our {read}: {result["error"]}\n' \
                                  f'{result.get("traceback", "")}'
    expected = DATASETS[name]['expected']
    for view in ('getitem', 'iter', 'readers'):
        got = result[view]
        assert len(got) == len(expected), f'{read} ({view}): {len(got)} samples, expected {len(expected)}'
        for i, (mine, want) in enumerate(zip(got, expected, strict=True)):
            if tagged.canonical(mine) != tagged.canonical(want):
                raise AssertionError(f'{read} ({view}): sample {i} differs at {tagged.first_difference(mine, want)}')
