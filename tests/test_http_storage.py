"""The builtin read-only http(s):// backend against a real static file server on loopback (HTTPS with a
self-signed certificate), with the fault proxy in front for failures."""

from __future__ import annotations

import base64
import logging
import os
import pickle
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest

from streaming_core.errors import (
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    UploadError,
)
from streaming_core.storage.facade import (
    clear_backend_cache,
    download_file,
    exists,
    get_backend,
    list_objects,
    read_range,
    stat_object,
    upload_file,
)
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.servers import StaticServer, need_module
from tests.fixtures.storage_contract import end_to_end

pytestmark = pytest.mark.slow

FAST = {'initial_backoff': 0.01}


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    clear_backend_cache()
    yield
    clear_backend_cache()


def _serve(server: StaticServer, size: int = 200_000) -> tuple[str, bytes]:
    name = f'obj-{uuid.uuid4().hex[:12]}.bin'
    data = os.urandom(size)
    with open(os.path.join(server.root, name), 'wb') as handle:
        handle.write(data)
    return name, data


def _get(tmp_path: Any, url: str, options: dict[str, Any] | None = None, **kwargs: Any) -> bytes:
    target = tmp_path / f'dst-{uuid.uuid4().hex[:6]}'
    download_file(url, str(target), options=options, timeout=kwargs.pop('timeout', 10), **FAST, **kwargs)
    return target.read_bytes()


def test_download_and_exists(http_server: StaticServer, tmp_path: Any) -> None:
    name, data = _serve(http_server)
    url = f'{http_server.url}/{name}'
    assert _get(tmp_path, url, expected_size=len(data)) == data
    assert exists(url)
    assert not exists(f'{http_server.url}/absent-{name}')


def test_missing_object_is_not_found_and_not_retried(http_server: StaticServer, tmp_path: Any,
                                                     fault_proxy: Callable[[str], FaultProxy]) -> None:
    proxy = fault_proxy(http_server.url)
    url = f'{proxy.url}/absent-{uuid.uuid4().hex}.bin'
    with pytest.raises(RemoteNotFoundError, match=url):
        _get(tmp_path, url, retries=3)
    assert proxy.count(method='GET') == 1
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('fault', ['fail', 'reset', 'truncate'])
def test_transient_faults_are_survived(http_server: StaticServer, tmp_path: Any,
                                       fault_proxy: Callable[[str], FaultProxy], fault: str) -> None:
    name, data = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    {'fail': lambda: proxy.fail(2, status=503, method='GET'), 'reset': lambda: proxy.reset(1, method='GET'),
     'truncate': lambda: proxy.truncate(1, keep=0.3, method='GET')}[fault]()
    assert _get(tmp_path, f'{proxy.url}/{name}', retries=2, expected_size=len(data)) == data


def test_truncated_body_is_a_truncated_download(http_server: StaticServer, tmp_path: Any,
                                                fault_proxy: Callable[[str], FaultProxy]) -> None:
    name, data = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    proxy.truncate(None, keep=1000, method='GET')
    with pytest.raises(TruncatedDownloadError):
        _get(tmp_path, f'{proxy.url}/{name}', retries=1)
    assert proxy.count(method='GET') == 2


def test_stall_past_the_timeout_is_retried(http_server: StaticServer, tmp_path: Any,
                                           fault_proxy: Callable[[str], FaultProxy]) -> None:
    name, data = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    proxy.stall(1, seconds=8, phase='body', method='GET')
    assert _get(tmp_path, f'{proxy.url}/{name}', retries=2, timeout=1.0) == data
    assert proxy.count(method='GET', fault='stall') == 1


def test_denied_and_rejected_are_permanent(http_server: StaticServer, tmp_path: Any,
                                           fault_proxy: Callable[[str], FaultProxy]) -> None:
    name, _ = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    proxy.fail(None, status=401, method='GET')
    with pytest.raises(PermanentStorageError, match='401'):
        _get(tmp_path, f'{proxy.url}/{name}', retries=3)
    assert proxy.count(method='GET') == 1
    proxy.clear()
    proxy.fail(None, status=400, method='GET')
    with pytest.raises(PermanentStorageError, match='400'):
        _get(tmp_path, f'{proxy.url}/{name}', retries=3)
    proxy.clear()
    proxy.fail(None, status=429, method='GET')
    with pytest.raises(StorageError, match='429'):
        _get(tmp_path, f'{proxy.url}/{name}', retries=1)
    assert proxy.count(method='GET') == 2


