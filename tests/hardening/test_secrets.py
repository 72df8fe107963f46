"""Secrets stay secret: credentials and signed URLs never appear in exception messages (with their causes, notes
and tracebacks), in log records at DEBUG (ours and boto3/botocore/urllib3/azure's), in anything printed, or in the
``repr()`` of datasets, streams, writers and backends.

Each store is driven end to end through a fault proxy on loopback: a dataset is written, streamed, then made to
fail every way a user sees (a 503 that outlasts the retries, access denied, a reset, a missing index, a failed
upload), and everything those produce is searched for the test credentials.
"""

from __future__ import annotations

import logging
import os
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.errors import StreamingError
from streaming_core.storage.facade import clear_backend_cache, download_file, get_backend
from tests.fixtures.data import write_mds
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.servers import AzuriteInfo, RunningServer, StaticServer
from tests.hardening.conftest import BUCKET, S3Place

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LOGGERS = ['', 'streaming_core', 'streaming_s3', 'streaming_gcs', 'streaming_azure', 'botocore', 'boto3',
           's3transfer', 'urllib3', 'azure', 'azure.core.pipeline.policies.http_logging_policy', 'google',
           'google.auth', 'google.cloud']


@dataclass
class Evidence:
    """Everything a user could see: error texts (with causes, notes, tracebacks) and object reprs."""

    texts: list[str] = field(default_factory=list)

    def error(self, err: BaseException) -> None:
        self.texts.append(''.join(traceback.format_exception(err)))
        self.texts.append(repr(err))
        for note in getattr(err, '__notes__', []):
            self.texts.append(note)

    def repr_of(self, *objects: Any) -> None:
        self.texts.extend(repr(obj) for obj in objects)
        self.texts.extend(str(obj) for obj in objects)

    def expect_error(self, action: Callable[[], Any], error: type[BaseException] = StreamingError) -> BaseException:
        with pytest.raises(error) as info:
            action()
        self.error(info.value)
        return info.value


