"""Writing to ``hf://`` against the loopback Hub with the real ``huggingface_hub`` client: the backend's uploads
(a regular file in the commit, an LFS file through the batch API and a PUT to the CDN) read back byte-equal; a
repeated upload makes no second commit; a push leaves earlier commits as they were; ``MDSWriter`` writes a dataset
(``out=`` a URL or a ``(local, remote)`` pair) that a fresh ``StreamingDataset`` reads; ``streaming index`` uploads its
sidecar; and refused writes (no token, a read-only token, a tag, a commit, a missing repository) say what to do,
never showing the token."""

from __future__ import annotations

import hashlib
import io
import os
import traceback
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.plugin_api import PermanentStorageError
from streaming_core.storage.facade import get_backend, upload_file
from streaming_hf import backend as hf_backend
from streaming_hf.testing import HubServer, Repo, forget_process_state
from tests.deps import require

TOKEN = 'hf_writerTOKENvalue456'
READER = 'hf_readerTOKENvalue789'


def _repo(hub: HubServer, repo_id: str = 'owner/name') -> Repo:
    """A public dataset repository with a README on main, writable with ``TOKEN``; LFS from 4 KB."""
    hub.state.lfs_threshold = 4096
    repo = hub.state.repo('datasets', repo_id, writers=(TOKEN,))
    repo.push({'README.md': b'---\nlicense: mit\n---\n'})
    return repo


def test_upload_regular_and_lfs_files_then_read_them_back(hub: HubServer, tmp_path: Any) -> None:
    repo = _repo(hub)
    small, large = tmp_path / 'small.json', tmp_path / 'large.bin'
    small.write_bytes(b'{"hello": "world"}\n')
    large.write_bytes(os.urandom(10_000))
    backend = get_backend('hf://datasets/owner/name', {'token': TOKEN})
    before = backend.commit_of(hf_backend.parse_hf_url('hf://datasets/owner/name'), 'hf://datasets/owner/name', 10)
    upload_file(str(small), 'hf://datasets/owner/name/out/small.json', options={'token': TOKEN})
    upload_file(str(large), 'hf://datasets/owner/name/out/large.bin', options={'token': TOKEN})
    # The client's protocol: preupload, the LFS batch + PUT (to the CDN, without the token) + verify, the commit.
    assert hub.state.count('POST', '/api/datasets/owner/name/preupload/main') == 2
    assert hub.state.count('POST', '/datasets/owner/name.git/info/lfs/objects/batch') == 1
    assert hub.state.count('PUT', '/cdn/lfs/') == 1 and not any(hub.state.cdn_authorization)
    assert hub.state.count('POST', '/lfs/objects/verify') == 1
    assert hub.state.count('POST', '/api/datasets/owner/name/commit/main') == 2
    assert not any('xet' in path for _, path, _ in hub.state.requests)
    assert len(repo.commits) == 3  # the README's, then one commit per file
    rows = dict(backend.list_stats('hf://datasets/owner/name/out/', timeout=10))
    assert sorted(rows) == ['hf://datasets/owner/name/out/large.bin', 'hf://datasets/owner/name/out/small.json']
    assert rows['hf://datasets/owner/name/out/large.bin']['etag'] == hashlib.sha256(large.read_bytes()).hexdigest()
    assert rows['hf://datasets/owner/name/out/small.json']['size'] == small.stat().st_size
    for name, local in (('small.json', small), ('large.bin', large)):
        backend.download(f'hf://datasets/owner/name/out/{name}', str(tmp_path / 'back'), timeout=10)
        assert (tmp_path / 'back').read_bytes() == local.read_bytes()
    # A retried (repeated) upload succeeds without a new commit or a second PUT.
    upload_file(str(large), 'hf://datasets/owner/name/out/large.bin', options={'token': TOKEN})
    assert len(repo.commits) == 3 and hub.state.count('PUT', '/cdn/lfs/') == 1
    # A reader pinned to the commit before the push still reads that commit: the files are not in it.
    assert backend.list(f'hf://datasets/owner/name@{before}/out/', timeout=10) == []
    assert backend.exists(f'hf://datasets/owner/name@{before}/README.md', timeout=10)