def test_exists_falls_back_to_a_ranged_get_when_head_is_refused(http_server: StaticServer,
                                                                fault_proxy: Callable[[str], FaultProxy]) -> None:
    name, _ = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    proxy.fail(None, status=405, method='HEAD')
    assert exists(f'{proxy.url}/{name}')
    assert not exists(f'{proxy.url}/absent-{name}')
    assert proxy.matching('GET')[0].headers.get('range') == 'bytes=0-0'


def test_a_dataset_rewritten_on_the_server_while_a_job_reads_it_stops_the_job(
        http_server: StaticServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
        fault_proxy: Callable[[str], FaultProxy]) -> None:
    """The web server's ETag / Last-Modified identify the index version (a HEAD): a rewrite with the same index.json
    bytes (fixed-size samples, no hashes) is noticed by a running job instead of serving the new samples under its
    old index; a server that refuses HEAD is identified by the index bytes, as before."""
    import time

    from streaming_core import StreamingDataset
    from streaming_core.errors import DatasetVersionError
    from streaming_core.reading import remote_watch
    from tests.fixtures.data import write_mds
    name = f'ds-{uuid.uuid4().hex[:8]}'
    root = os.path.join(http_server.root, name)
    write_mds(root, 60, size_limit=1 << 9)
    found = stat_object(f'{http_server.url}/{name}/index.json')
    assert found is not None and found.mtime and found.size == os.path.getsize(os.path.join(root, 'index.json'))
    dataset = StreamingDataset(remote=f'{http_server.url}/{name}', local=str(tmp_path / 'local'), batch_size=4)
    assert dataset.streams[0].index_identity.startswith('stat:')
    assert dataset[0]['id'] == 0
    with open(os.path.join(root, 'index.json'), 'rb') as handle:
        before = handle.read()
    time.sleep(1.1)  # Last-Modified counts seconds
    write_mds(root, 60, start=1000, size_limit=1 << 9, exist_ok=True)
    with open(os.path.join(root, 'index.json'), 'rb') as handle:
        assert handle.read() == before
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 0.0)
    with pytest.raises(DatasetVersionError, match='changed while this job read it'):
        [dataset[i]['id'] for i in range(60)]
    proxy = fault_proxy(http_server.url)
    proxy.fail(None, status=405, method='HEAD')
    assert stat_object(f'{proxy.url}/{name}/index.json') is None
    assert StreamingDataset(remote=f'{proxy.url}/{name}', local=str(tmp_path / 'other'),
                            batch_size=4).streams[0].index_identity.startswith('sha256:')
    # Replicas whose validators differ between requests: validators=False names the version by the index bytes, so
    # a job reads on (the second read of every file would otherwise see a new Last-Modified).
    proxy.clear()
    plain = StreamingDataset(remote=f'{http_server.url}/{name}', local=str(tmp_path / 'third'), batch_size=4,
                             storage_options={'validators': False})
    assert plain.streams[0].index_identity.startswith('sha256:')
    os.utime(os.path.join(root, 'index.json'))  # what another replica's Last-Modified would look like
    assert sorted(plain[i]['id'] for i in range(60)) == list(range(1000, 1060))
    with pytest.raises(PermanentStorageError, match='validators'):
        get_backend(f'{http_server.url}/{name}', {'validators': 'no'})


def test_upload_and_list_are_refused(http_server: StaticServer, tmp_path: Any) -> None:
    source = tmp_path / 'src'
    source.write_bytes(b'x')
    with pytest.raises(UploadError, match='read-only') as info:
        upload_file(str(source), f'{http_server.url}/new.bin', retries=3, **FAST)
    assert isinstance(info.value.__cause__, PermanentStorageError)
    with pytest.raises(PermanentStorageError, match='cannot list'):
        list_objects(f'{http_server.url}/')


def test_https_with_a_self_signed_certificate(https_server: StaticServer, tmp_path: Any) -> None:
    name, data = _serve(https_server)
    url = f'{https_server.url}/{name}'
    assert _get(tmp_path, url, {'verify': https_server.ca_file}) == data
    assert exists(url, options={'verify': https_server.ca_file})
    assert _get(tmp_path, url, {'verify': False}) == data
    with pytest.raises(PermanentStorageError, match='TLS verification'):
        _get(tmp_path, url, retries=3)
    with pytest.raises(PermanentStorageError, match='CA bundle'):
        _get(tmp_path, url, {'verify': str(tmp_path / 'absent.pem')})


