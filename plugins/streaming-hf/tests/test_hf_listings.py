"""A repository is listed once per node: a commit's tree listing is kept under the cache root, so other processes
(a fresh interpreter here) read it instead of listing again; a process with another token, or none, lists for itself
(its access is checked); a damaged copy is listed again and rewritten; the token never appears in the copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streaming_core.plugin_api import PermanentStorageError, RemoteNotFoundError
from streaming_core.storage.facade import get_backend
from streaming_hf.testing import HubServer, forget_process_state

TOKEN = 'hf_listingSECRETtoken42'
URL = 'hf://datasets/me/listed/data/'
NAMES = [URL + f'part-{i}.bin' for i in range(3)]

CHILD = '''
import json, os
from streaming_core.storage.facade import get_backend
print(json.dumps(get_backend({url!r}).list({url!r}, timeout=10)))
'''


def _copies() -> list[str]:
    from streaming_core.plugin_api import cache_root
    directory = os.path.join(cache_root(), 'hf-listings')
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)) if os.path.isdir(directory) else []


def test_one_listing_per_node(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.state.repo('datasets', 'me/listed', private=True, tokens=(TOKEN,)).push(
        {f'data/part-{i}.bin': bytes([i]) * 10 for i in range(3)})
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    assert get_backend(URL).list(URL, timeout=10) == NAMES
    assert hub.state.count('GET', '/tree/') == 1
    (copy,) = _copies()
    with open(copy) as handle:
        assert TOKEN not in handle.read()
    # Another process of the node, with the same token: the listing is read from the node's copy.
    child = subprocess.run([sys.executable, '-c', CHILD.format(url=URL)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ), check=True)
    assert json.loads(child.stdout.strip().splitlines()[-1]) == NAMES
    assert hub.state.count('GET', '/tree/') == 1
    # Without the token: listed again, so the missing access is reported at once.
    forget_process_state()
    monkeypatch.delenv('HF_TOKEN')
    with pytest.raises(PermanentStorageError, match='401'):
        get_backend(URL).list(URL, timeout=10)
    # A damaged copy is listed again and rewritten.
    monkeypatch.setenv('HF_TOKEN', TOKEN)
    for damage in (b'{"key": [', b'{"key": ["x"], "files": []}'):
        with open(copy, 'wb') as handle:
            handle.write(damage)
        forget_process_state()
        before = hub.state.count('GET', '/tree/')
        assert get_backend(URL).list(URL, timeout=10) == NAMES
        assert hub.state.count('GET', '/tree/') == before + 1
    forget_process_state()
    before = hub.state.count('GET', '/tree/')
    assert get_backend(URL).list(URL, timeout=10) == NAMES and hub.state.count('GET', '/tree/') == before


def test_no_copy_when_turned_off(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.state.repo('datasets', 'me/listed').push({'data/part-0.bin': b'x'})
    monkeypatch.setenv('STREAMING_HF_LISTINGS', '0')
    assert get_backend(URL).list(URL, timeout=10) == [URL + 'part-0.bin']
    assert _copies() == []


def test_a_file_missing_from_a_known_listing_costs_no_request(hub: HubServer, tmp_path) -> None:
    # A commit never changes: once its directory is listed (by this process or another of the node), a file the
    # listing lacks is known to be absent. A warm start looks for index.json beside Parquet files this way.
    hub.state.repo('datasets', 'me/listed').push({f'data/part-{i}.bin': bytes([i]) * 10 for i in range(3)})
    backend = get_backend(URL)
    assert backend.exists(URL + 'index.json', timeout=10) is False
    assert hub.state.count('HEAD', '/resolve/') == 1  # nothing listed yet: asked
    backend.list(URL, timeout=10)
    for fresh in (False, True):
        if fresh:  # as a new process: the branch is resolved again, the listing read from the node's copy
            forget_process_state()
        backend = get_backend(URL)
        before = len(hub.state.requests)
        assert backend.exists(URL + 'index.json', timeout=10) is False
        with pytest.raises(RemoteNotFoundError, match='not in the listing'):
            backend.download(URL + 'index.json', str(tmp_path / 'index.json'), timeout=10)
        asked = [path for _, path, _ in hub.state.requests[before:]]
        assert asked == (['/api/datasets/me/listed/revision/main'] if fresh else [])
        backend.download(URL + 'part-1.bin', str(tmp_path / 'part-1.bin'), timeout=10)  # listed: fetched
        assert (tmp_path / 'part-1.bin').read_bytes() == bytes([1]) * 10
        # Another directory (not listed) is still asked.
        assert backend.exists('hf://datasets/me/listed/other/index.json', timeout=10) is False
        assert hub.state.count('HEAD', '/other/index.json') >= 1
