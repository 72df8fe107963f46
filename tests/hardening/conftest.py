"""Fixtures of the hardening tests: a bucket on the session's moto S3 server, with per-test credentials."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.fixtures.servers import RunningServer

BUCKET = 'hardening'


@dataclass
class S3Place:
    """A fresh prefix in the hardening bucket, and the storage options (unique secret) that reach it."""

    server: str
    prefix: str
    options: dict[str, Any] = field(default_factory=dict)

    def url(self, *parts: str) -> str:
        """``s3://hardening/<prefix>/<parts>``."""
        return '/'.join([f's3://{BUCKET}/{self.prefix}', *parts])

    def via(self, endpoint: str) -> dict[str, Any]:
        """The same options, with the requests sent to ``endpoint`` (a fault proxy) instead."""
        return {**self.options, 'endpoint_url': endpoint}


def boto_client(endpoint: str) -> Any:
    """A plain boto3 client on the loopback server (for set-up and inspection only)."""
    import boto3
    return boto3.client('s3', endpoint_url=endpoint, aws_access_key_id='setup', aws_secret_access_key='setup',
                        region_name='us-east-1')


@pytest.fixture(scope='session')
def hardening_bucket(moto_server: RunningServer) -> str:
    boto_client(moto_server.url).create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture
def s3(moto_server: RunningServer, hardening_bucket: str, cloud_env: pytest.MonkeyPatch) -> S3Place:
    """A unique prefix and options with a unique secret key (moto accepts any credentials)."""
    from streaming_core.storage.facade import clear_backend_cache
    clear_backend_cache()
    options = {'endpoint_url': moto_server.url, 'region': 'us-east-1', 'aws_access_key_id': 'AKIAHARDENING',
               'aws_secret_access_key': f'HARDENING-SECRET-{uuid.uuid4().hex}'}
    return S3Place(moto_server.url, f'run-{uuid.uuid4().hex[:10]}', options)


def list_keys(server: str, prefix: str) -> dict[str, int]:
    """``key -> size`` of every object under ``prefix`` in the hardening bucket."""
    client = boto_client(server)
    found = {}
    for page in client.get_paginator('list_objects_v2').paginate(Bucket=BUCKET, Prefix=prefix):
        for item in page.get('Contents', ()):
            found[item['Key'][len(prefix):].lstrip('/')] = item['Size']
    return found