@pytest.mark.slow
def test_mds_writer_to_hf_then_a_fresh_dataset_reads_every_sample(hub: HubServer, tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    require('streaming_mds')
    from streaming_core import MDSWriter
    repo = _repo(hub)
    samples = [{'id': i, 'text': f'sample {i} ' * (i % 7)} for i in range(120)]
    columns = {'id': 'int', 'text': 'str'}
    with MDSWriter(out='hf://datasets/owner/name/ds', columns=columns, size_limit=2048,
                   storage_options={'token': TOKEN}) as writer:
        for sample in samples:
            writer.write(sample)
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    local = str(tmp_path / 'staging')
    with MDSWriter(out=(local, 'hf://datasets/owner/name/ds2'), columns=columns, size_limit=2048) as writer:
        for sample in samples[:30]:
            writer.write(sample)
    head = repo.commits[repo.refs['main']]
    assert 'ds/index.json' in head and 'ds2/index.json' in head
    shards = [name for name in head if name.startswith('ds/') and name.endswith('.mds')]
    assert len(shards) > 2 and any(repo.is_lfs(name, head[name]) for name in shards)
    for remote, expected in (('ds', samples), ('ds2', samples[:30])):
        forget_process_state()
        dataset = StreamingDataset(remote=f'hf://datasets/owner/name/{remote}', local=str(tmp_path / remote),
                                   batch_size=4, shuffle=True)
        assert sorted((s['id'], s['text']) for s in dataset) == [(s['id'], s['text']) for s in expected]


def test_streaming_index_uploads_its_sidecar(hub: HubServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    require('streaming_parquet')
    require('pyarrow')
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming_core.cli import main
    from streaming_parquet.sidecar import SIDECAR
    repo = _repo(hub)
    files = {}
    for part in range(2):
        out = io.BytesIO()
        pq.write_table(pa.table({'id': list(range(part * 10, part * 10 + 10))}), out, row_group_size=5)
        files[f'data/train-{part:05d}-of-00002.parquet'] = out.getvalue()
    repo.push(files)
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    assert main(['index', 'hf://datasets/owner/name/data']) == 0
    head = repo.commits[repo.refs['main']]
    assert f'data/{SIDECAR}' in head and set(files) <= set(head)
    forget_process_state()
    dataset = StreamingDataset(remote='hf://datasets/owner/name/data', local=str(tmp_path / 'c'), batch_size=2)
    assert sorted(s['id'] for s in dataset) == list(range(20))


def test_refused_uploads_say_what_to_do(hub: HubServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(hub)
    repo.refs['v1'] = repo.refs['main']  # a tag
    repo.tokens = (READER,)
    path = tmp_path / 'f.txt'
    path.write_text('x\n')

    def refused(url: str, token: Any, match: str) -> PermanentStorageError:
        backend = get_backend(url, {'token': token})
        with pytest.raises(PermanentStorageError, match=match) as err:
            backend.upload(str(path), url, timeout=10)
        shown = ''.join(traceback.format_exception(err.value)) + repr(backend)
        assert TOKEN not in shown and READER not in shown
        return err.value

    refused('hf://datasets/owner/name/f.txt', False, r'401 Unauthorized.*Writing needs a token with write access')
    refused('hf://datasets/owner/name/f.txt', READER, r'403 Forbidden.*no write access to datasets/owner/name')
    refused('hf://datasets/owner/name@v1/f.txt', TOKEN, r"'v1' is not a branch of datasets/owner/name.*create_branch")
    refused('hf://datasets/owner/name@nope/f.txt', TOKEN, r"'nope' is not a branch")
    from streaming_core import MDSWriter  # a writer reads its output's listing first: that says what to do too
    with pytest.raises(Exception, match=r'names no branch, tag or commit.*create_branch') as err:
        with MDSWriter(out='hf://datasets/owner/name@nope/mds', columns={'id': 'int'},
                       storage_options={'token': TOKEN}) as writer:
            writer.write({'id': 0})
    assert TOKEN not in ''.join(traceback.format_exception(err.value))
    refused('hf://datasets/owner/missing/f.txt', TOKEN, r'401 Unauthorized.*the repository does not exist')
    requests = len(hub.state.requests)
    commit = repo.refs['main']
    refused(f'hf://datasets/owner/name@{commit}/f.txt', TOKEN, f'the revision {commit} is a commit.*Upload to a branch')
    refused('hf://datasets/owner/name', TOKEN, 'names a repository, not a file')
    assert len(hub.state.requests) == requests  # refused before any request
    assert len(repo.commits) == 1
    # A branch other than main takes the commit; main does not move.
    repo.push({}, ref='dev')
    get_backend('hf://datasets/owner/name', {'token': TOKEN}).upload(str(path), 'hf://datasets/owner/name@dev/f.txt',
                                                                    timeout=10)
    assert 'f.txt' in repo.commits[repo.refs['dev']] and 'f.txt' not in repo.commits[repo.refs['main']]


@pytest.mark.parametrize('directory', ['ds', ''])
def test_a_dataset_pushed_again_with_an_identical_index_is_read_anew(hub: HubServer, tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    directory: str) -> None:
    """Samples of the same sizes pushed again (no hashes, the writer's default): the new commit's ``index.json`` has
    the same bytes as the cached one, so only the listing of its directory at the new commit tells that the cached
    shards are stale. A commit that changes nothing of the dataset's files (a README edit, even beside them at the
    repository's root) keeps them; so does naming the commit."""
    require('streaming_mds')
    from streaming_core import MDSWriter
    repo = _repo(hub)
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    remote = 'hf://datasets/owner/name' + (f'/{directory}' if directory else '')
    index_name = f'{directory}/index.json' if directory else 'index.json'

    def write(tag: str) -> bytes:
        with MDSWriter(out=(str(tmp_path / f'out-{tag}'), remote), columns={'id': 'int', 'tag': 'str'},
                       size_limit=300, exist_ok=True) as writer:
            for i in range(40):
                writer.write({'id': i, 'tag': f'{tag}-{i:04}'})
        return repo.commits[repo.refs['main']][index_name]

    def tags() -> list[str]:
        forget_process_state()  # a new job: the branch is resolved again
        dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1)
        return [dataset[i]['tag'] for i in range(dataset.size)]

    first = write('A')
    assert tags() == [f'A-{i:04}' for i in range(40)]
    assert write('B') == first
    assert tags() == [f'B-{i:04}' for i in range(40)]
    shard = os.path.join(str(tmp_path / 'cache'), 'shard.00000.mds')
    kept = os.stat(shard).st_ino
    repo.push({'README.md': b'---\nlicense: apache-2.0\n---\n'})  # another commit, no file of the dataset changed
    assert tags() == [f'B-{i:04}' for i in range(40)]
    assert os.stat(shard).st_ino == kept
    from streaming_core.storage.facade import stat_object
    at_commit = remote.replace('owner/name', f'owner/name@{repo.refs["main"]}', 1)
    found = stat_object(f'{at_commit}/index.json')
    assert found is not None and found.etag == f'commit:{repo.refs["main"]}'
    before = len(hub.state.requests)
    assert stat_object(f'{at_commit}/index.json') == found and len(hub.state.requests) == before  # nothing asked
