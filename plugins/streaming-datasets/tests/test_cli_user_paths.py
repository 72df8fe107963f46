"""The recipes' rough edges, tried the way a user meets them: ``streaming convert ...`` in a fresh process.

Each test runs the installed ``streaming`` console script through subprocess (from the directory a user would be
in), then reads what it wrote with the streaming classes.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from streaming_core import StreamingDataset
from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import ByteTokenizer, PackedTokenStream, StreamingCIFAR10, StreamingPackedTokens

STREAMING = os.path.join(os.path.dirname(sys.executable), 'streaming')
EOS, PAD = ByteTokenizer.eos_id, ByteTokenizer.pad_id
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    'docs', 'datasets')


def streaming(*args: str, cwd: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``streaming`` command as a user would (not a terminal: stdout and stderr are pipes)."""
    env = dict(os.environ, PYTHONWARNINGS='default')
    result = subprocess.run([STREAMING, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


# Every split's layout is checked before any split is written ---
def test_imagenet_with_a_flat_val_converts_nothing(imagenet_source, tmp_path):
    source, _ = imagenet_source
    val = os.path.join(source, 'val')
    for wnid in os.listdir(val):  # the ILSVRC2012 validation archive, unpacked as is: flat
        for name in os.listdir(os.path.join(val, wnid)):
            os.rename(os.path.join(val, wnid, name), os.path.join(val, name))
        os.rmdir(os.path.join(val, wnid))
    out = tmp_path / 'imagenet-mds'
    result = streaming('convert', 'imagenet', source, str(out), check=False)
    assert result.returncode == 1
    assert 'holds 6 images directly' in result.stderr and 'class folders val/<wnid>/' in result.stderr
    assert not (out / 'train').exists()  # train was not converted first: the run stopped before writing anything


def test_a_non_empty_output_split_is_refused_before_any_split_is_written(cifar_source, tmp_path):
    source, _ = cifar_source
    out = tmp_path / 'cifar'
    (out / 'val').mkdir(parents=True)
    (out / 'val' / 'notes.txt').write_text('keep me')
    result = streaming('convert', 'cifar10', source, str(out), check=False)
    assert result.returncode == 1 and 'Directory is not empty' in result.stderr and 'val' in result.stderr
    assert not (out / 'train').exists()


# --splits: output split names everywhere ---
def test_splits_are_output_names_and_source_spellings_are_deprecated(ade20k_source, c4_source, tmp_path):
    ade, _ = ade20k_source
    result = streaming('convert', 'ade20k', ade, str(tmp_path / 'ade'), '--splits', 'val')
    assert result.stdout.strip().startswith('ade20k val: 3 samples') and 'FutureWarning' not in result.stderr
    old = streaming('convert', 'ade20k', ade, str(tmp_path / 'ade-old'), '--splits', 'validation')
    assert 'ade20k val: 3 samples' in old.stdout
    assert "'validation' is the source spelling of 'val'" in old.stderr
    c4, _ = c4_source
    assert 'c4 val: 5 samples' in streaming('convert', 'c4', c4, str(tmp_path / 'c4'), '--splits', 'val').stdout
    assert os.path.isfile(tmp_path / 'c4' / 'val' / 'index.json')
    unknown = streaming('convert', 'c4', c4, str(tmp_path / 'c4x'), '--splits', 'test', check=False)
    assert unknown.returncode == 1 and "C4 split 'test' has no files" in unknown.stderr and 'train, val' in \
        unknown.stderr


@pytest.mark.parametrize('name', ['ade20k', 'c4', 'cifar10', 'coco', 'imagenet', 'pile'])
def test_every_splits_option_says_the_same(name):
    text = ' '.join(streaming('convert', name, '--help').stdout.split())
    assert 'comma-separated OUTPUT split names, as written under OUT/ and passed as split= to the streaming class' \
        in text


# CIFAR-10: the binary version ---
def _binary_version(python_dir, tmp_path):
    """The same images as ``cifar-10-batches-py``, written in the binary version's layout."""
    root = tmp_path / 'cifar-10-batches-bin'
    root.mkdir()
    for name in [*[f'data_batch_{i}' for i in range(1, 6)], 'test_batch']:
        with open(os.path.join(python_dir, name), 'rb') as handle:
            batch = pickle.load(handle, encoding='bytes')
        labels = np.asarray(batch[b'labels'], dtype=np.uint8)[:, None]
        (root / f'{name}.bin').write_bytes(np.hstack([labels, batch[b'data']]).tobytes())
    names = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck']
    (root / 'batches.meta.txt').write_text('\n'.join(names) + '\n\n')
    return root


def test_cifar10_binary_version_converts_to_the_same_images(cifar_source, tmp_path):
    source, expected = cifar_source
    binary = _binary_version(source, tmp_path)
    out = tmp_path / 'from-bin'
    result = streaming('convert', 'cifar10', str(binary), str(out))
    assert result.stdout.splitlines() == [f'cifar10 train: 30 samples -> {out}/train', f'cifar10 val: 8 samples -> '
                                          f'{out}/val']
    for split in ('train', 'val'):
        dataset = StreamingCIFAR10(local=str(out), split=split, batch_size=1)
        assert [(image.tobytes(), label) for image, label in dataset] == [(x, y) for x, y, _ in expected[split]]
    assert LocalDataset(str(out), split='train')[7]['filename'] == 'data_batch_2_00001.png'
    # The folder holding the unpacked archive works too.
    assert 'cifar10 val: 8 samples' in streaming('convert', 'cifar10', str(tmp_path), str(tmp_path / 'o2'),
                                                 '--splits', 'val').stdout


def test_cifar10_unsupported_layouts_are_named(tmp_path):
    mat = tmp_path / 'cifar-10-batches-mat'
    mat.mkdir()
    (mat / 'data_batch_1.mat').write_bytes(b'MATLAB 5.0')
    result = streaming('convert', 'cifar10', str(mat), str(tmp_path / 'o'), check=False)
    assert result.returncode == 1 and 'MATLAB version' in result.stderr and 'not supported' in result.stderr
    empty = tmp_path / 'empty'
    empty.mkdir()
    result = streaming('convert', 'cifar10', str(empty), str(tmp_path / 'o'), check=False)
    assert 'Supported layouts: the python version' in result.stderr and 'the binary version' in result.stderr
    torn = tmp_path / 'torn'
    torn.mkdir()
    (torn / 'test_batch.bin').write_bytes(b'\x01' * 3074)
    result = streaming('convert', 'cifar10', str(torn), str(tmp_path / 'o'), '--splits', 'val', check=False)
    assert 'not a whole number of 3073-byte records' in result.stderr


# LAION: swapped folders, metadata without URL/TEXT, runs that write nothing ---
@pytest.fixture
def laion(tmp_path, helpers):
    """LAION metadata (6 rows) and img2dataset output (``samples_per_shard=4``, two rows failed), with the per-shard
    results parquet img2dataset writes next to each shard folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    meta, images = tmp_path / 'laion-meta', tmp_path / 'laion-data'
    meta.mkdir()
    rows = [{'SAMPLE_ID': n, 'URL': f'https://img.example/{n}.jpg', 'TEXT': f'caption {n}'} for n in range(6)]
    pq.write_table(pa.Table.from_pylist(rows), meta / 'part-00000.snappy.parquet')
    rng = random.Random(3)
    for shard in range(2):
        folder = images / f'{shard:05d}'
        folder.mkdir(parents=True)
        results = []
        for offset, row in enumerate(rows[shard * 4:shard * 4 + 4]):
            key = f'{shard:05d}{offset}'
            ok = row['SAMPLE_ID'] not in (1, 4)
            results.append({'url': row['URL'], 'key': key, 'caption': row['TEXT'],
                            'status': 'success' if ok else 'failed_to_download'})
            if ok:
                helpers.random_image(rng, (8, 8)).save(folder / f'{key}.jpg', format='JPEG')
                (folder / f'{key}.json').write_text(json.dumps({'url': row['URL'], 'key': key}))
        pq.write_table(pa.Table.from_pylist(results), images / f'{shard:05d}.parquet')
    return str(images), str(meta)


def test_laion_swapped_folders_are_refused(laion, tmp_path):
    images, meta = laion
    out = tmp_path / 'out'
    result = streaming('convert', 'laion400m', meta, str(out), '--metadata', images, '--samples-per-shard', '4',
                       check=False)
    assert result.returncode == 1
    assert 'holds no img2dataset shard folders' in result.stderr and 'is it the metadata folder?' in result.stderr
    assert not (out / 'train' / 'index.json').exists()


def test_laion_metadata_without_url_and_text_is_refused(laion, tmp_path):
    images, _ = laion
    result = streaming('convert', 'laion400m', images, str(tmp_path / 'out'), '--metadata', images,
                       '--samples-per-shard', '4', check=False)
    assert result.returncode == 1
    assert "is not LAION metadata: it lacks the column(s) ['URL', 'TEXT']" in result.stderr
    assert 'did you swap the images folder and --metadata?' in result.stderr


def test_laion_run_that_writes_no_sample_fails_and_commits_nothing(laion, tmp_path):
    _, meta = laion
    wrong = tmp_path / 'other-download'
    (wrong / '00000').mkdir(parents=True)  # shard folders, but not the images of this metadata
    (wrong / '00001').mkdir()
    out = tmp_path / 'out'
    for workers in ('1', '2'):
        result = streaming('convert', 'laion400m', str(wrong), str(out), '--metadata', meta, '--samples-per-shard',
                           '4', '--workers', workers, check=False)
        assert result.returncode == 1, result.stdout
        assert 'no sample was written: all 6 source record(s) were skipped' in result.stderr
        assert not (out / 'train' / 'index.json').exists()


# Progress: a total, 100% at the end even with skips, final lines once ---
def test_progress_in_a_log_ends_at_100_percent_with_skips_and_prints_the_result_once(laion, tmp_path):
    images, meta = laion
    result = streaming('convert', 'laion400m', images, str(tmp_path / 'out'), '--metadata', meta,
                       '--samples-per-shard', '4')
    assert '\r' not in result.stderr  # no bar redraws filling the log
    assert result.stderr.strip().splitlines()[-1].startswith('LAION train: 6/6 rows (100%), 4 samples, 2 skipped')
    assert result.stdout.splitlines() == [f'laion400m train: 4 samples -> {tmp_path}/out/train; skipped 2 (first: '
                                          f'000001: no downloaded image in {images}/00000 (url '
                                          f'https://img.example/1.jpg))']
    assert (result.stdout + result.stderr).count('000001: no downloaded image') == 1


def test_progress_on_a_terminal_is_a_bar_with_a_total_that_ends_at_100_percent(laion, tmp_path):
    import pty
    images, meta = laion
    main, secondary = pty.openpty()
    env = dict(os.environ, COLUMNS='160')
    process = subprocess.Popen([STREAMING, 'convert', 'laion400m', images, str(tmp_path / 'out'), '--metadata', meta,
                                '--samples-per-shard', '4', '--workers', '2'], stdout=secondary, stderr=secondary,
                               env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    assert process.wait(timeout=300) == 0
    os.close(main)
    screen = b''.join(chunks).decode('utf-8', errors='replace')
    states = [s.strip() for s in re.split(r'[\r\n]', screen) if 'LAION train' in s]
    assert states and all(re.search(r'\d/6 \[', s) for s in states)  # a bar with its total from the start
    assert '100%' in states[-1] and '6/6' in states[-1] and '4 samples, 2 skipped' in states[-1]
    assert screen.count('laion400m train: 4 samples') == 1


def test_progress_without_a_record_count_counts_files(c4_source, tmp_path):
    source, _ = c4_source
    result = streaming('convert', 'c4', source, str(tmp_path / 'c4'), '--splits', 'train')
    assert result.stderr.strip().splitlines()[-1].startswith('C4 train: 2/2 files (100%), 16 samples')


# Token packing ---
def test_pack_tokens_given_a_dataset_root_names_the_split_directory(c4_source, tmp_path):
    source, _ = c4_source
    root = tmp_path / 'c4-mds'
    streaming('convert', 'c4', source, str(root))
    result = streaming('convert', 'pack-tokens', str(root), str(tmp_path / 'packed'), '--block-size', '8',
                       check=False)
    assert result.returncode == 1
    assert 'give the split directory' in result.stderr and f'for example {root}/train' in result.stderr
    assert 'not a JSON line' not in result.stderr
    ok = streaming('convert', 'pack-tokens', str(root / 'train'), str(tmp_path / 'packed'), '--block-size', '8')
    assert ok.stdout.startswith('pack-tokens train: ')


def _doc_block(page, first_line):
    """The Python block of a docs page that starts with ``first_line``."""
    text = open(os.path.join(DOCS, page)).read()
    blocks = re.findall(r'```python\n(.*?)```', text, re.S)
    return next(block for block in blocks if block.startswith(first_line))


def test_tokenizer_module_in_the_current_directory(tmp_path, helpers):
    work = tmp_path / 'project'
    work.mkdir()
    (work / 'my_tokenizer.py').write_text(_doc_block('llm-packing.md', '# my_tokenizer.py'))  # the docs' module
    texts = ['a bb ccc', 'dddd', 'ee f', 'ggggggg hh i j']
    helpers.write_jsonl(work / 'docs.jsonl', [{'text': t} for t in texts])
    # Run from the project directory, as the docs show; two workers import it in spawned processes too.
    streaming('convert', 'pack-tokens', 'docs.jsonl', 'out', '--tokenizer', 'my_tokenizer:Words', '--block-size',
              '4', '--workers', '2', cwd=str(work))
    blocks = [b.tolist() for b in StreamingPackedTokens(local=str(work / 'out'), split='train', batch_size=1)]
    assert [t for b in blocks for t in b if t != 59] == [1, 2, 3, 0, 4, 0, 2, 1, 0, 7, 2, 1, 1, 0]
    missing = streaming('convert', 'pack-tokens', 'docs.jsonl', 'o2', '--tokenizer', 'nope_tok:Words',
                        '--block-size', '4', cwd=str(work), check=False)
    assert missing.returncode == 1 and 'a file nope_tok.py in the current directory' in missing.stderr


def test_empty_documents_give_the_same_tokens_on_both_packing_routes(tmp_path, helpers):
    rng = random.Random(5)
    texts = ['' if k % 4 == 0 else helpers.random_text(rng, 1 + k % 9) for k in range(43)]
    helpers.write_jsonl(tmp_path / 'docs.jsonl', [{'text': t} for t in texts])
    non_empty = [t for t in texts if t]
    # Route 1: pack at conversion time.
    packed = streaming('convert', 'pack-tokens', str(tmp_path / 'docs.jsonl'), str(tmp_path / 'packed'),
                       '--block-size', '16')
    assert f'skipped {len(texts) - len(non_empty)} (first: ' in packed.stdout
    route1 = [t for b in StreamingPackedTokens(local=str(tmp_path / 'packed'), split='train', batch_size=1)
              for t in b.tolist()]
    # Route 2: one sample per document, packed on the fly.
    streaming('convert', 'tokens', str(tmp_path / 'docs.jsonl'), str(tmp_path / 'tokens'))
    documents = StreamingDataset(local=str(tmp_path / 'tokens'), split='train', batch_size=1)
    route2 = [t for b in PackedTokenStream(documents, block_size=16) for t in b.tolist()]
    # Route 3: the text itself (a converted text dataset), tokenized on the fly.
    streaming('convert', 'enwiki', str(_as_wiki(tmp_path, texts)), str(tmp_path / 'text'))
    text_docs = StreamingDataset(local=str(tmp_path / 'text'), split='train', batch_size=1)
    route3 = [t for b in PackedTokenStream(text_docs, block_size=16) for t in b.tolist()]
    expected = [t for text in non_empty for t in [*text.encode('utf-8'), EOS]]
    for route in (route1, route2, route3):
        assert [t for t in route if t != PAD] == expected
        assert Counter(route)[EOS] == len(non_empty)


def _as_wiki(tmp_path, texts):
    path = tmp_path / 'wiki' / 'wiki.jsonl'
    path.parent.mkdir()
    path.write_text(''.join(json.dumps({'id': k, 'url': 'u', 'title': 't', 'text': t}) + '\n'
                            for k, t in enumerate(texts)))
    return path


# The docs ---
def test_webvid_page_reads_the_split_it_converts():
    page = open(os.path.join(DOCS, 'webvid.md')).read()
    converted = re.search(r'streaming convert webvid .* --split (\w+)', page).group(1)
    read = re.search(r"StreamingWebVid\(.*?split='(\w+)'", page, re.S).group(1)
    assert converted == read == 'val'