def test_credentials_travel_in_headers_and_never_in_messages(http_server: StaticServer, tmp_path: Any,
                                                             fault_proxy: Callable[[str], FaultProxy],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger='streaming_core')
    password = f'pw-{uuid.uuid4().hex}'
    token = f'tok-{uuid.uuid4().hex}'
    name, data = _serve(http_server)
    proxy = fault_proxy(http_server.url)
    host = proxy.url.removeprefix('http://')
    assert _get(tmp_path, f'http://alice:{password}@{host}/{name}') == data
    expected = 'Basic ' + base64.b64encode(f'alice:{password}'.encode()).decode()
    assert proxy.matching('GET')[-1].headers['authorization'] == expected
    errors = []
    for url, options in ((f'http://alice:{password}@{host}/absent.bin', None),
                         (f'{proxy.url}/absent.bin', {'bearer_token': token}),
                         (f'{proxy.url}/{name}?sig={token}', None)):
        proxy.fail(None, status=503, method='GET', path=name)
        with pytest.raises(StorageError) as info:
            _get(tmp_path, url, options, retries=1)
        errors.append(info.value)
    assert proxy.matching('GET', path='absent')[-1].headers['authorization'] == f'Bearer {token}'
    texts = [f'{e} {e!r} {getattr(e, "__notes__", "")}' for e in errors] + [r.getMessage() for r in caplog.records]
    texts.append(repr(get_backend(proxy.url, {'bearer_token': token})))
    for text in texts:
        assert password not in text and token not in text


@pytest.fixture
def redirector(http_server: StaticServer, fault_proxy: Callable[[str], FaultProxy]) -> Iterator[SimpleNamespace]:
    """A server on its own port: ``/away/NAME`` redirects to the static server's ``NAME`` through a fault proxy on
    another port (another origin, whose requests the proxy records); ``/here/NAME`` redirects to ``/final/NAME`` on
    this server, which records the ``Authorization`` header it gets and serves the file."""
    name, data = _serve(http_server, 5000)
    proxy = fault_proxy(http_server.url)
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

        def do_GET(self) -> None:  # noqa: N802
            kind, _, rest = self.path.lstrip('/').partition('/')
            if kind in ('away', 'here'):
                self.send_response(302)
                self.send_header('Location', f'{proxy.url}/{rest}' if kind == 'away' else f'/final/{rest}')
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            seen.append(self.headers.get('Authorization'))
            self.send_response(200)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    yield SimpleNamespace(url=f'http://127.0.0.1:{server.server_address[1]}', proxy=proxy, name=name, data=data,
                          seen=seen)
    server.shutdown()
    thread.join(timeout=5)
    server.server_close()


@pytest.mark.parametrize('credential', ['bearer_token', 'basic_auth', 'url', 'headers'])
def test_credentials_never_follow_a_redirect_to_another_origin(redirector: SimpleNamespace, tmp_path: Any,
                                                              credential: str) -> None:
    host = redirector.url.removeprefix('http://')
    secret = f'secret-{uuid.uuid4().hex}'
    base, options, header = {
        'bearer_token': (redirector.url, {'bearer_token': secret}, f'Bearer {secret}'),
        'basic_auth': (redirector.url, {'basic_auth': ('bob', secret)},
                       'Basic ' + base64.b64encode(f'bob:{secret}'.encode()).decode()),
        'url': (f'http://alice:{secret}@{host}', None,
                'Basic ' + base64.b64encode(f'alice:{secret}'.encode()).decode()),
        'headers': (redirector.url, {'headers': {'X-Api-Key': secret, 'Authorization': f'Token {secret}',
                                                 'Private-Hub': secret, 'User-Agent': 'streaming-test'}},
                    f'Token {secret}'),
    }[credential]
    name, data = redirector.name, redirector.data
    # Another origin (same host, another port): the redirect is followed, without the credentials.
    assert _get(tmp_path, f'{base}/away/{name}', options) == data
    assert read_range(f'{base}/away/{name}', 100, 50, options=options, **FAST) == data[100:150]
    reached = redirector.proxy.matching('GET', path=name)
    assert len(reached) == 2 and [r.headers.get('authorization') for r in reached] == [None, None]
    assert not any(secret in value for r in reached for value in r.headers.values())
    if credential == 'headers':  # a credential under any name stays behind; the user agent goes along
        assert [r.headers.get('private-hub') for r in reached] == [None, None]
        assert [r.headers.get('user-agent') for r in reached] == ['streaming-test'] * 2
    # The same origin: they are kept.
    assert _get(tmp_path, f'{base}/here/{name}', options) == data
    assert read_range(f'{base}/here/{name}', 100, 50, options=options, **FAST) == data[100:150]
    assert redirector.seen == [header, header]


