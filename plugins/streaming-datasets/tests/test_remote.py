"""Converting straight to object storage (moto's S3 server on loopback), in one process and in parallel."""

from __future__ import annotations

import uuid

import pytest

from streaming_datasets import StreamingC4, WriterOptions, convert_c4

pytestmark = pytest.mark.slow


@pytest.fixture
def s3(moto_server, cloud_env):
    from tests.fixtures.servers import need_module
    need_module('boto3')
    need_module('streaming_s3')
    import boto3
    bucket = f'recipes-{uuid.uuid4().hex[:12]}'
    boto3.client('s3', endpoint_url=moto_server.url, aws_access_key_id='testing', aws_secret_access_key='testing',
                 region_name='us-east-1').create_bucket(Bucket=bucket)
    return f's3://{bucket}', {'endpoint_url': moto_server.url, 'aws_access_key_id': 'testing',
                              'aws_secret_access_key': 'testing', 'region': 'us-east-1'}


@pytest.mark.parametrize('workers', [1, 2])
def test_convert_to_s3_and_stream_back(c4_source, s3, tmp_path, workers):
    source, expected = c4_source
    root, options = s3
    out = f'{root}/c4-{workers}'
    results = convert_c4(source, out, splits=['train'], options=WriterOptions(
        workers=workers, size_limit=1 << 9, compression='zstd', progress=False, storage_options=options))
    assert results['train'].out == f'{out}/train' and results['train'].partitions == workers
    dataset = StreamingC4(remote=out, local=str(tmp_path / 'cache'), split='train', shuffle=True, batch_size=2,
                          storage_options=options)
    got = list(dataset)
    assert sorted(tuple(sorted(r.items())) for r in got) == sorted(tuple(sorted(r.items())) for r in expected['train'])
    ordered = StreamingC4(remote=out, local=str(tmp_path / 'cache2'), split='train', batch_size=1,
                          storage_options=options)
    assert list(ordered) == expected['train']  # the parallel conversion kept the source order
    with pytest.raises(FileExistsError, match='already holds a dataset'):
        convert_c4(source, out, splits=['train'], options=WriterOptions(
            workers=workers, progress=False, storage_options=options))
