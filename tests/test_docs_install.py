"""The install lines of the docs are enough: a newcomer who installs exactly what a page's ``pip install -e .`` line
names can run that page's first example.

Each case finds the page's first ``pip install -e . ...`` command (in a code block, or inline in backquotes), takes
the plugin distributions it names, and runs a script in a fresh process with every other plugin of the repository
blocked (``STREAMING_CORE_BLOCK_PLUGINS``: its names and hooks never load, though its package stays importable):
the page's first Python block, or for the pages whose example needs cloud storage (the README, the quick start) the
same steps on a local directory. A page
that forgets a plugin its example needs (the default shuffle, ``streaming-py1e``, was missing from three) fails here
with the error the newcomer would have seen.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest
import tomllib

from tests.test_docs_examples import ROOT, python_blocks

#: Writes an MDS dataset (zstd, as the README's example) to a local directory and streams it back, shuffled,
#: through the loader.
_MDS_STEPS = textwrap.dedent('''
    import tempfile

    from streaming_core import StreamingDataLoader, StreamingDataset
    from streaming_mds import MDSWriter

    out = tempfile.mkdtemp()
    with MDSWriter(out=out, columns={'id': 'int', 'text': 'str'}, compression='zstd', size_limit=2048) as writer:
        for i in range(300):
            writer.write({'id': i, 'text': f'sample {i}'})
    dataset = StreamingDataset(local=out, batch_size=8, shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=8, collate_fn=lambda batch: batch)
    assert sorted(sample['id'] for batch in loader for sample in batch) == list(range(300))
''')

#: ``page -> script`` (``None``: the page's first Python block).
CASES = {
    'README.md': _MDS_STEPS,
    'docs/quickstart.md': _MDS_STEPS,
    'docs/guide/parquet.md': None,
    'docs/guide/webdataset.md': None,
}

_COMMAND = re.compile(r'pip install -e \.')


def install_line(page: str) -> str:
    """The page's first ``pip install -e . ...`` command: up to the closing backquote when it is inline, else to
    a comment or the end of its (backslash-continued) line."""
    with open(os.path.join(ROOT, page)) as handle:
        text = handle.read()
    found = _COMMAND.search(text)
    assert found, f'{page} has no `pip install -e . ...` line'
    start = found.start()
    inline = text[start - 1] == '`'
    end = start
    while end < len(text):
        char = text[end]
        if char == '`' or (not inline and char == '#'):
            break
        if char == '\n' and not inline and not text[:end].rstrip(' ').endswith('\\'):
            break
        end += 1
    return text[start:end]


def plugins_named(line: str) -> set[str]:
    """The plugin distributions an install command names (``plugins/streaming-x[extra]`` gives ``streaming-x``)."""
    return set(re.findall(r'plugins/(streaming-[a-z0-9-]+)', line))


def entry_points() -> dict[str, list[str]]:
    """``distribution -> its plugin names`` for every plugin distribution of the repository."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', '*', 'pyproject.toml'))):
        with open(path, 'rb') as handle:
            project = tomllib.load(handle)['project']
        found[project['name']] = sorted(project.get('entry-points', {}).get('streaming_core', {}))
    return found


def test_the_install_line_is_found_whole():
    assert plugins_named(install_line('README.md')) == {'streaming-mds', 'streaming-compression', 'streaming-py1e'}
    assert 'plugins/streaming-s3' not in install_line('docs/quickstart.md')  # the next line, for S3, is optional


@pytest.mark.parametrize('page', sorted(CASES))
def test_a_page_s_install_line_runs_its_example(page, tmp_path):
    named = plugins_named(install_line(page))
    every = entry_points()
    assert named <= set(every), f'{page} installs plugins that do not exist: {sorted(named - set(every))}'
    blocked = sorted(name for dist, names in every.items() if dist not in named for name in names)
    script = CASES[page] if CASES[page] is not None else python_blocks(page)[0]
    path = tmp_path / 'example.py'
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=ROOT, STREAMING_CORE_BLOCK_PLUGINS=','.join(blocked),
               STREAMING_CORE_CACHE_DIR=str(tmp_path / 'cache'))
    done = subprocess.run([sys.executable, str(path)], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, (f'{page}: with only {sorted(named)} installed, its example fails:\n'
                                  f'{done.stderr[-3000:]}')
