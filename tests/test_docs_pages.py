"""Every page's Python examples run: the ``python`` blocks of each page below, in order, in a fresh process.

A page's fragments use what a reader already has (``my_samples()``, ``train_step``, ``model``, a source dataset on
disk, data in their bucket). Each page gets a small *prelude*, defined here and not in the doc, that supplies
exactly that; ``s3://`` URLs reach a real moto S3 server on loopback (``S3_ENDPOINT_URL`` and test credentials in
the environment, every bucket the pages name created empty before each page). Placeholders a reader fills in by
hand (``<ACCOUNT_ID>`` endpoints) are replaced by the loopback values listed in :data:`FILL_IN`; each must still be
in its page, so a page that changes cannot silently stop being checked.

:func:`test_every_page_with_python_is_run` keeps it that way: a page of ``docs/`` (or the README) with a
``python`` block must be run here, in ``tests/test_docs_examples.py``'s RUNNABLE, or by a page test named in
:data:`PAGE_TESTS`; :func:`test_every_code_block_names_its_language` keeps Python out of bare fences.

The pages share the session's moto server with other test modules; only the buckets in :data:`BUCKETS` are
emptied before each page.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from tests.docs_preludes import FILL_IN, HELPERS, MODULES, PRELUDES, SECOND_SCRIPT, SERVERS
from tests.fixtures.servers import CLOUD_ENV_VARS, need_module
from tests.test_docs_examples import ROOT, RUNNABLE, python_blocks

#: Pages run by their own test (they need more than a prelude: trainers, Spark...), and that test's file.
PAGE_TESTS = {
    'docs/guide/lightning.md': 'tests/trainers/test_pages.py',
    'docs/guide/parquet.md': 'plugins/streaming-parquet/tests/test_parquet_docs.py',
    'docs/migrating.md': 'plugins/streaming-compat/tests/test_migrating_doc.py',
}

#: Every bucket the pages name, created (empty) before each page runs.
BUCKETS = ('bucket', 'my-bucket', 'other', 'aws-bucket', 'r2-bucket', 'my-r2-bucket', 'minio-bucket')


def _reset_s3(url: str) -> None:
    """Create :data:`BUCKETS` in moto, empty (what an earlier page wrote into them is deleted)."""
    import boto3
    client = boto3.client('s3', endpoint_url=url, aws_access_key_id='testing', aws_secret_access_key='testing',
                          region_name='us-east-1')
    existing = {bucket['Name'] for bucket in client.list_buckets()['Buckets']}
    for bucket in BUCKETS:
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
            continue
        for listing in client.get_paginator('list_objects_v2').paginate(Bucket=bucket):
            keys = [{'Key': item['Key']} for item in listing.get('Contents', [])]
            if keys:
                client.delete_objects(Bucket=bucket, Delete={'Objects': keys})


def page_scripts(page: str, work: str) -> list[str]:
    """The scripts run for ``page`` (one, or two for :data:`SECOND_SCRIPT`): the shared helpers, its prelude, then
    its blocks (placeholders filled in). The blocks :data:`MODULES` names are written as modules under ``work``."""
    blocks = python_blocks(page)
    for i, path in MODULES.get(page, {}).items():
        os.makedirs(os.path.dirname(os.path.join(work, path)), exist_ok=True)
        with open(os.path.join(work, path), 'w') as handle:
            handle.write(blocks[i])
    fill = FILL_IN.get(page, {})
    for placeholder in fill:
        assert any(placeholder in block for block in blocks), \
            f'{page} no longer has {placeholder!r}: update FILL_IN in tests/docs_preludes.py'
    cut = SECOND_SCRIPT.get(page, len(blocks))
    scripts = []
    for part in (range(cut), range(cut, len(blocks))):
        text = '\n\n'.join(blocks[i] for i in part if i not in MODULES.get(page, {}))
        for placeholder, value in fill.items():
            text = text.replace(placeholder, value)
        if text:
            scripts.append('\n\n'.join([HELPERS, PRELUDES[page], text]))
    return scripts


@pytest.mark.slow  # a process per page, a moto S3 server
@pytest.mark.parametrize('page', sorted(PRELUDES))
def test_page_runs(page, tmp_path, request):
    need_module('boto3')
    moto = request.getfixturevalue('moto_server')
    _reset_s3(moto.url)
    home = tmp_path / 'home'
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CLOUD_ENV_VARS}
    env.update(PYTHONPATH=ROOT, HOME=str(home), STREAMING_CORE_CACHE_DIR=str(tmp_path / 'cache'),
               S3_ENDPOINT_URL=moto.url, AWS_ACCESS_KEY_ID='testing', AWS_SECRET_ACCESS_KEY='testing',
               AWS_DEFAULT_REGION='us-east-1', MPLBACKEND='Agg')
    if 'http' in SERVERS.get(page, ()):
        server = request.getfixturevalue('http_server')
        os.makedirs(os.path.join(server.root, tmp_path.name))  # a directory of this page's own
        env.update(DOCS_HTTP_URL=f'{server.url}/{tmp_path.name}', DOCS_HTTP_ROOT=os.path.join(server.root,
                                                                                             tmp_path.name))
    if 'gcs' in SERVERS.get(page, ()):
        env.update(STORAGE_EMULATOR_HOST=request.getfixturevalue('gcs_emulator').url)
    if 'azurite' in SERVERS.get(page, ()):
        azurite = request.getfixturevalue('azurite')
        env.update(DOCS_AZURE_URL=azurite.blob_endpoint, DOCS_AZURE_KEY=azurite.key)
    work = tmp_path / 'work'
    work.mkdir()
    for i, text in enumerate(page_scripts(page, str(work))):
        script = tmp_path / f'page-{i}.py'
        script.write_text(text)
        result = subprocess.run([sys.executable, str(script)], cwd=str(work), capture_output=True, text=True,
                                timeout=300, env=env)
        assert result.returncode == 0, f'{page} ({script.name}):\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}'


def _pages() -> list[str]:
    """README.md and every Markdown page under docs/."""
    return ['README.md'] + sorted(os.path.relpath(path, ROOT)
                                  for path in glob.glob(os.path.join(ROOT, 'docs', '**', '*.md'), recursive=True))


def _pages_with_python() -> list[str]:
    return [page for page in _pages() if python_blocks(page)]


def test_every_page_with_python_is_run():
    assert not set(PRELUDES) & set(RUNNABLE), 'a page is run twice: keep it in RUNNABLE or in PRELUDES, not both'
    covered = set(RUNNABLE) | set(PRELUDES) | set(PAGE_TESTS)
    missing = [page for page in _pages_with_python() if page not in covered]
    assert not missing, (f'{missing} have python blocks that no test runs: add each to PRELUDES in '
                         'tests/docs_preludes.py (or to RUNNABLE in tests/test_docs_examples.py)')
    for page, test in PAGE_TESTS.items():
        with open(os.path.join(ROOT, test)) as handle:
            assert page in handle.read(), f'{test} does not run {page}'


def test_every_code_block_names_its_language():
    """A bare fence could hide Python from the runs above: shell is ``bash``, output and layouts ``text``."""
    bare = []
    for page in _pages():
        with open(os.path.join(ROOT, page)) as handle:
            inside = False
            for number, line in enumerate(handle, 1):
                if line.startswith('```'):
                    if not inside and line.strip() == '```':
                        bare.append(f'{page}:{number}')
                    inside = not inside
    assert not bare, f'code blocks without a language (use python, bash, text, toml...): {bare}'


def test_readme_counts_match_the_registries():
    """The README's layout table counts the builtin hashes and the MDS encodings: keep the numbers true."""
    from streaming_core.machinery.lookup import get_registry
    with open(os.path.join(ROOT, 'README.md')) as handle:
        readme = handle.read()
    hashes = int(re.search(r'(\d+) hashes', readme).group(1))
    encodings = int(re.search(r'its (\d+) column encodings', readme).group(1))
    assert hashes == len(get_registry('hash').names())
    assert encodings == len(get_registry('codec').names())


def test_readme_lists_every_plugin_distribution():
    """The README's layout table names every plugin distribution of the repository."""
    with open(os.path.join(ROOT, 'README.md')) as handle:
        table = ' '.join(line for line in handle if line.startswith('| `streaming-'))
    listed = set(re.findall(r'`(streaming-[a-z0-9]+)`', table))
    listed |= {f'streaming-{short}' for short in re.findall(r'`-([a-z0-9]+)`', table)}  # `streaming-s3`, `-gcs`...
    present = {name for name in os.listdir(os.path.join(ROOT, 'plugins')) if name.startswith('streaming-')}
    assert present <= listed, f'plugins missing from the README table: {sorted(present - listed)}'
