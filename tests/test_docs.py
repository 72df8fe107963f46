"""The documentation site builds with warnings as errors, and its generated references are complete."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from streaming_core import hookspecs
from streaming_core.machinery.lookup import KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('site')
    result = subprocess.run([sys.executable, '-m', 'mkdocs', 'build', '--strict', '--site-dir', str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_docs_build_strict(site):
    assert (site / 'index.html').exists()


def test_hook_reference_documents_every_hook(site):
    page = (site / 'plugins' / 'hooks' / 'index.html').read_text()
    for hook in KINDS.values():
        assert hook in page, f'{hook} missing from the hook reference'
        doc = getattr(hookspecs, hook).__doc__.strip().splitlines()[0]
        assert doc.split(':')[0][:30] in page


def test_cli_reference_matches_the_parser(site):
    from streaming_core.cli import COMMANDS
    page = (site / 'reference' / 'cli' / 'index.html').read_text()
    for command in COMMANDS:
        assert f'streaming {command}' in page


def test_every_hook_is_exercised_by_a_test():
    sources = []
    for base in ('tests', 'plugins'):
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, base)):
            sources += [os.path.join(dirpath, f) for f in filenames if f.startswith('test_') and f.endswith('.py')]
    text = '\n'.join(open(path).read() for path in sources)
    for hook in KINDS.values():
        assert re.search(rf'\b{hook}\b\s*=', text), f'no test implements {hook}'


def test_api_reference_is_rendered_from_the_docstrings(site):
    page = (site / 'reference' / 'api' / 'index.html').read_text()
    for name in ('StreamingDataset', 'Stream', 'StreamingDataLoader', 'LocalDataset', 'World', 'merge_index',
                 'ShardCatalogue'):
        assert name in page, f'{name} missing from the API reference'
    assert 'Make the next iteration start' in page and 'Every shard of' in page  # docstrings, not only names
    # The plugin-author reference: the hook specifications and the Protocols, from their docstrings.
    for name in ('register_codecs', 'ShardReader', 'StorageBackend', 'plugin_api'):
        assert name in page, f'{name} missing from the API reference'
    assert 'Register MDS column encodings' in page and 'One shard entry of an index' in page


def test_readme_shows_the_two_commands():
    readme = open(os.path.join(ROOT, 'README.md')).read()
    head = readme[:400]
    assert 'make demo' in head and 'make test' in head
