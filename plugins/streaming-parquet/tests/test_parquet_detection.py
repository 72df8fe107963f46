"""Format detection of a directory without ``index.json``, remembered between processes: a warm start loads only
the index builder that claimed the files, and a change of the installed builders (a new one claiming the same files,
a blocked one) is noticed, never answered from the record. Every step is a fresh process, as a user's runs are."""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

from parquet_data import write_parquet

from streaming_core.reading.derived_index import DERIVED_LISTING_NAME
from tests.fixtures.child_report import child_report

_READ = '''
import json, sys
from streaming_core import StreamingDataset
try:
    ds = StreamingDataset(local=LOCAL, batch_size=4, shuffle=True, shuffle_seed=3)
    ids = [int(sample['id']) for sample in ds]
    error = None
except Exception as err:
    ids, error = None, f'{type(err).__name__}: {err}'
print(json.dumps({'ids': ids, 'error': error,
                  'modules': sorted(m for m in sys.modules if m.startswith('streaming_') and m.count('.') == 0)}))
'''

_FAKE = '''
from streaming_core.plugin_api import hookimpl


class ClaimsParquet:
    name = 'fakepq'
    patterns = ('*.parquet',)

    def build(self, files, read, *, where):
        raise AssertionError('never asked to build: the detection is ambiguous')


@hookimpl
def register_index_builders(registry):
    registry.add('fakepq', ClaimsParquet())
'''


def _fake_builder_distribution(root: str) -> str:
    """A site directory holding an installed distribution whose plugin declares an index builder claiming
    ``*.parquet`` (as ``pip install`` would leave it)."""
    site = os.path.join(root, 'site-fakepq')
    info = os.path.join(site, 'fakepq-0.1.dist-info')
    os.makedirs(info)
    with open(os.path.join(info, 'METADATA'), 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: fakepq\nVersion: 0.1\n')
    with open(os.path.join(info, 'entry_points.txt'), 'w') as handle:
        handle.write('[streaming_core]\nfakepq = fakepq_plugin\n\n'
                     '[streaming_core.names]\nindex_builder.fakepq = fakepq_plugin\n')
    with open(os.path.join(site, 'fakepq_plugin.py'), 'w') as handle:
        handle.write(textwrap.dedent(_FAKE))
    return site


def _run(local: str, cache: str, *paths: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return child_report(f'LOCAL = {local!r}\n' + _READ, cache, *paths, env=env)


def test_a_warm_start_loads_only_the_builder_that_claimed_the_files(tmp_path: Any) -> None:
    local = str(tmp_path / 'data')
    ids = write_parquet(local, files=3, rows=40, row_group=16)
    cache = str(tmp_path / 'cache')
    cold = _run(local, cache)
    assert cold['error'] is None and sorted(cold['ids']) == sorted(ids)
    warm = _run(local, cache)
    assert warm['error'] is None and warm['ids'] == cold['ids']
    assert 'streaming_parquet' in warm['modules']
    assert 'streaming_litdata' not in warm['modules'] and 'streaming_webdataset' not in warm['modules'], warm
    # A full discovery in between (`streaming plugins`, a misspelt name) rewrites the plugin manifest: same answer.
    child_report('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n'
                 'print("{}")\n', cache)
    after = _run(local, cache)
    assert after['ids'] == cold['ids'] and 'streaming_litdata' not in after['modules'], after


def test_a_new_builder_claiming_the_same_files_is_noticed(tmp_path: Any) -> None:
    local = str(tmp_path / 'data')
    write_parquet(local, files=2, rows=20, row_group=10)
    cache = str(tmp_path / 'cache')
    first = _run(local, cache)
    assert first['error'] is None
    site = _fake_builder_distribution(str(tmp_path))
    ambiguous = _run(local, cache, site)
    assert ambiguous['ids'] is None and 'DerivedIndexError' in ambiguous['error'], ambiguous
    message = ambiguous['error']
    assert 'several formats' in message and "'fakepq'" in message and "'parquet'" in message
    chosen = child_report(f'LOCAL = {local!r}\n' + _READ.replace('shuffle_seed=3', "shuffle_seed=3, format='parquet'"),
                          cache, site)
    assert chosen['error'] is None and chosen['ids'] == first['ids']
    again = _run(local, cache)  # the distribution gone again: the first environment's detection holds
    assert again['error'] is None and again['ids'] == first['ids']


def test_a_blocked_builder_is_not_answered_from_the_record(tmp_path: Any) -> None:
    local = str(tmp_path / 'data')
    write_parquet(local, files=2, rows=20, row_group=10)
    cache = str(tmp_path / 'cache')
    assert _run(local, cache)['error'] is None
    blocked = _run(local, cache, env={'STREAMING_CORE_BLOCK_PLUGINS': 'parquet'})
    assert blocked['ids'] is None and 'none of its 2 file(s)' in blocked['error'], blocked
    records = []
    for directory, _, names in os.walk(os.path.join(cache, 'state')):
        if DERIVED_LISTING_NAME in names:
            with open(os.path.join(directory, DERIVED_LISTING_NAME)) as handle:
                records.append(json.load(handle))
    assert len(records) == 1 and records[0]['detected']['builder'] == 'parquet'  # recorded, not trusted blindly


def test_a_builder_edited_in_place_is_noticed_once_reinstalled(tmp_path: Any) -> None:
    """What the guide says of editable installs: the record is keyed by the installed metadata, not the source. A
    builder edited in place to claim ``*.parquet`` too is not seen until its distribution is reinstalled (which
    writes its metadata again); then the directory is ambiguous."""
    local = str(tmp_path / 'data')
    write_parquet(local, files=2, rows=20, row_group=10)
    cache = str(tmp_path / 'cache')
    site = _fake_builder_distribution(str(tmp_path))
    module = os.path.join(site, 'fakepq_plugin.py')
    with open(module) as handle:
        source = handle.read()
    with open(module, 'w') as handle:
        handle.write(source.replace("patterns = ('*.parquet',)", "patterns = ('*.nothing',)"))
    first = _run(local, cache, site)
    assert first['error'] is None
    with open(module, 'w') as handle:  # edited in place, as in an editable install
        handle.write(source)
    assert _run(local, cache, site)['ids'] == first['ids']
    entry_points = os.path.join(site, 'fakepq-0.1.dist-info', 'entry_points.txt')
    os.utime(entry_points, ns=(os.stat(entry_points).st_atime_ns, os.stat(entry_points).st_mtime_ns + 10 ** 9))
    reinstalled = _run(local, cache, site)
    assert reinstalled['ids'] is None and 'several formats' in reinstalled['error'], reinstalled
