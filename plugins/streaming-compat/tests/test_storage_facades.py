"""``streaming.base.storage``'s uploader and downloader classes against the real loopback servers (moto's S3,
gcp-storage-emulator), configured the reference's way (environment variables), and the providers that are refused."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import streaming
from streaming.base.storage import (
    AlipanDownloader,
    CloudDownloader,
    CloudUploader,
    GCSDownloader,
    GCSUploader,
    LocalDownloader,
    LocalUploader,
    S3Downloader,
    S3Uploader,
)

from streaming_core.machinery.lookup import get_registry
from streaming_core.storage.facade import clear_backend_cache
from tests.fixtures.servers import RunningServer

BUCKET = 'compat-facades'


@pytest.fixture
def fresh() -> Iterator[None]:
    clear_backend_cache()
    yield
    clear_backend_cache()


@pytest.fixture
def s3_env(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch, fresh: None) -> str:
    """The reference's S3 set-up: credentials and ``S3_ENDPOINT_URL`` in the environment; returns a fresh prefix."""
    import boto3
    for name, value in (('AWS_ACCESS_KEY_ID', 'testing'), ('AWS_SECRET_ACCESS_KEY', 'testing'),
                        ('AWS_DEFAULT_REGION', 'us-east-1'), ('S3_ENDPOINT_URL', moto_server.url)):
        cloud_env.setenv(name, value)
    client = boto3.client('s3', endpoint_url=moto_server.url)
    if BUCKET not in [b['Name'] for b in client.list_buckets().get('Buckets', [])]:
        client.create_bucket(Bucket=BUCKET)
    return f's3://{BUCKET}/{uuid.uuid4().hex[:8]}'


@pytest.mark.slow
def test_s3_writer_uploader_downloader_and_dataset(s3_env: str, tmp_path: Any) -> None:
    remote = f'{s3_env}/ds'
    with streaming.MDSWriter(out=remote, columns={'i': 'int'}, size_limit=64, compression='zstd') as writer:
        for i in range(20):
            writer.write({'i': i})
    uploader = CloudUploader.get((str(tmp_path / 'up'), f'{s3_env}/extra'))
    assert type(uploader) is S3Uploader
    (tmp_path / 'up' / 'note.txt').write_text('hi')
    uploader.upload_file('note.txt')
    assert not (tmp_path / 'up' / 'note.txt').exists()  # keep_local=False removes it after the upload
    keys = uploader.list_objects()
    assert keys == [f'{s3_env.split("/", 3)[3]}/extra/note.txt']
    downloader = CloudDownloader.get(remote)
    assert type(downloader) is S3Downloader
    target = str(tmp_path / 'dl' / 'index.json')
    downloader.download(f'{remote}/index.json', target)
    assert os.path.getsize(target) > 0
    CloudDownloader.direct_download(f'{s3_env}/extra/note.txt', str(tmp_path / 'note.txt'))
    assert (tmp_path / 'note.txt').read_text() == 'hi'
    with pytest.raises(ValueError, match='Expected remote path to start with url scheme'):
        downloader.download('gs://bucket/x', str(tmp_path / 'other'))
    with pytest.raises(FileNotFoundError):
        downloader.download(f'{remote}/missing.bin', str(tmp_path / 'missing.bin'))
    dataset = streaming.StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4)
    assert sorted(s['i'] for s in dataset) == list(range(20))


@pytest.mark.slow
def test_gcs_through_the_emulator(gcs_emulator: RunningServer, cloud_env: pytest.MonkeyPatch, fresh: None,
                                  tmp_path: Any) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    client = storage.Client(project='test', credentials=AnonymousCredentials(),
                            client_options={'api_endpoint': gcs_emulator.url})
    bucket = f'compat-{uuid.uuid4().hex[:8]}'
    client.create_bucket(bucket)
    cloud_env.setenv('STORAGE_EMULATOR_HOST', gcs_emulator.url.removeprefix('http://'))
    uploader = CloudUploader.get((str(tmp_path / 'up'), f'gs://{bucket}/data'), keep_local=True)
    assert type(uploader) is GCSUploader
    (tmp_path / 'up' / 'a.bin').write_bytes(b'abc')
    uploader.upload_file('a.bin')
    assert (tmp_path / 'up' / 'a.bin').exists()  # keep_local=True
    assert uploader.list_objects() == ['data/a.bin']
    downloader = CloudDownloader.get(f'gs://{bucket}/data/a.bin')
    assert type(downloader) is GCSDownloader
    downloader.download(f'gs://{bucket}/data/a.bin', str(tmp_path / 'b.bin'))
    assert (tmp_path / 'b.bin').read_bytes() == b'abc'


