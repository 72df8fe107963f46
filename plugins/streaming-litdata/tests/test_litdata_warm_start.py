"""A warm start of a litdata directory read in place: its ``index.json`` unchanged since the index was derived (same
stat, same installed builders, same options), the next process reads the derived index's binary form without
parsing litdata's index or importing the other index builders; a changed ``index.json`` is derived again. Every
step is a fresh process, as a user's runs are."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from tests.fixtures.child_report import child_report

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')

_READ = '''
import json, sys
from streaming_core import StreamingDataset
ds = StreamingDataset(local=LOCAL, batch_size=2)
print(json.dumps({'items': [[int(ds[i]['id']), ds[i]['name']] for i in range(len(ds))],
                  'identity': ds.streams[0].index_identity,
                  'modules': sorted(m for m in sys.modules if m.startswith('streaming_') and m.count('.') == 0)}))
'''


def _run(local: str, cache: str) -> dict[str, Any]:
    return child_report(f'LOCAL = {local!r}\n' + _READ, cache)


def test_an_unchanged_litdata_index_is_not_derived_again(tmp_path: Any) -> None:
    local = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), local)
    cache = str(tmp_path / 'cache')
    cold = _run(local, cache)
    assert 'streaming_parquet' in cold['modules']  # the first process asks every index builder
    warm = _run(local, cache)
    assert warm['items'] == cold['items'] and warm['identity'] == cold['identity']
    assert 'streaming_litdata' in warm['modules'], warm['modules']
    assert 'streaming_parquet' not in warm['modules'] and 'streaming_webdataset' not in warm['modules'], warm
    index = os.path.join(local, 'index.json')
    with open(index) as handle:
        obj = json.load(handle)
    obj['chunks'] = obj['chunks'][:1]  # the same dataset, one chunk: another index version
    with open(index, 'w') as handle:
        json.dump(obj, handle)
    changed = _run(local, cache)
    assert changed['identity'] != cold['identity'] and 0 < len(changed['items']) < len(cold['items'])
    assert changed['items'] == cold['items'][:len(changed['items'])]
    again = _run(local, cache)
    assert again['items'] == changed['items'] and 'streaming_parquet' not in again['modules']


def test_an_index_copied_in_place_with_its_old_mtime_is_derived_again(tmp_path: Any) -> None:
    """``cp -p`` / ``rsync -a --inplace`` over litdata's ``index.json``: the same size and modification time, other
    chunks (here the same chunks in the other order); its change time tells."""
    import time
    local = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), local)
    cache = str(tmp_path / 'cache')
    index = os.path.join(local, 'index.json')
    with open(index) as handle:
        obj = json.load(handle)
    assert len(obj['chunks']) >= 2
    with open(index, 'w') as handle:
        json.dump(obj, handle)
    cold = _run(local, cache)
    before = os.stat(index)
    time.sleep(0.05)  # past the file system's timestamp granularity
    with open(index, 'r+') as handle:
        handle.write(json.dumps(dict(obj, chunks=obj['chunks'][::-1])))
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(index).st_size, os.stat(index).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    swapped = _run(local, cache)
    assert swapped['identity'] != cold['identity']
    assert sorted(swapped['items']) == sorted(cold['items']) and swapped['items'] != cold['items']


_COLUMNS = '''
import json
from streaming_core import StreamingDataset
try:
    ds = StreamingDataset(local=LOCAL, batch_size=2, columns=COLUMNS)
    print(json.dumps({'keys': sorted(ds[0]), 'error': None}))
except Exception as err:
    print(json.dumps({'keys': None, 'error': type(err).__name__}))
'''


def _columns(local: str, cache: str, columns: list[str]) -> dict[str, Any]:
    return child_report(f'LOCAL = {local!r}\nCOLUMNS = {columns!r}\n' + _COLUMNS, cache)


def test_options_that_print_alike_are_not_taken_for_each_other(tmp_path: Any) -> None:
    """``columns=['id,name']`` (one key that does not exist) is not ``['id', 'name']``, in any order of runs."""
    local = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), local)
    cache = str(tmp_path / 'cache')
    assert _columns(local, cache, ['id,name'])['error'] == 'UnknownColumnError'
    assert _columns(local, cache, ['id', 'name'])['keys'] == ['id', 'name']
    assert _columns(local, cache, ['id', 'name'])['keys'] == ['id', 'name']
    assert _columns(local, cache, ['id,name'])['error'] == 'UnknownColumnError'


def test_a_derived_index_replaced_under_its_record_is_not_trusted(tmp_path: Any) -> None:
    """The record and the derived index it describes are two files: when the derived index is another version's
    (another process's projection, or a crash between the two writes) and the binary index must be rebuilt, the
    warm start does not build it from the wrong file."""
    from streaming_core.reading.derived_index import DERIVED_LISTING_NAME
    local = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), local)
    cache = str(tmp_path / 'cache')
    assert _columns(local, cache, ['id'])['keys'] == ['id']
    assert _columns(local, cache, ['id'])['keys'] == ['id']
    sdir = child_report('import json\nfrom streaming_core.common.paths import state_dir\n'
                        f'print(json.dumps({{"sdir": state_dir({local!r})}}))\n', cache)['sdir']
    assert os.path.isdir(sdir)
    with open(os.path.join(sdir, DERIVED_LISTING_NAME)) as handle:
        record = handle.read()
    assert _columns(local, cache, ['name'])['keys'] == ['name']  # replaces the derived index and its record
    with open(os.path.join(sdir, DERIVED_LISTING_NAME), 'w') as handle:
        handle.write(record)  # the first record back, beside the other version's derived index
    for name in os.listdir(sdir):
        if name.endswith('.bin'):
            with open(os.path.join(sdir, name), 'r+b') as handle:
                handle.truncate(16)  # and its binary index is damaged: it must be built again
    assert _columns(local, cache, ['id'])['keys'] == ['id']
