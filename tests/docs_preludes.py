"""What a reader already has when running a documentation page: the preludes of ``tests/test_docs_pages.py``.

Each prelude runs before its page's blocks, in the page's process and working directory (an empty temporary
directory; a prelude that makes data does so only in the main process, and not again for a page's second script,
see :data:`SECOND_SCRIPT`). ``S3_ENDPOINT_URL`` points at a moto server whose buckets are empty; ``DOCS_HTTP_URL`` and
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
    'docs/storage/gcs.md': {"'/secrets/sa.json'": "os.path.abspath('sa.json')"},
    'docs/storage/azure.md': {"'http://127.0.0.1:10000/devstoreaccount1'": "os.environ['DOCS_AZURE_URL']",
                              "'<the well-known Azurite key>'": "os.environ['DOCS_AZURE_KEY']"},
}

#: Blocks that are modules of the reader's project, not statements: page -> {block number: path under the working
#: directory}.
MODULES: dict[str, dict[int, str]] = {'docs/plugins/writing.md': {0: 'streaming_example_plugin/plugin.py'}}

#: Pages run as two scripts, each in a fresh process (the second from this block on): a conversion script whose
#: spawned workers import it, then the training script that reads the result. Both start with the prelude.
SECOND_SCRIPT: dict[str, int] = {'docs/datasets/imagenet.md': 1, 'docs/datasets/index.md': 1}

#: Pages that need servers besides moto S3.
SERVERS: dict[str, tuple[str, ...]] = {'docs/storage/http.md': ('http',), 'docs/storage/azure.md': ('azurite',),
                                        'docs/storage/gcs.md': ('gcs',)}

_ID_COLUMNS = "{'id': 'int', 'text': 'str'}"

PRELUDES: dict[str, str] = {
    'README.md': '''
samples = [(np.full((28, 28), i % 256, np.uint8), i % 10) for i in range(300)]
''',
    'docs/quickstart.md': '''
import torch


def my_samples():
    rng = np.random.default_rng(0)
    for i in range(200):
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
    'docs/guide/huggingface.md': '''
import torch


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def forward(self, x, labels):
        out = self.layer(x.view(-1, 1))
        return {'loss': torch.nn.functional.mse_loss(out, labels.view(-1, 1)), 'logits': out}


def collate(samples):  # reads 'y', which forward() does not name: needs remove_unused_columns=False
    return {'x': torch.tensor([s['x'] for s in samples]), 'labels': torch.tensor([s['y'] for s in samples])}


model = Regression()
for split, count in (('train', 64), ('val', 16)):
    write_mds(f's3://bucket/ds/{split}', {'x': 'float32', 'y': 'float32'},
              ({'x': i / count, 'y': 2 * i / count} for i in range(count)))
''',
    'docs/storage/gcs.md': f'''
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage


class TokenEndpoint(BaseHTTPRequestHandler):
    """Google's OAuth token endpoint, for the service account below: any signed assertion gets a token."""

    def do_POST(self):
        self.rfile.read(int(self.headers['Content-Length']))
        body = json.dumps({{'access_token': 'docs-token', 'expires_in': 3600, 'token_type': 'Bearer'}}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


token_server = HTTPServer(('127.0.0.1', 0), TokenEndpoint)
threading.Thread(target=token_server.serve_forever, daemon=True).start()
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
with open('sa.json', 'w') as handle:
    json.dump({{'type': 'service_account', 'project_id': 'docs', 'private_key_id': '1', 'client_id': '1',
               'client_email': 'reader@docs.iam.gserviceaccount.com',
               'private_key': key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()).decode(),
               'token_uri': f'http://127.0.0.1:{{token_server.server_port}}/token'}}, handle)
client = storage.Client(project='test', credentials=AnonymousCredentials(),
                        client_options={{'api_endpoint': os.environ['STORAGE_EMULATOR_HOST']}})
if client.lookup_bucket('my-bucket') is None:
    client.create_bucket('my-bucket')