def test_local_uploader_and_downloader(tmp_path: Any) -> None:
    uploader = CloudUploader.get(str(tmp_path / 'only-local'))
    assert type(uploader) is LocalUploader and uploader.remote is None
    (tmp_path / 'only-local' / 'sub').mkdir()
    for name in ('b.txt', 'a.txt', 'sub/c.txt'):
        (tmp_path / 'only-local' / name).write_text(name)
    uploader.upload_file('a.txt')  # nothing to upload to: the file stays
    local = str(tmp_path / 'only-local')
    assert uploader.list_objects() == [os.path.join(local, n) for n in ('a.txt', 'b.txt', 'sub/c.txt')]
    assert uploader.list_objects('sub') == [os.path.join(local, 'sub/c.txt')]
    copy = CloudUploader.get((str(tmp_path / 'work'), str(tmp_path / 'mirror')))
    (tmp_path / 'work' / 'f.txt').write_text('f')
    copy.upload_file('f.txt')
    assert (tmp_path / 'mirror' / 'f.txt').read_text() == 'f' and not (tmp_path / 'work' / 'f.txt').exists()
    with pytest.raises(FileExistsError, match='Directory is not empty'):
        CloudUploader.get(local)
    with pytest.warns(UserWarning, match='its contents are removed'):
        emptied = CloudUploader.get(local, exist_ok=True)
    assert emptied.list_objects() == []
    with pytest.raises(ValueError, match='Invalid `out` argument'):
        CloudUploader.get(('a', 'b', 'c'))
    downloader = CloudDownloader.get(None)
    assert type(downloader) is LocalDownloader
    downloader.download(str(tmp_path / 'mirror' / 'f.txt'), str(tmp_path / 'got' / 'f.txt'))
    assert (tmp_path / 'got' / 'f.txt').read_text() == 'f'
    downloader.download(None, str(tmp_path / 'got' / 'f.txt'))  # present locally: nothing to do
    with pytest.raises(ValueError, match='path to remote dataset must be provided'):
        downloader.download(None, str(tmp_path / 'absent'))


def test_alipan_is_not_supported() -> None:
    with pytest.raises(NotImplementedError, match='alipan:// .* is not supported by streaming-compat'):
        CloudDownloader.get('alipan:///data/x')
    with pytest.raises(NotImplementedError, match='not supported'):
        AlipanDownloader()
    with pytest.raises(NotImplementedError, match='not supported'):
        CloudUploader.get('alipan:///data')


@pytest.mark.parametrize('url,dist', [('hf://datasets/org/repo/x', 'streaming-hf'),
                                      ('dbfs:/Volumes/cat/schema/vol/x', 'streaming-databricks'),
                                      ('dbfs:/tmp/x', 'streaming-databricks'),
                                      ('sftp://host/path/x', 'streaming-sftp')])
def test_later_providers_name_their_plugin_or_route_through_the_registry(url: str, dist: str) -> None:
    scheme = url.split(':', 1)[0]
    if scheme in get_registry('storage'):  # the plugin is installed: the facade routes through it
        assert CloudDownloader.get(url)._client_identifier in (scheme, 'dbfs-uc')
    else:
        with pytest.raises(NotImplementedError, match=f'pip install {dist}'):
            CloudDownloader.get(url)


def test_unknown_scheme_is_a_value_error() -> None:
    with pytest.raises(ValueError, match='Unsupported remote path: nope://x'):
        CloudDownloader.get('nope://x')
    with pytest.raises(ValueError):
        CloudUploader.get('nope://x')