def test_options_are_checked(http_server: StaticServer) -> None:
    with pytest.raises(PermanentStorageError, match='Unknown storage option'):
        get_backend(http_server.url, {'endpoint_url': 'x'})
    with pytest.raises(PermanentStorageError, match='basic_auth'):
        get_backend(http_server.url, {'basic_auth': 'user:pass'})
    with pytest.raises(PermanentStorageError, match='verify'):
        get_backend(http_server.url, {'verify': 3})


def test_backend_pickles_after_use(https_server: StaticServer, tmp_path: Any) -> None:
    name, data = _serve(https_server)
    backend = get_backend(https_server.url, {'verify': https_server.ca_file})
    assert backend.exists(f'{https_server.url}/{name}', timeout=10)
    clone = pickle.loads(pickle.dumps(backend))
    clone.download(f'{https_server.url}/{name}', str(tmp_path / 'clone'), timeout=10)
    assert (tmp_path / 'clone').read_bytes() == data


def test_end_to_end_mds_written_locally_streamed_over_http(http_server: StaticServer, tmp_path: Any) -> None:
    need_module('streaming_mds')
    name = f'dataset-{uuid.uuid4().hex[:8]}'
    end_to_end(f'{http_server.url}/{name}', {}, tmp_path, write_remote=os.path.join(http_server.root, name))


def test_end_to_end_over_https(https_server: StaticServer, tmp_path: Any) -> None:
    need_module('streaming_mds')
    name = f'dataset-{uuid.uuid4().hex[:8]}'
    options = {'verify': https_server.ca_file}
    from streaming_core import StreamingDataset
    from streaming_mds import MDSWriter
    with MDSWriter(out=os.path.join(https_server.root, name), columns={'id': 'int'}, compression='zstd',
                   size_limit=256) as writer:
        for i in range(100):
            writer.write({'id': i})
    dataset = StreamingDataset(remote=f'{https_server.url}/{name}', local=str(tmp_path / 'cache'), shuffle=True,
                               batch_size=4, storage_options=options)
    assert sorted(int(sample['id']) for sample in dataset) == list(range(100))


def test_fault_proxy_rules(http_server: StaticServer, tmp_path: Any, fault_proxy: Callable[[str], FaultProxy]) -> None:
    """The proxy's own contract (other suites build on it): order, counts, method/path filters, clear, log."""
    import urllib.error
    import urllib.request

    from tests.fixtures.fault_proxy import Fault
    name, data = _serve(http_server, 1000)
    proxy = fault_proxy(http_server.url)

    def status(path: str, method: str = 'GET') -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(proxy.url + path, method=method), timeout=5) as r:
                r.read()
                return r.status
        except urllib.error.HTTPError as err:
            return err.code

    first = proxy.fail(2, status=500, method='GET', path=name)
    proxy.fail(1, status=418)
    assert status(f'/{name}', 'HEAD') == 418  # the GET-only fault does not match HEAD; the catch-all does
    assert [status(f'/{name}') for _ in range(3)] == [500, 500, 200]
    assert first.hits == 2 and proxy.count(fault='status') == 3 and proxy.count(method='GET', path=name) == 3
    assert proxy.requests[0].method == 'HEAD' and proxy.requests[-1].status == 200
    proxy.clear()
    assert proxy.requests == [] and proxy.faults == []
    forever = proxy.add(Fault('status', times=None, status=502, path='never-matches|' + name))
    assert [status(f'/{name}') for _ in range(3)] == [502] * 3 and forever.hits == 3
    proxy.clear()
    proxy.truncate(1, keep=100)
    with pytest.raises(TruncatedDownloadError, match='100 of 1000'):
        get_backend(proxy.url).download(f'{proxy.url}/{name}', str(tmp_path / 'cut'), timeout=5)
    assert get_backend(proxy.url).exists(f'{proxy.url}/{name}', timeout=5)
    with pytest.raises(ValueError, match='kind'):
        Fault('explode')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='upstream'):
        FaultProxy('https://127.0.0.1:1')


