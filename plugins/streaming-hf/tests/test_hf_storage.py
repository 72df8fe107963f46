"""``hf://`` storage against a loopback server speaking the Hub's REST API: listing (paginated), ranged reads and
downloads through the CDN redirect, revision pinning, tokens (never sent to the CDN, never in messages), private and
gated repositories, offline mode; and a Hub dataset's Parquet files streamed end to end."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any

import pytest

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.plugin_api import PermanentStorageError, StorageError, TruncatedDownloadError
from streaming_core.storage.facade import clear_backend_cache, download_file, get_backend, read_range
from streaming_hf.testing import HubServer
from streaming_hf.url import parse_hf_url
from tests.deps import require
from tests.fixtures.fault_proxy import FaultProxy

TOKEN = 'hf_secretTOKENvalue123'


def _parquet(ids: list[int]) -> bytes:
    require('pyarrow')
    import pyarrow as pa
    import pyarrow.parquet as pq
    out = io.BytesIO()
    pq.write_table(pa.table({'id': ids, 'text': [f'row {i}' for i in ids]}), out, row_group_size=10)
    return out.getvalue()


def _push_dataset(hub: HubServer, repo_id: str = 'owner/name', **access: Any) -> str:
    repo = hub.state.repo('datasets', repo_id, **access)
    files = {'README.md': b'---\nlicense: mit\n---\n', '.gitattributes': b'*.parquet filter=lfs\n'}
    for shard in range(3):
        files[f'data/train-{shard:05d}-of-00003.parquet'] = _parquet(list(range(shard * 20, shard * 20 + 20)))
    files['data/test-00000-of-00001.parquet'] = _parquet([1000, 1001])
    return repo.push(files)


def test_urls() -> None:
    url = parse_hf_url('hf://datasets/owner/name@refs%2Fconvert%2Fparquet/default/train/0000.parquet')
    assert (url.kind, url.repo, url.revision, url.path) == ('datasets', 'owner/name', 'refs/convert/parquet',
                                                             'default/train/0000.parquet')
    assert url.quoted_revision() == 'refs%2Fconvert%2Fparquet'
    assert parse_hf_url('hf://datasets/owner/name@refs/pr/3/data').revision == 'refs/pr/3'
    plain = parse_hf_url('hf://datasets/owner/name/data/x.parquet')
    assert plain.revision is None and plain.root == 'hf://datasets/owner/name' and plain.repo_type == 'dataset'
    assert plain.with_path('y') == 'hf://datasets/owner/name/y'
    assert parse_hf_url('hf://models/o/m@v1').path == ''
    for bad in ('hf://owner/name/x', 'hf://datasets/owner', 'hf://datasets/own er/name', 's3://datasets/o/n',
                'hf://datasets/o/n@/x'):
        with pytest.raises(PermanentStorageError, match='hf://datasets/'):
            parse_hf_url(bad)


def test_list_read_range_download_exists(hub: HubServer, tmp_path: Any) -> None:
    commit = _push_dataset(hub)
    backend = get_backend('hf://datasets/owner/name')
    rows = backend.list_stats('hf://datasets/owner/name/data/', timeout=10)
    names = [url for url, _ in rows]
    assert names == [f'hf://datasets/owner/name/data/{n}' for n in (
        'test-00000-of-00001.parquet', 'train-00000-of-00003.parquet', 'train-00001-of-00003.parquet',
        'train-00002-of-00003.parquet')]
    files = hub.state.repos[('datasets', 'owner/name')].commits[commit]
    import hashlib
    for url, stat in rows:
        data = files[url.split('owner/name/', 1)[1]]
        assert stat['size'] == len(data) and stat['etag'] == hashlib.sha256(data).hexdigest()
    # The whole repository: 7 entries (files and directories) over pages of 4, every page followed.
    assert len(backend.list('hf://datasets/owner/name/', timeout=10)) == 6
    assert hub.state.count('GET', '/tree/') >= 3
    assert backend.list('hf://datasets/owner/name/nothing/', timeout=10) == []
    url = 'hf://datasets/owner/name/data/train-00001-of-00003.parquet'
    data = files['data/train-00001-of-00003.parquet']
    assert backend.read_range(url, len(data) - 8, 8, timeout=10) == data[-8:]
    assert backend.read_range(url, len(data) - 4, 100, timeout=10) == data[-4:]
    assert backend.read_range(url, len(data) + 10, 5, timeout=10) == b''
    backend.download(url, str(tmp_path / 'x'), timeout=10)
    assert (tmp_path / 'x').read_bytes() == data
    assert backend.exists(url, timeout=10) and backend.exists('hf://datasets/owner/name/README.md', timeout=10)
    assert not backend.exists('hf://datasets/owner/name/missing.parquet', timeout=10)
    # Every file request names the commit, resolved once.
    assert hub.state.count('GET', '/revision/main') == 1
    assert hub.state.count('GET', f'/resolve/{commit}/') >= 3 and hub.state.count('GET', '/resolve/main/') == 0
    with pytest.raises(PermanentStorageError, match='401 Unauthorized.*Writing needs a token with write access'):
        backend.upload(str(tmp_path / 'x'), url, timeout=10)  # no token: refused (test_hf_upload.py writes)


@pytest.mark.slow
def test_a_hub_dataset_streams_end_to_end_and_stays_pinned(hub: HubServer, tmp_path: Any) -> None:
    first = _push_dataset(hub)
    dataset = StreamingDataset(remote='hf://datasets/owner/name/data', local=str(tmp_path / 'cache'),
                               shuffle=True, batch_size=4, shuffle_seed=7)
    assert len(dataset) == 62
    # Indexing read footers only: ranged reads of the 4 files' ends, no whole-file download yet.
    ranged = [h for m, p, h in hub.state.requests if p.startswith('/cdn/') and 'Range' in h]
    assert len(ranged) == 4 and hub.state.count('GET', '/tree/') == 1
    # A push to main while training: this dataset keeps reading its commit.
    repo = hub.state.repos[('datasets', 'owner/name')]
    repo.push({'data/train-00000-of-00003.parquet': _parquet(list(range(500, 520)))})
    ids = sorted(sample['id'] for sample in dataset)
    assert ids == list(range(60)) + [1000, 1001]
    assert all(f'/{first}/' in p for m, p, _ in hub.state.requests if '/resolve/' in p or p.startswith('/cdn/'))
    assert hub.state.cdn_authorization and not any(hub.state.cdn_authorization)
    # A second dataset in this process: the commit's listing is not fetched again.
    again = StreamingDataset(remote='hf://datasets/owner/name/data', local=str(tmp_path / 'cache'), batch_size=4)
    assert len(again) == 62 and hub.state.count('GET', '/tree/') == 1
    # DataLoader workers read the same commit (the pin is inherited), from the node's cache.
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    assert sorted(s['id'] for batch in loader for s in batch) == ids


def test_hub_layout_split_through_parquet_stream(hub: HubServer, tmp_path: Any) -> None:
    require('streaming_parquet')
    from streaming_parquet import ParquetStream
    _push_dataset(hub)
    stream = ParquetStream(remote='hf://datasets/owner/name@main', local=str(tmp_path / 'c'), split='test')
    dataset = StreamingDataset(streams=[stream], batch_size=1)
    assert [s for s in dataset] == [{'id': 1000, 'text': 'row 1000'}, {'id': 1001, 'text': 'row 1001'}]


def test_private_and_gated_repositories(hub: HubServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _push_dataset(hub, 'owner/private', private=True, tokens=(TOKEN,))
    _push_dataset(hub, 'owner/gated', gated=True, tokens=(TOKEN,))
    url = 'hf://datasets/owner/private/data/'
    with pytest.raises(PermanentStorageError, match=r'401 Unauthorized \(RepoNotFound.*no token was given '
                                                    r'\(HF_TOKEN\)') as err:
        get_backend(url).list(url, timeout=10)
    with pytest.raises(PermanentStorageError, match='403 Forbidden.*accept its conditions'):
        get_backend(url).list('hf://datasets/owner/gated/data/', timeout=10)
    wrong = get_backend(url, {'token': 'hf_wrongTOKENvalue999'})
    with pytest.raises(PermanentStorageError, match='the token given was refused') as err:
        wrong.list(url, timeout=10)
    assert 'hf_wrongTOKENvalue999' not in str(err.value) and 'wrongTOKEN' not in repr(wrong)
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    dataset = StreamingDataset(remote='hf://datasets/owner/gated/data', local=str(tmp_path / 'g'), batch_size=2)
    assert sorted(s['id'] for s in dataset) == list(range(60)) + [1000, 1001]
    hub_auth = [h.get('Authorization') for m, p, h in hub.state.requests if not p.startswith('/cdn/')]
    assert f'Bearer {TOKEN}' in hub_auth and not any(hub.state.cdn_authorization)
    assert TOKEN not in repr(get_backend(url))


def test_offline_and_unreachable_say_so(hub: HubServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _push_dataset(hub)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with pytest.raises(PermanentStorageError, match='HF_HUB_OFFLINE is set'):
        StreamingDataset(remote='hf://datasets/owner/name/data', local=str(tmp_path / 'a'), batch_size=2)
    monkeypatch.delenv('HF_HUB_OFFLINE')
    import socket

    from streaming_core.storage.facade import clear_backend_cache
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv('HF_ENDPOINT', f'http://127.0.0.1:{port}')
    clear_backend_cache()
    with pytest.raises(StorageError, match=f'cannot reach the Hugging Face Hub at http://127.0.0.1:{port}'):
        StreamingDataset(remote='hf://datasets/owner/name/data', local=str(tmp_path / 'b'), batch_size=2,
                         download_retry=0)
    assert os.environ['HF_ENDPOINT'].endswith(str(port))


WARM_CHILD = '''
import json, sys
from streaming_core import StreamingDataset
dataset = StreamingDataset(remote=sys.argv[2], local=sys.argv[1], batch_size=4)
print(json.dumps([len(dataset), dataset[0]['id']]))
'''


def test_a_warm_start_in_a_new_process_makes_one_request(hub: HubServer, tmp_path: Any) -> None:
    # A new process on a node where the derived index, the commit's listing and a file are kept: it resolves the
    # branch (one request) and knows from the listing that there is no index.json, so it asks nothing else.
    import json
    import subprocess
    import sys
    commit = _push_dataset(hub)
    from streaming_hf.backend import PIN_ENV_PREFIX
    for url in ('hf://datasets/owner/name/data', f'hf://datasets/owner/name@{commit}/data'):
        local = str(tmp_path / ('cache' if '@' not in url else 'cache-commit'))
        dataset = StreamingDataset(remote=url, local=local, batch_size=4)
        assert dataset[0]['id'] == 1000
        for inherited in (True, False):  # a process started from this one inherits the pin; another job does not
            env = {k: v for k, v in os.environ.items() if inherited or not k.startswith(PIN_ENV_PREFIX)}
            before = len(hub.state.requests)
            child = subprocess.run([sys.executable, '-c', WARM_CHILD, local, url], capture_output=True, text=True,
                                   timeout=300, env=env, check=True)
            assert json.loads(child.stdout.strip().splitlines()[-1]) == [62, 1000]
            asked = [path for _, path, _ in hub.state.requests[before:]]
            # A branch is resolved once per job; a commit names itself.
            assert asked == ([] if inherited or '@' in url else ['/api/datasets/owner/name/revision/main'])


def _behind_proxy(hub: HubServer, monkeypatch: pytest.MonkeyPatch, fault_proxy: Callable[[str], FaultProxy],
                  files: dict[str, bytes]) -> FaultProxy:
    """Push ``files`` to ``owner/faults`` and reach the Hub through a fault proxy."""
    hub.state.repo('datasets', 'owner/faults').push(files)
    proxy = fault_proxy(hub.url)
    monkeypatch.setenv('HF_ENDPOINT', proxy.url)
    clear_backend_cache()
    return proxy


def test_a_download_cut_short_is_retried_never_accepted(hub: HubServer, tmp_path: Any,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        fault_proxy: Callable[[str], FaultProxy]) -> None:
    data = b'{"version": 2, "shards": [' + b', '.join(b'{"n": %d}' % i for i in range(300)) + b']}'
    proxy = _behind_proxy(hub, monkeypatch, fault_proxy, {'ds/index.json': data})
    url = 'hf://datasets/owner/faults/ds/index.json'
    resolve = r'/resolve/.*index\.json'
    proxy.truncate(1, keep=0.5, method='GET', path=resolve)  # the body ends (FIN) before its Content-Length
    target = tmp_path / 'once' / 'index.json'
    download_file(url, str(target), retries=2, initial_backoff=0.01)
    assert target.read_bytes() == data
    assert proxy.count(method='GET', path=resolve, fault='truncate') == 1
    assert proxy.count(method='GET', path=resolve) == 2
    proxy.truncate(None, keep=0.5, method='GET', path=resolve)
    with pytest.raises(TruncatedDownloadError, match=f'of {len(data)} bytes'):
        download_file(url, str(tmp_path / 'never' / 'index.json'), retries=1, initial_backoff=0.01)
    assert os.listdir(tmp_path / 'never') == []  # no partial file, under any name
    with pytest.raises(TruncatedDownloadError):
        get_backend(url).download(url, str(tmp_path / 'direct.json'), timeout=10)
    assert not (tmp_path / 'direct.json').exists()


def test_a_range_answered_for_other_bytes_is_retried_never_returned(hub: HubServer, monkeypatch: pytest.MonkeyPatch,
                                                                    fault_proxy: Callable[[str], FaultProxy]) -> None:
    data = bytes(range(256)) * 8
    proxy = _behind_proxy(hub, monkeypatch, fault_proxy, {'ds/blob.bin': data})
    url = 'hf://datasets/owner/faults/ds/blob.bin'
    proxy.wrong_range(1, method='GET', path='/resolve/')
    assert read_range(url, 500, 8, retries=2, initial_backoff=0.01) == data[500:508]
    assert proxy.count(method='GET', path='/resolve/') == 2
    proxy.wrong_range(None, method='GET', path='/resolve/')
    with pytest.raises(StorageError, match='500-507'):
        read_range(url, 500, 8, retries=1, initial_backoff=0.01)
    proxy.clear()
    assert read_range(url, len(data) - 4, 8) == data[-4:]  # short at the end of the file: its end


def test_a_full_local_copy_is_read_offline_with_its_remote_given(hub: HubServer, tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy made online is read with HF_HUB_OFFLINE=1 and the same remote (a warning says it may be out of date);
    pinning the stream's read location to its commit asked the Hub and failed the construction."""
    import warnings

    from streaming_hf.testing import forget_process_state
    from tests.fixtures.data import write_mds
    out = write_mds(str(tmp_path / 'mds'), 40, size_limit=600)
    hub.state.repo('datasets', 'owner/mds').push({f'data/{name}': open(os.path.join(out, name), 'rb').read()
                                                  for name in sorted(os.listdir(out))})
    local = str(tmp_path / 'copy')
    online = StreamingDataset(remote='hf://datasets/owner/mds/data', local=local, batch_size=2)
    expected = sorted(s['id'] for s in online)
    forget_process_state()  # a new job
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        offline = StreamingDataset(remote='hf://datasets/owner/mds/data', local=local, batch_size=2,
                                   download_retry=0)
    assert sorted(s['id'] for s in offline) == expected and offline.streams[0].read_root is None