@pytest.mark.slow
def test_azure_upload_form_and_download_form(azurite: Any, cloud_env: pytest.MonkeyPatch, fresh: None,
                                             tmp_path: Any) -> None:
    """The reference uploads to ``azure://<container>/<path>`` but downloads ``azure://<account>/<container>/<path>``;
    both forms reach the same blob here (Azurite, configured by ``AZURE_STORAGE_CONNECTION_STRING``)."""
    from azure.storage.blob import BlobServiceClient
    container = f'compat{uuid.uuid4().hex[:8]}'
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    cloud_env.setenv('AZURE_STORAGE_CONNECTION_STRING', azurite.connection_string)
    uploader = CloudUploader.get((str(tmp_path / 'up'), f'azure://{container}/ds'))
    assert type(uploader).__name__ == 'AzureUploader'
    (tmp_path / 'up' / 'x.bin').write_bytes(b'blob')
    uploader.upload_file('x.bin')
    downloader = CloudDownloader.get(f'azure://{azurite.account}/{container}/ds/x.bin')
    assert type(downloader).__name__ == 'AzureDownloader'
    downloader.download(f'azure://{azurite.account}/{container}/ds/x.bin', str(tmp_path / 'x.bin'))
    assert (tmp_path / 'x.bin').read_bytes() == b'blob'


@pytest.mark.slow
def test_oci_through_the_config_file(oci_config: Any, cloud_env: pytest.MonkeyPatch, fresh: None,
                                     tmp_path: Any) -> None:
    """OCI the reference's way (a config file), with the endpoint of the loopback server."""
    bucket = f'compat-{uuid.uuid4().hex[:8]}'
    oci_config.server.create_bucket(bucket)
    cloud_env.setenv('OCI_CONFIG_FILE', oci_config.config_file)
    cloud_env.setenv('OCI_CONFIG_PROFILE', oci_config.profile)
    cloud_env.setenv('OCI_SERVICE_ENDPOINT', oci_config.server.url)
    remote = f'oci://{bucket}/ds'
    with streaming.MDSWriter(out=remote, columns={'i': 'int'}) as writer:
        for i in range(7):
            writer.write({'i': i})
    uploader = CloudUploader.get((str(tmp_path / 'up'), remote))
    assert type(uploader).__name__ == 'OCIUploader'
    assert sorted(uploader.list_objects()) == ['ds/index.json', 'ds/shard.00000.mds']
    dataset = streaming.StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1)
    assert [s['i'] for s in dataset] == list(range(7))


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, fresh: None) -> Iterator[Any]:
    """A loopback Hugging Face Hub (streaming_hf.testing), ``HF_ENDPOINT`` pointing at it, no token."""
    from streaming_hf import backend
    from streaming_hf.testing import HubServer
    server = HubServer()
    for name in ('HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN', 'HF_TOKEN_PATH'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf-home'))
    monkeypatch.setenv('HF_ENDPOINT', server.url)
    backend._PINS.clear()
    backend._LISTINGS.clear()
    try:
        yield server
    finally:
        server.close()
        backend._PINS.clear()
        backend._LISTINGS.clear()
        for name in [n for n in os.environ if n.startswith(backend.PIN_ENV_PREFIX)]:
            os.environ.pop(name, None)


def test_hf_downloader_and_dataset_read_the_hub(hub: Any, tmp_path: Any) -> None:
    """The reference's ``hf://datasets/<org>/<repo>/<path>`` form: ``HFDownloader`` fetches one file, and an
    unmodified ``streaming.StreamingDataset(remote='hf://...')`` reads an MDS dataset pushed to the Hub."""
    from streaming import MDSWriter, StreamingDataset
    from streaming.base.storage import HFDownloader
    written = tmp_path / 'written'
    with MDSWriter(out=str(written), columns={'id': 'int'}, size_limit=1 << 8) as writer:
        for i in range(50):
            writer.write({'id': i})
    files = {f'mds/{name}': (written / name).read_bytes() for name in os.listdir(written)}
    assert len(files) > 2
    hub.state.repo('datasets', 'me/data').push(files)
    downloader = CloudDownloader.get('hf://datasets/me/data/mds/index.json')
    assert isinstance(downloader, HFDownloader)
    downloader.download('hf://datasets/me/data/mds/index.json', str(tmp_path / 'index.json'))
    assert (tmp_path / 'index.json').read_bytes() == files['mds/index.json']
    dataset = StreamingDataset(remote='hf://datasets/me/data/mds', local=str(tmp_path / 'cache'), batch_size=5,
                               shuffle=True)
    assert sorted(sample['id'] for sample in dataset) == list(range(50))