def test_a_dataset_without_index_json_on_a_web_server_says_the_index_is_missing(http_server: StaticServer,
                                                                               tmp_path: Any) -> None:
    # A web server cannot be listed, so no index can be derived from its files: the error is the missing
    # index.json, caused by the refused listing.
    from streaming_core import StreamingDataset
    with pytest.raises(RemoteNotFoundError, match='index.json') as caught:
        StreamingDataset(remote=f'{http_server.url}/no-such-dataset', local=str(tmp_path / 'cache'), batch_size=2,
                         download_retry=0)
    assert isinstance(caught.value.__cause__, PermanentStorageError)
    assert 'cannot list' in str(caught.value.__cause__)
    message = str(caught.value)  # what to do, once: the index, or a store that lists
    assert 'plain HTTP has no listing' in message and 'streaming convert parquet SRC OUT' in message
    assert message.count('index.json') >= 2 and message.count('plain HTTP') == 1


def test_an_https_upgrade_of_the_same_host_keeps_the_credentials():
    """As requests does: http://h/ -> https://h/ on the default ports is the same origin for credentials."""
    from streaming_core.builtin.http import _same_origin
    assert _same_origin('http://h.example/a', 'https://h.example/b')
    assert _same_origin('https://h.example:8443/a', 'https://H.example:8443/b')
    assert not _same_origin('https://h.example/a', 'http://h.example/b')  # a downgrade
    assert not _same_origin('http://h.example:8080/a', 'https://h.example/b')
    assert not _same_origin('https://h.example/a', 'https://cdn.example/b')


def test_credentials_moved_out_of_the_url_keep_the_same_remote(http_server: StaticServer, tmp_path: Any) -> None:
    """cache.md: a remote is compared without credentials or signatures, so the same server read first with
    ``user:pass@`` in its URL and then with ``basic_auth`` (or a token query parameter dropped) shares its local
    directory; it was refused as another remote. Keys recorded by earlier versions still match."""
    import hashlib

    from streaming_core import StreamingDataset
    from streaming_core.storage.redact import redact_url
    from tests.fixtures.data import write_mds
    need_module('streaming_mds')
    name = f'dataset-{uuid.uuid4().hex[:8]}'
    write_mds(os.path.join(http_server.root, name), 40)
    host = http_server.url.removeprefix('http://')
    local = str(tmp_path / 'local')
    first = StreamingDataset(remote=f'http://u:pw1@{host}/{name}', local=local, batch_size=4)
    again = StreamingDataset(remote=f'{http_server.url}/{name}', local=local, batch_size=4,
                             storage_options={'basic_auth': ('u', 'pw1')})
    assert [int(s['id']) for s in again] == [int(s['id']) for s in first] == list(range(40))
    # the login kept in the URL, the password moved (the case a newcomer found refused as another remote)
    user_only = StreamingDataset(remote=f'http://u@{host}/{name}', local=local, batch_size=4,
                                 storage_options={'basic_auth': ('u', 'pw1')})
    assert [int(s['id']) for s in user_only] == list(range(40))
    from streaming_core.common.paths import default_local, without_credentials
    from streaming_core.reading.cache_record import remote_key, remote_keys
    assert remote_key('https://h/ds?token=1&x=2') == remote_key('https://h/ds?x=2')
    assert remote_key('https://u:pw@h/ds') == remote_key('https://h/ds') != remote_key('https://h/other')
    logins = ['https://u:pw@h/ds', 'https://u@h/ds', 'https://v:pw@h/ds', 'https://h/ds']
    assert len({remote_key(url) for url in logins}) == len({default_local(url) for url in logins}) == 1
    assert remote_key('sftp://alice@h/ds') == remote_key('sftp://h/ds') == remote_key('sftp://alice:pw@h/ds')
    for located in ('azure-dl://fs@account/ds', 'oci://bucket@namespace/ds'):  # an @ of the location stays
        assert remote_key(located) != remote_key(located.replace('@', '@x'))
        assert default_local(located) != default_local(located.replace('@', '@x'))
    earlier = hashlib.blake2b(b'https://u@h/ds', digest_size=16).hexdigest()  # what earlier versions recorded
    assert earlier in remote_keys('https://u@h/ds')
    # an @ after the host is not a login; a default directory earlier versions made for a login is still used
    assert without_credentials('https://h.example?sig=a@evil.example') == 'https://h.example?sig=a@evil.example'
    assert without_credentials('https://u:pw@h.example#x@y') == 'https://h.example#x@y'
    kept = os.path.join(os.environ['STREAMING_CORE_CACHE_DIR'], 'datasets', hashlib.blake2s(
        b'https://u@h2/ds', digest_size=16).hexdigest())
    assert default_local('https://u:pw@h2/ds') != kept
    os.makedirs(kept)
    assert default_local('https://u:pw@h2/ds') == default_local('https://u@h2/ds') == kept
    assert default_local('https://h2/ds') != kept  # the URL without a login never had it
    legacy = hashlib.blake2b(redact_url('https://u:pw@h/ds').encode(), digest_size=16).hexdigest()
    assert legacy in remote_keys('https://u:pw2@h/ds')



