"""What a reader already has when running a documentation page: the preludes of ``tests/test_docs_pages.py``.

Each prelude runs before its page's blocks, in the page's process and working directory (an empty temporary
directory). ``S3_ENDPOINT_URL`` points at a moto server whose buckets are empty; ``DOCS_HTTP_URL`` and
``DOCS_HTTP_ROOT`` name a static HTTP server and the directory it serves, for the pages listed in :data:`SERVERS`.
"""

from __future__ import annotations

#: Functions every prelude may use.
HELPERS = '''
import os

import numpy as np


def write_mds(out, columns, samples, **kwargs):
    """Write ``samples`` (dicts) as an MDS dataset at ``out``: data the reader already has."""
    from streaming_mds import MDSWriter
    with MDSWriter(out=out, columns=columns, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)


def image(seed, size=(16, 12), mode='RGB'):
    """A small random PIL image."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0], 3) if mode == 'RGB' else (size[1], size[0])
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)


def aws_profile(name):
    """Add profile ``name`` (moto's test keys) to ~/.aws/credentials."""
    os.makedirs(os.path.expanduser('~/.aws'), exist_ok=True)
    with open(os.path.expanduser('~/.aws/credentials'), 'a') as handle:
        handle.write(f'[{name}]\\naws_access_key_id = testing\\naws_secret_access_key = testing\\n')


def texts(count, words=8):
    """``count`` small English-ish documents."""
    vocab = ['the', 'data', 'streams', 'into', 'training', 'from', 'object', 'storage']
    return [' '.join(vocab[(i * 7 + k) % len(vocab)] for k in range(words + i % 5)) for i in range(count)]
'''

#: Server placeholders a reader replaces with their own values: page -> {text in the page: Python expression}.
FILL_IN: dict[str, dict[str, str]] = {
    'docs/storage/s3.md': {"'https://<ACCOUNT_ID>.r2.cloudflarestorage.com'": "os.environ['S3_ENDPOINT_URL']",
                           "'http://minio.internal:9000'": "os.environ['S3_ENDPOINT_URL']"},
    'docs/storage/index.md': {"'https://<account>.r2.cloudflarestorage.com'": "os.environ['S3_ENDPOINT_URL']"},
    'docs/storage/http.md': {"'https://data.example.com/datasets/train'": "os.environ['DOCS_HTTP_URL'] + '/train'"},
    'docs/storage/azure.md': {"'http://127.0.0.1:10000/devstoreaccount1'": "os.environ['DOCS_AZURE_URL']",
                              "'<the well-known Azurite key>'": "os.environ['DOCS_AZURE_KEY']"},
}

#: Blocks that are modules of the reader's project, not statements: page -> {block number: path under the working
#: directory}.
MODULES: dict[str, dict[int, str]] = {'docs/plugins/writing.md': {0: 'streaming_example_plugin/plugin.py'}}

#: Pages that need servers besides moto S3.
SERVERS: dict[str, tuple[str, ...]] = {'docs/storage/http.md': ('http',), 'docs/storage/azure.md': ('azurite',)}

_ID_COLUMNS = "{'id': 'int', 'text': 'str'}"

PRELUDES: dict[str, str] = {
    'README.md': '''
samples = [(np.full((28, 28), i % 256, np.uint8), i % 10) for i in range(300)]
''',
    'docs/quickstart.md': '''
import torch


def my_samples():
    rng = np.random.default_rng(0)
    for i in range(500):
        yield rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), i % 10, f'sample {i}'


def train_step(images, labels):
    assert tuple(images.shape[1:]) == (32, 32, 3) and len(labels) == len(images)


model = torch.nn.Linear(4, 2)
''',
    'docs/guide/reading.md': f'''
aws_profile('books')
write_mds('s3://bucket/web', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(70))))
write_mds('s3://other/books', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(30))))
write_mds('s3://bucket/images', {{'image': 'png', 'label': 'int'}},
          ({{'image': image(i, (40, 30)), 'label': i % 3}} for i in range(64)))
''',
    'docs/guide/writing.md': f'''
for i in range(2):
    write_mds(f's3://bucket/dataset/{{i}}', {_ID_COLUMNS}, ({{'id': k, 'text': 'x'}} for k in range(5)))
    write_mds(f'out/ds/{{i}}', {_ID_COLUMNS}, ({{'id': k, 'text': 'x'}} for k in range(5)))
''',
    'docs/guide/cache.md': '',
    'docs/guide/distributed.md': f'''
import socket

with socket.socket() as sock:
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
os.environ.update(RANK='0', WORLD_SIZE='1', LOCAL_WORLD_SIZE='1', MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
write_mds('s3://bucket/ds', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(200))))
r, n = 3, 16
''',
    'docs/storage/s3.md': f'''
for remote in ('s3://my-r2-bucket/train', 's3://aws-bucket/a', 's3://r2-bucket/b', 's3://minio-bucket/c'):
    write_mds(remote, {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(40))))
''',
    'docs/storage/index.md': f'''
aws_profile('prod')
for remote in ('s3://my-bucket/train', 's3://r2-bucket/train'):
    write_mds(remote, {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(40))))
''',
    'docs/storage/http.md': f'''
write_mds(os.path.join(os.environ['DOCS_HTTP_ROOT'], 'train'), {_ID_COLUMNS},
          ({{'id': i, 'text': t}} for i, t in enumerate(texts(40))))
''',
    'docs/plugins/writing.md': '''
import sys

# the page's plugin, installed: its package, and a distribution whose entry point names it
sys.path.insert(0, os.getcwd())
open('streaming_example_plugin/__init__.py', 'w').close()
os.makedirs('streaming_example_plugin-0.1.0.dist-info')
with open('streaming_example_plugin-0.1.0.dist-info/METADATA', 'w') as handle:
    handle.write('Metadata-Version: 2.1\\nName: streaming-example-plugin\\nVersion: 0.1.0\\n')
with open('streaming_example_plugin-0.1.0.dist-info/entry_points.txt', 'w') as handle:
    handle.write('[streaming_core]\\nexample = streaming_example_plugin.plugin\\n')
''',
    'docs/guide/simulator.md': f'''
write_mds('s3://bucket/train', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(300))),
          size_limit=2000)
''',
    'docs/guide/conversion.md': f'''
import json
import sys

os.makedirs('data')
for part in range(3):
    with open(f'data/part-{{part}}.jsonl', 'w') as handle:
        for i, text in enumerate(texts(40)):
            handle.write(json.dumps({{'id': part * 100 + i, 'text': text}}) + '\\n')
for name in ('a', 'b'):
    write_mds(f'out/{{name}}', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(10))))
os.environ['PYSPARK_PYTHON'] = os.environ['PYSPARK_DRIVER_PYTHON'] = sys.executable
from pyspark.sql import SparkSession  # noqa: E402

spark = (SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false')
         .config('spark.sql.shuffle.partitions', '2').config('spark.driver.memory', '1g').getOrCreate())
spark.sparkContext.setLogLevel('ERROR')
df = spark.createDataFrame([(i, t) for i, t in enumerate(texts(100))], 'id long, text string')
''',
    'docs/storage/azure.md': '''
from azure.storage.blob import BlobServiceClient

service = BlobServiceClient(os.environ['DOCS_AZURE_URL'], credential={
    'account_name': 'devstoreaccount1', 'account_key': os.environ['DOCS_AZURE_KEY']})
if service.get_container_client('my-container').exists():
    service.delete_container('my-container')
service.create_container('my-container')
''',
}