write_mds('gs://my-bucket/train', {_ID_COLUMNS}, ({{'id': i, 'text': t}} for i, t in enumerate(texts(40))),
          exist_ok=True)
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

#: Fake sources in the real layouts (a few samples each), as ``plugins/streaming-datasets/tests`` builds them.
_CIFAR_SOURCE = '''
import pickle


def cifar_source(root='cifar-10-batches-py'):
    os.makedirs(root)
    rng = np.random.default_rng(0)
    for name, count in [*[(f'data_batch_{i}', 6) for i in range(1, 6)], ('test_batch', 8)]:
        batch = {b'batch_label': name.encode(), b'labels': [int(v) for v in rng.integers(0, 10, count)],
                 b'data': rng.integers(0, 256, (count, 3072), dtype=np.uint8),
                 b'filenames': [f'{name}_{k}.png'.encode() for k in range(count)]}
        with open(os.path.join(root, name), 'wb') as handle:
            pickle.dump(batch, handle, protocol=2)
    names = ('airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
    with open(os.path.join(root, 'batches.meta'), 'wb') as handle:
        pickle.dump({b'label_names': [n.encode() for n in names]}, handle, protocol=2)


if __name__ == '__main__' and not os.path.exists('cifar-10-batches-py'):
    cifar_source()
'''

_TRANSFORMS = '''
import types

import torch


def to_tensor(image):
    """What torchvision.transforms.ToTensor() does to an RGB image."""
    return torch.from_numpy(np.array(image)).permute(2, 0, 1).float() / 255


transforms = types.SimpleNamespace(ToTensor=lambda: to_tensor)  # torchvision.transforms, for this page
'''


def _records(remote: str, columns: str, sample: str, count: int = 12) -> str:
    """A prelude line writing ``count`` samples (``sample``: an expression of ``i``) to ``remote``."""
    return f"write_mds({remote!r}, {columns}, ({sample} for i in range(count)))\n".replace('count', str(count))