def test_a_remote_with_a_query_string_is_refused_saying_where_the_credential_goes(http_server: StaticServer,
                                                                                   tmp_path: Any) -> None:
    """File names are joined onto ``remote`` as onto a directory, so ``https://host/ds?sig=...`` would ask for
    ``/ds`` with the query ``sig=.../index.json``: the dataset is refused at construction, with the signature
    hidden and the place a credential goes named, never read as a web page that is not an index."""
    from streaming_core import StreamingDataset
    from tests.fixtures.data import write_mds
    need_module('streaming_mds')
    name = f'dataset-{uuid.uuid4().hex[:8]}'
    write_mds(os.path.join(http_server.root, name), 40)
    token = f'tok-{uuid.uuid4().hex}'
    for remote in (f'{http_server.url}/{name}?sig={token}', f'{http_server.url}/{name}#part'):
        with pytest.raises(ValueError, match='query string or fragment') as info:
            StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4)
        assert token not in str(info.value) and "'bearer_token'" in str(info.value)
        assert not os.path.exists(tmp_path / 'local')
    plain = StreamingDataset(remote=f'{http_server.url}/{name}', local=str(tmp_path / 'local'), batch_size=4,
                             storage_options={'bearer_token': token})
    assert [int(s['id']) for s in plain] == list(range(40))


def test_an_index_rewritten_within_the_second_of_its_last_modified_is_downloaded_again(
        http_server: StaticServer, tmp_path: Any) -> None:
    """A web server without ``ETag`` (Python's, many static servers) dates a file to the second: a dataset rewritten
    with the same sizes within the second of the previous write keeps ``index.json``'s size and ``Last-Modified``.
    A check made within two seconds of that time does not name the version by that stat alone, so the next
    construction downloads the index again and reads the new version (it was served the old one, hashes and
    all). The modification times are set as such a rewrite leaves them."""
    import time

    from streaming_core import StreamingDataset
    from tests.fixtures.data import write_mds
    need_module('streaming_mds')
    name = f'dataset-{uuid.uuid4().hex[:8]}'
    remote, local = os.path.join(http_server.root, name), str(tmp_path / 'local')
    second = int(time.time())
    write_mds(remote, 10, hashes=['xxh64'])
    os.utime(os.path.join(remote, 'index.json'), (second, second))
    first = StreamingDataset(remote=f'{http_server.url}/{name}', local=local, batch_size=1)
    assert [int(s['id']) for s in first] == list(range(10))
    write_mds(remote, 10, start=100, hashes=['xxh64'], exist_ok=True)  # same names and sizes, other hashes
    os.utime(os.path.join(remote, 'index.json'), (second, second))
    again = StreamingDataset(remote=f'{http_server.url}/{name}', local=local, batch_size=1)
    assert [int(s['id']) for s in again] == list(range(100, 110))
    identity = again.streams[0].index_identity
    assert identity != first.streams[0].index_identity and ';sha256=' in identity  # one stat, two versions
    # Later jobs, within the uncertain seconds (the same bytes downloaded again) and after them (the stat trusted),
    # name version 2 as it did: never the first version's name, whose binary index holds version 1's table.
    while time.time() < second + 2.5:
        same = StreamingDataset(remote=f'{http_server.url}/{name}', local=local, batch_size=1)
        assert same.streams[0].index_identity == identity
        time.sleep(0.5)
    settled = StreamingDataset(remote=f'{http_server.url}/{name}', local=local, batch_size=1)
    assert settled.streams[0].index_identity == identity
    assert [int(s['id']) for s in settled] == list(range(100, 110))
    from streaming_core.reading.cache_record import coarse_mtime
    assert coarse_mtime('stat:size=5;mtime=1764287101') == 1764287101.0  # SFTP's st_mtime
    assert coarse_mtime('stat:size=5;mtime=1764287101090') == 1764287101.09  # DBFS's, in milliseconds
    assert coarse_mtime('stat:size=5;mtime=Fri, 27 Nov 2026 23:45:01 GMT') == 1795823101.0
    assert coarse_mtime('stat:etag="ab";size=5;mtime=Fri, 27 Nov 2026 23:45:01 GMT') is None  # an etag tells
    assert coarse_mtime('stat:size=5;mtime=1764287101000000000;inode=7;ctime=1') is None  # a local file's


