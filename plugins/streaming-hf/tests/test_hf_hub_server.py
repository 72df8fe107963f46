"""The loopback Hub itself as ``huggingface_hub`` sees it (the repository-info route it asks first, kept-alive
connections), and the token lookup of the ``hf://`` backend (``HF_TOKEN`` first, without importing
``huggingface_hub``; else huggingface_hub's own configuration)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import textwrap
from typing import Any
from urllib.parse import urlsplit

import pytest

from streaming_core.plugin_api import PermanentStorageError
from streaming_core.storage.facade import get_backend
from streaming_hf.testing import HubServer
from tests.deps import require

TOKEN = 'hf_lookupTOKENvalue456'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _push(hub: HubServer, repo_id: str = 'me/tiny', **access: Any) -> str:
    files = {'README.md': b'---\nlicense: mit\n---\n', 'data/train-00000-of-00001.parquet': b'PAR1 not really PAR1'}
    return hub.state.repo('datasets', repo_id, **access).push(files)


def test_repository_info_route_as_huggingface_hub_asks_it(hub: HubServer) -> None:
    require('huggingface_hub')
    from huggingface_hub import HfApi, HfFileSystem
    commit = _push(hub)
    hub.state.repo('models', 'me/model').push({'config.json': b'{}'})
    info = HfApi(endpoint=hub.url).dataset_info('me/tiny')
    assert info.sha == commit and [s.rfilename for s in info.siblings] == [
        'README.md', 'data/train-00000-of-00001.parquet']
    assert HfApi(endpoint=hub.url).model_info('me/model').sha == hub.state.repos[('models', 'me/model')].refs['main']
    assert hub.state.count('GET', '/api/datasets/me/tiny') >= 1 and hub.state.count('GET', '/api/models/me/model')
    # HfFileSystem (what `datasets` and litdata read hf:// with) asks the route first, then lists and reads.
    fs = HfFileSystem(endpoint=hub.url, token=False)
    assert fs.ls('datasets/me/tiny/data', detail=False) == ['datasets/me/tiny/data/train-00000-of-00001.parquet']
    assert fs.cat('datasets/me/tiny/data/train-00000-of-00001.parquet') == b'PAR1 not really PAR1'
    # A private repository answers 401 there too; an unknown one as well (the Hub does not tell them apart).
    _push(hub, 'me/private', private=True, tokens=(TOKEN,))
    for repo in ('me/private', 'me/missing'):
        connection = http.client.HTTPConnection(urlsplit(hub.url).netloc, timeout=10)
        connection.request('GET', f'/api/datasets/{repo}')
        answer = connection.getresponse()
        assert answer.status == 401 and answer.getheader('X-Error-Code') == 'RepoNotFound'
        connection.close()
    assert HfApi(endpoint=hub.url, token=TOKEN).dataset_info('me/private').private is True


def test_connections_are_kept_alive(hub: HubServer) -> None:
    commit = _push(hub)
    connection = http.client.HTTPConnection(urlsplit(hub.url).netloc, timeout=10)
    for _ in range(3):  # three answers on one connection
        connection.request('GET', '/api/datasets/me/tiny/revision/main')
        answer = connection.getresponse()
        assert answer.status == 200 and json.loads(answer.read())['sha'] == commit
    connection.close()


def test_hf_token_is_used_without_importing_huggingface_hub(hub: HubServer, tmp_path: Any) -> None:
    _push(hub, 'me/private', private=True, tokens=(TOKEN,))
    script = textwrap.dedent("""
        import json, sys
        from streaming_core.storage.facade import get_backend
        backend = get_backend('hf://datasets/me/private')
        names = backend.list('hf://datasets/me/private/data/', timeout=10)
        print(json.dumps({'names': names, 'imported': 'huggingface_hub' in sys.modules, 'repr': repr(backend)}))
    """)
    env = {**os.environ, 'HF_TOKEN': f' {TOKEN}\n', 'PYTHONPATH': ROOT}
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer['names'] == ['hf://datasets/me/private/data/train-00000-of-00001.parquet']
    assert answer['imported'] is False and TOKEN not in answer['repr']
    # The token reached the Hub (cleaned of the whitespace around it), never the output.
    assert f'Bearer {TOKEN}' in [h.get('Authorization') for _, p, h in hub.state.requests if '/tree/' in p]
    assert TOKEN not in done.stdout + done.stderr


def test_without_hf_token_huggingface_hub_config_gives_the_token(hub: HubServer, tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    require('huggingface_hub')
    _push(hub, 'me/private', private=True, tokens=(TOKEN,))
    url = 'hf://datasets/me/private/data/'
    saved = tmp_path / 'token'
    saved.write_text(TOKEN + '\n')
    from huggingface_hub import constants  # reads HF_TOKEN_PATH (where its login token is) when imported
    monkeypatch.setattr(constants, 'HF_TOKEN_PATH', str(saved))
    assert get_backend(url).list(url, timeout=10) == [url + 'train-00000-of-00001.parquet']
    # HF_HUB_DISABLE_IMPLICIT_TOKEN: neither that token nor HF_TOKEN is sent; the storage option still is.
    monkeypatch.setenv('HF_HUB_DISABLE_IMPLICIT_TOKEN', '1')
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    from streaming_hf import backend
    backend._LISTINGS.clear()
    with pytest.raises(PermanentStorageError, match='no token was given: HF_HUB_DISABLE_IMPLICIT_TOKEN is set, so '
                                                    'neither HF_TOKEN nor the saved login token is sent') as err:
        get_backend(url).list(url, timeout=10)
    assert TOKEN not in str(err.value) and 'storage_options={"token": ...}' in str(err.value)
    assert 'set HF_TOKEN' not in str(err.value)
    assert get_backend(url, {'token': TOKEN}).list(url, timeout=10) == [url + 'train-00000-of-00001.parquet']
    # token=False (as in huggingface_hub): no token at all, HF_TOKEN or not.
    monkeypatch.delenv('HF_HUB_DISABLE_IMPLICIT_TOKEN')
    backend._LISTINGS.clear()
    with pytest.raises(PermanentStorageError, match=r'no token was given \(the token option is False\)'):
        get_backend(url, {'token': False}).list(url, timeout=10)


def test_latency_delays_every_answer() -> None:
    import time
    import urllib.request
    server = HubServer(latency=0.2)
    try:
        commit = server.state.repo('datasets', 'me/tiny').push({'a.txt': b'a'})
        started = time.perf_counter()
        with urllib.request.urlopen(f'{server.url}/api/datasets/me/tiny/revision/main', timeout=10) as answer:
            assert json.loads(answer.read())['sha'] == commit
        assert time.perf_counter() - started >= 0.2
    finally:
        server.close()