PRELUDES.update({
    'docs/datasets/ade20k.md': _records(
        's3://bucket/ade20k/train', "{'x': 'jpeg', 'y': 'png', 'name': 'str'}",
        "{'x': image(i), 'y': image(i, mode='L'), 'name': f'ADE_train_{i:08d}'}") + '''

def joint_random_crop_and_flip(image, mask):
    """The same random horizontal flip of the image and its mask."""
    from PIL import Image
    if np.random.rand() < 0.5:
        return image.transpose(Image.FLIP_LEFT_RIGHT), mask.transpose(Image.FLIP_LEFT_RIGHT)
    return image, mask
''',
    'docs/datasets/c4.md': _records(
        's3://bucket/c4/train', "{'text': 'str', 'timestamp': 'str', 'url': 'str'}",
        "{'text': texts(12)[i], 'timestamp': '2019-04-25T12:57:54Z', 'url': f'https://example.com/{i}'}"),
    'docs/datasets/cifar10.md': _CIFAR_SOURCE + _TRANSFORMS,
    'docs/datasets/index.md': _CIFAR_SOURCE + '''
my_transform = None
''',
    'docs/datasets/coco.md': _records(
        's3://bucket/coco/val2017', "{'image': 'jpeg', 'image_id': 'int', 'file_name': 'str', 'width': 'int', "
        "'height': 'int', 'boxes': 'json', 'category_ids': 'json', 'segmentation': 'json', 'annotations': 'json'}",
        "{'image': image(i), 'image_id': i, 'file_name': f'{i:012d}.jpg', 'width': 16, 'height': 12, "
        "'boxes': [[1.0, 2.0, 5.0, 4.0]], 'category_ids': [18], 'segmentation': [[[1.0, 2.0, 6.0, 2.0, 6.0, 6.0]]], "
        "'annotations': [{'id': 100 + i, 'area': 20.0, 'iscrowd': 0}]}") + '''

def detection_transforms(image, annotations):
    return np.asarray(image), annotations
''',
    'docs/datasets/enwiki.md': _records(
        's3://bucket/enwiki/train', "{'id': 'str', 'url': 'str', 'title': 'str', 'text': 'str'}",
        "{'id': str(12 + i), 'url': f'https://en.wikipedia.org/wiki?curid={12 + i}', 'title': 'Anarchism', "
        "'text': texts(12)[i]}"),
    'docs/datasets/imagenet.md': '''
def imagenet_source(root='imagenet'):
    for split, per_class in (('train', 4), ('val', 2)):
        for label, wnid in enumerate(['n01440764', 'n01443537', 'n01484850']):
            os.makedirs(os.path.join(root, split, wnid))
            for k in range(per_class):
                name = f'{wnid}_{k}.JPEG' if split == 'train' else f'ILSVRC2012_val_{label * 10 + k:08d}.JPEG'
                image(label * 10 + k).save(os.path.join(root, split, wnid, name), format='JPEG')


if __name__ == '__main__' and not os.path.exists('imagenet'):
    imagenet_source()


def train_transforms(image):
    return np.asarray(image.resize((8, 8)))
''',
    'docs/datasets/laion400m.md': _records(
        's3://bucket/laion400m/train', "{'key': 'str', 'url': 'str', 'caption': 'str', 'width': 'int', "
        "'height': 'int', 'image': 'bytes', 'metadata': 'json', 'download': 'json'}",
        "{'key': f'{i:09d}', 'url': f'https://example.com/{i}.jpg', 'caption': texts(12)[i], 'width': 16, "
        "'height': 12, 'image': jpeg_bytes(i), 'metadata': {'URL': f'https://example.com/{i}.jpg', "
        "'TEXT': texts(12)[i], 'similarity': 0.31}, 'download': {'status': 'success'}}") .replace(
        'write_mds', '''import io


def jpeg_bytes(seed):
    out = io.BytesIO()
    image(seed).save(out, format='JPEG')
    return out.getvalue()


def image_transform(image):
    return np.asarray(image)


def tokenize(caption):
    return caption.split()


write_mds''', 1),
    'docs/datasets/llm-packing.md': '''
from streaming_datasets import convert_tokens

write_mds('data/c4/train', {'text': 'str', 'timestamp': 'str', 'url': 'str'},
          ({'text': text, 'timestamp': '2019-04-25T12:57:54Z', 'url': f'https://example.com/{i}'}
           for i, text in enumerate(texts(400, words=40))))
convert_tokens(['data/c4/train'], 'data/c4-tokens')
''',
    'docs/datasets/pile.md': _records(
        's3://bucket/pile/train', "{'text': 'str', 'pile_set_name': 'str'}",
        "{'text': texts(12)[i], 'pile_set_name': 'Pile-CC'}"),
    'docs/datasets/webvid.md': '''
import csv

os.makedirs('clips')
with open('results_2M_val.csv', 'w', newline='') as handle:
    rows = csv.writer(handle)
    rows.writerow(['videoid', 'name', 'page_dir', 'duration', 'contentUrl'])
    for i in range(3):
        with open(f'clips/{i}.mp4', 'wb') as clip:
            clip.write(bytes([i]) * 64)
        rows.writerow([str(1000 + i), f'clip {i}', f'{i:03d}_{i:03d}', 'PT00H00M11S',
                       'file://' + os.path.abspath(f'clips/{i}.mp4')])
''' + _records(
        's3://bucket/webvid/val', "{'videoid': 'str', 'caption': 'str', 'page_dir': 'str', 'duration': 'str', "
        "'content_url': 'str', 'video': 'bytes'}",
        "{'videoid': str(1000 + i), 'caption': f'clip {i}', 'page_dir': '000_000', 'duration': 'PT00H00M11S', "
        "'content_url': f'https://example.com/{i}.mp4', 'video': bytes([i]) * 64}", 3) + '''

def decode_video(data):
    return np.frombuffer(data, np.uint8)
''',
})