def _trickle_server(body: bytes, stop: Any, gets: list[str]) -> tuple[Any, str]:
    """A server that answers at once, then sends ``body`` a byte every 0.2 s until ``stop`` is set (each GET's path
    appended to ``gets``): ``(server, url of a shard on it)``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            gets.append(self.path)
            self.send_response(200)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            for i in range(len(body)):
                if stop.wait(0.2):
                    return
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()

    server = ThreadingHTTPServer(('127.0.0.1', 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()
    return server, f'http://127.0.0.1:{server.server_address[1]}/shard.00000.mds'


def test_a_body_that_trickles_in_is_abandoned_within_the_timeout_and_its_size(tmp_path: Any) -> None:
    """A server that answers at once and then sends a byte every 0.2 s never lets a read wait for its timeout; each
    attempt of a download whose size is known still ends within ``timeout + size / 64 KiB/s``, and fails as a
    retryable StorageError naming the URL (it ran for ever). What the abandoned attempt wrote is removed."""
    import threading
    import time

    from streaming_core.storage.facade import MIN_DOWNLOAD_RATE
    body = os.urandom(4000)
    stop = threading.Event()
    server, url = _trickle_server(body, stop, [])
    target = tmp_path / 'out' / 'shard.00000.mds'
    started = time.monotonic()
    try:
        with pytest.raises(StorageError, match='did not finish within .* sends too slowly') as info:
            download_file(url, str(target), timeout=1, retries=1, expected_size=len(body), **FAST)
        elapsed = time.monotonic() - started
        assert elapsed < 2 * (1 + len(body) / MIN_DOWNLOAD_RATE) + 2, elapsed
        assert url in str(info.value) and not isinstance(info.value, PermanentStorageError)
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    deadline = time.monotonic() + 10
    while os.listdir(tmp_path / 'out') and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(tmp_path / 'out') == []


def test_an_abandoned_attempt_removing_its_file_first_leaves_the_download_retryable(tmp_path: Any,
                                                                                  monkeypatch: Any) -> None:
    """An attempt given up for its time and the thread still running it both remove its temporary file. When the
    thread got there first, the attempt's own removal met FileNotFoundError, which replaced the retryable timeout:
    the download failed without its retries (a fresh-clone run: two ranks of the fault-injection test failed, and a
    stalled shard had 2 GETs for 3 attempts). Here the thread always wins that race."""
    import threading
    body = os.urandom(4000)
    stop = threading.Event()
    gets: list[str] = []
    real_remove = os.remove

    def the_thread_first(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith('.tmp') and threading.current_thread() is threading.main_thread():
            try:
                real_remove(path)  # the abandoned attempt's thread removes it just before
            except FileNotFoundError:
                pass
        real_remove(path, *args, **kwargs)

    server, url = _trickle_server(body, stop, gets)
    monkeypatch.setattr(os, 'remove', the_thread_first)
    try:
        with pytest.raises(StorageError, match='did not finish within .* sends too slowly'):
            download_file(url, str(tmp_path / 'out' / 'shard.00000.mds'), timeout=0.5, retries=2,
                          expected_size=len(body), **FAST)
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    assert len(gets) == 3, gets  # every attempt made