@pytest.fixture
def evidence(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> Iterator[Evidence]:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    found = Evidence()
    yield found


def assert_secret_free(evidence: Evidence, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
                       secrets: list[str]) -> None:
    out, err = capfd.readouterr()
    records = []
    for record in caplog.records:
        records.append(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            records.append(''.join(traceback.format_exception(record.exc_info[1])))
    texts = [*evidence.texts, *records, out, err]
    assert records, 'logging was not captured'
    for secret in secrets:
        leaks = [text for text in texts if secret in text]
        assert not leaks, f'secret {secret[:6]}... leaked in: {leaks[0][:2000]}'


def iterate(remote: str, local: str, options: dict[str, Any] | None) -> list[Any]:
    dataset = StreamingDataset(streams=[Stream(remote=remote, local=local, storage_options=options)], batch_size=4,
                               download_retry=1, download_timeout=5)
    return list(dataset)


def exercise_reads(evidence: Evidence, proxy: FaultProxy, remote: str, options: dict[str, Any] | None,
                   tmp: Any) -> None:
    """Stream ``remote`` once cleanly, then through each failure; collect what the user sees."""
    dataset = StreamingDataset(streams=[Stream(remote=remote, local=str(tmp / 'ok'), storage_options=options)],
                               batch_size=4, download_retry=1, download_timeout=5)
    assert len(list(dataset)) == 40
    evidence.repr_of(dataset, *dataset.streams, get_backend(remote, options))
    for n, fault in enumerate([lambda: proxy.fail(None, 503, method='GET', path=r'shard\.00001'),
                               lambda: proxy.fail(None, 403, method='GET', path=r'shard\.00001'),
                               lambda: proxy.reset(None, method='GET', path=r'shard\.00001'),
                               lambda: proxy.truncate(None, keep=10, method='GET', path=r'shard\.00001')]):
        proxy.clear()
        fault()
        err = evidence.expect_error(lambda n=n: iterate(remote, str(tmp / f'fail{n}'), options))
        assert 'shard.00001' in str(err)
    proxy.clear()
    evidence.expect_error(lambda: iterate(remote + '-missing', str(tmp / 'missing'), options), FileNotFoundError)


def exercise_writes(evidence: Evidence, proxy: FaultProxy, remote: str, options: dict[str, Any]) -> None:
    """Write through the proxy cleanly, then with every upload failing."""
    from streaming_mds import MDSWriter
    proxy.clear()
    writer = MDSWriter(out=remote, columns={'id': 'int', 'data': 'bytes'}, size_limit=1 << 10,
                       storage_options=options, retry=2, upload_timeout=5)
    evidence.repr_of(writer)
    for i in range(40):
        writer.write({'id': i, 'data': b'x' * 32})
    writer.finish()
    proxy.fail(None, 503, method='PUT')
    writer = MDSWriter(out=remote + '-failing', columns={'id': 'int', 'data': 'bytes'}, size_limit=1 << 10,
                       storage_options=options, retry=2, upload_timeout=5)

    def write() -> None:
        with writer:
            for i in range(40):
                writer.write({'id': i, 'data': b'x' * 32})
    evidence.expect_error(write)
    evidence.repr_of(writer)
    proxy.clear()


def test_s3_secret_key(s3: S3Place, fault_proxy: Callable[[str], FaultProxy], tmp_path: Any, evidence: Evidence,
                       caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    proxy = fault_proxy(s3.server)
    options = s3.via(proxy.url)
    exercise_writes(evidence, proxy, s3.url('ds'), options)
    exercise_reads(evidence, proxy, s3.url('ds'), options, tmp_path)
    assert_secret_free(evidence, caplog, capfd, [s3.options['aws_secret_access_key']])


def test_s3_session_token(s3: S3Place, tmp_path: Any, evidence: Evidence, caplog: pytest.LogCaptureFixture,
                          capfd: pytest.CaptureFixture[str]) -> None:
    token = f'HARDENING-TOKEN-{uuid.uuid4().hex}'
    options = {**s3.options, 'aws_session_token': token}
    write_mds(s3.url('ds'), 40, size_limit=1 << 10, storage_options=options)
    assert len(iterate(s3.url('ds'), str(tmp_path / 'local'), options)) == 40
    evidence.expect_error(lambda: iterate(s3.url('missing'), str(tmp_path / 'missing'), options), FileNotFoundError)
    assert_secret_free(evidence, caplog, capfd, [token])


def test_gcs_hmac_secret(moto_server: RunningServer, hardening_bucket: str, cloud_env: pytest.MonkeyPatch,
                         fault_proxy: Callable[[str], FaultProxy], tmp_path: Any, evidence: Evidence,
                         caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip('streaming_gcs')
    clear_backend_cache()
    secret = f'GCS-HMAC-SECRET-{uuid.uuid4().hex}'
    proxy = fault_proxy(moto_server.url)  # GCS's XML API in HMAC mode is S3's: moto stands in for it
    options = {'hmac_key': 'GOOG1HARDENING', 'hmac_secret': secret, 'endpoint': proxy.url}
    remote = f'gs://{BUCKET}/gcs-{uuid.uuid4().hex[:8]}'
    exercise_writes(evidence, proxy, remote, options)
    exercise_reads(evidence, proxy, remote, options, tmp_path)
    assert_secret_free(evidence, caplog, capfd, [secret])


def test_azure_account_key(azurite: AzuriteInfo, cloud_env: pytest.MonkeyPatch,
                           fault_proxy: Callable[[str], FaultProxy], tmp_path: Any, evidence: Evidence,
                           caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    from azure.storage.blob import BlobServiceClient
    clear_backend_cache()
    container = f'hardening{uuid.uuid4().hex[:8]}'
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    proxy = fault_proxy(azurite.url)
    options = {'account_url': f'{proxy.url}/{azurite.account}', 'account_key': azurite.key}
    remote = f'azure://{container}/ds'
    exercise_writes(evidence, proxy, remote, options)
    exercise_reads(evidence, proxy, remote, options, tmp_path)
    connection = {'connection_string': azurite.connection_string.replace(azurite.url, proxy.url)}
    proxy.fail(None, 503, method='GET')
    evidence.expect_error(lambda: iterate(remote, str(tmp_path / 'by-connection-string'), connection))
    evidence.repr_of(get_backend(remote, connection))
    assert_secret_free(evidence, caplog, capfd, [azurite.key])


@pytest.mark.parametrize('how', ['bearer_token', 'headers', 'basic_auth', 'userinfo'])
def test_http_tokens_and_passwords(http_server: StaticServer, fault_proxy: Callable[[str], FaultProxy],
                                   tmp_path: Any, evidence: Evidence, caplog: pytest.LogCaptureFixture,
                                   capfd: pytest.CaptureFixture[str], how: str) -> None:
    secret = f'HTTP-SECRET-{uuid.uuid4().hex}'
    name = f'ds-{uuid.uuid4().hex[:8]}'
    write_mds(os.path.join(http_server.root, name), 40, size_limit=1 << 10)
    proxy = fault_proxy(http_server.url)
    base = proxy.url
    options: dict[str, Any] | None = {
        'bearer_token': {'bearer_token': secret}, 'headers': {'headers': {'Authorization': f'Bearer {secret}'}},
        'basic_auth': {'basic_auth': ('trainer', secret)}, 'userinfo': None}[how]
    if how == 'userinfo':
        base = base.replace('http://', f'http://trainer:{secret}@')
    exercise_reads(evidence, proxy, f'{base}/{name}', options, tmp_path)
    sent = proxy.matching(method='GET', path='index.json')[0].headers.get('authorization', '')
    assert sent.startswith(('Bearer ', 'Basic ')), 'the credential was not sent at all'
    assert_secret_free(evidence, caplog, capfd, [secret])


def test_signed_url_query_is_redacted(http_server: StaticServer, fault_proxy: Callable[[str], FaultProxy],
                                      tmp_path: Any, evidence: Evidence, caplog: pytest.LogCaptureFixture,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    signature, token = uuid.uuid4().hex * 2, f'SAS-{uuid.uuid4().hex}'
    with open(os.path.join(http_server.root, 'object.bin'), 'wb') as handle:
        handle.write(b'payload')
    proxy = fault_proxy(http_server.url)
    url = (f'{proxy.url}/object.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAHARDENING%2F20260101'
           f'&X-Amz-Signature={signature}&X-Amz-Security-Token={token}&sig={signature}&se=2030-01-01')
    download_file(url, str(tmp_path / 'ok.bin'), retries=0)
    for status in (503, 403, 404):
        proxy.clear()
        proxy.fail(None, status, method='GET')
        evidence.expect_error(lambda: download_file(url, str(tmp_path / 'x.bin'), retries=1, initial_backoff=0.01))
    proxy.clear()
    proxy.truncate(None, keep=2, method='GET')
    evidence.expect_error(lambda: download_file(url, str(tmp_path / 'x.bin'), retries=1, initial_backoff=0.01,
                                                expected_size=7))
    assert_secret_free(evidence, caplog, capfd, [signature, token])
