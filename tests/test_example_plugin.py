"""A real third-party plugin: the example distribution is pip-installed, discovered, listed and used by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streaming_core.machinery import discovery as plugins
from streaming_core.machinery.lookup import get_registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, 'examples', 'streaming-example-plugin')
FIRST_PARTY = [f'streaming-{name}' for name in ('azure', 'compression', 'csv', 'gcs', 'jsonl', 'mds', 'oci', 'py1e',
                                                's3', 'stratified')]


@pytest.fixture(scope='module')
def installed_example():
    result = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-build-isolation',
                             '--disable-pip-version-check', EXAMPLE], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    import importlib
    importlib.invalidate_caches()
    plugins.reset()
    yield
    # Leave the environment as we found it: other tests assert the exact first-party name sets.
    subprocess.run([sys.executable, '-m', 'pip', 'uninstall', '--quiet', '--yes', 'streaming-example-plugin'],
                   capture_output=True, text=True, timeout=600, check=True)
    importlib.invalidate_caches()
    plugins.reset()


def _streaming(*args):
    script = os.path.join(os.path.dirname(sys.executable), 'streaming')
    result = subprocess.run([script, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_example_plugin_is_discovered_and_listed(installed_example):
    assert get_registry('codec').origin('rot13') == 'example'
    assert get_registry('compressor').origin('xzl') == 'example'
    records = {r['distribution']: r for r in json.loads(_streaming('plugins', '--json'))}
    assert records['streaming-example-plugin']['registered'] == {'codec': ['rot13'], 'compressor': ['xzl']}
    assert set(FIRST_PARTY) <= set(records)
    assert records['streaming-core']['registered']['shuffle'] == ['naive']
    table = _streaming('plugins')
    assert 'streaming-example-plugin 0.1.0' in table and 'rot13' in table
    for dist in FIRST_PARTY:
        assert f'{dist} ' in table


def test_example_plugin_used_by_name(installed_example, tmp_path):
    from streaming_core import StreamingDataset
    from streaming_mds import MDSWriter
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'text': 'rot13', 'n': 'int'}, compression='xzl:9', size_limit=200) as writer:
        for i in range(50):
            writer.write({'text': f'hello {i}', 'n': i})
    names = os.listdir(out)
    assert any(name.endswith('.mds.xzl') for name in names)
    with open(os.path.join(out, 'index.json')) as handle:
        index = json.load(handle)
    assert index['shards'][0]['column_encodings'] == ['int', 'rot13'] and index['shards'][0]['compression'] == 'xzl:9'
    dataset = StreamingDataset(remote=out, local=str(tmp_path / 'cache'), batch_size=1, shuffle=True)
    assert sorted((s['n'], s['text']) for s in dataset) == [(i, f'hello {i}') for i in range(50)]
