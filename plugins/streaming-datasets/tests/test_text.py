from __future__ import annotations

import gzip
import os
import random

import pytest

from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import (
    StreamingC4,
    StreamingEnWiki,
    StreamingPile,
    WriterOptions,
    convert_c4,
    convert_enwiki,
    convert_pile,
)
from streaming_datasets import c4 as c4_module
from streaming_datasets import enwiki as enwiki_module
from streaming_datasets import pile as pile_module
from streaming_datasets.conversion import SourceLayoutError

OPTIONS = WriterOptions(size_limit=1 << 9, progress=False)  # a few documents per shard


def _sorted(records):
    return sorted(tuple(sorted(r.items())) for r in records)


def _stream(cls, out, split, **kwargs):
    return list(cls(local=out, split=split, shuffle=True, batch_size=2, **kwargs))


# C4 -----------------------------------------------------------------------------------------------------------------
def test_c4_round_trip(c4_source, tmp_path):
    source, expected = c4_source
    out = str(tmp_path / 'out')
    results = convert_c4(source, out, options=OPTIONS)
    assert {s: r.samples for s, r in results.items()} == {'train': 16, 'val': 5}
    for split in ('train', 'val'):
        got = _stream(StreamingC4, out, split)
        assert _sorted(got) == _sorted(expected[split])
    assert list(_stream(StreamingC4, out, 'train')) != expected['train']  # shuffled
    stored = LocalDataset(out, split='train')
    assert [stored[i] for i in range(16)] == expected['train']  # stored in file order, line order


def test_c4_parallel_same_order_and_cli(c4_source, tmp_path, helpers):
    source, expected = c4_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(c4_module.register, ['c4', source, out, '--workers', '2', '--splits', 'train',
                                                '--no-progress', '--size-limit', '512']) == 0
    stored = LocalDataset(out, split='train')
    assert [stored[i] for i in range(len(stored))] == expected['train']
    assert sorted(os.listdir(os.path.join(out, 'train'))) == ['00000', '00001', 'index.json']


def test_c4_errors(c4_source, tmp_path, caplog):
    source, _ = c4_source
    with pytest.raises(SourceLayoutError, match='no C4 files'):
        convert_c4(str(tmp_path), str(tmp_path / 'a'), options=OPTIONS)
    with pytest.raises(SourceLayoutError, match="split 'test' has no files"):
        convert_c4(source, str(tmp_path / 'b'), splits=['test'], options=OPTIONS)
    path = os.path.join(source, 'c4-validation.00000-of-00001.json.gz')
    with open(path, 'wb') as handle:
        handle.write(gzip.compress(b'{"text": "ok", "timestamp": "t", "url": "u"}\n{"text": 5}\n'))
    with pytest.raises(SourceLayoutError, match=r'json.gz:2: .*"text" must be a string'):
        convert_c4(source, str(tmp_path / 'c'), splits=['validation'], options=OPTIONS)
    assert not os.path.exists(str(tmp_path / 'c' / 'val' / 'index.json'))  # a failed conversion commits nothing
    with open(path, 'wb') as handle:
        handle.write(gzip.compress(b'{"text": "ok"\n'))
    with pytest.raises(SourceLayoutError, match='json.gz:1: not a JSON line'):
        convert_c4(source, str(tmp_path / 'd'), splits=['validation'], options=OPTIONS)
    os.remove(os.path.join(source, 'c4-train.00001-of-00002.json.gz'))
    with caplog.at_level('WARNING', logger='streaming_datasets'):
        convert_c4(source, str(tmp_path / 'e'), splits=['train'], options=OPTIONS)
    assert 'converting 1 of its 2 files' in caplog.text


# The Pile -----------------------------------------------------------------------------------------------------------
@pytest.fixture
def pile_source(tmp_path, helpers):
    rng = random.Random(5)
    root = tmp_path / 'pile'
    sets = ['Pile-CC', 'PubMed Central', 'Github', 'Wikipedia (en)', 'ArXiv']
    expected = {'train': [], 'val': [], 'test': []}
    for relative, split, count in (('train/00.jsonl.zst', 'train', 7), ('train/01.jsonl.zst', 'train', 6),
                                   ('train/02.jsonl.zst', 'train', 5), ('val.jsonl.zst', 'val', 4),
                                   ('test.jsonl.zst', 'test', 3)):
        records = [{'text': helpers.random_text(rng, rng.randint(1, 25)), 'meta': {'pile_set_name': rng.choice(sets)}}
                   for _ in range(count)]
        helpers.write_jsonl(root / relative, records)
        expected[split].extend({'text': r['text'], 'pile_set_name': r['meta']['pile_set_name']} for r in records)
    return str(root), expected


def test_pile_round_trip(pile_source, tmp_path, helpers):
    source, expected = pile_source
    out = str(tmp_path / 'out')
    results = convert_pile(source, out, options=OPTIONS)
    assert {s: r.samples for s, r in results.items()} == {'train': 18, 'val': 4, 'test': 3}
    for split in ('train', 'val', 'test'):
        assert _sorted(_stream(StreamingPile, out, split)) == _sorted(expected[split])
    out2 = str(tmp_path / 'cli')
    assert helpers.run_cli(pile_module.register, ['pile', source, out2, '--splits', 'train', '--workers', '3',
                                                  '--no-progress', '--compression', 'zstd']) == 0
    stored = LocalDataset(out2, split='train')
    assert [stored[i] for i in range(len(stored))] == expected['train']
    lengths = _stream(StreamingPile, out2, 'train', transform=lambda r: len(r['text']))
    assert sorted(lengths) == sorted(len(r['text']) for r in expected['train'])


def test_pile_errors(pile_source, tmp_path):
    source, _ = pile_source
    with open(os.path.join(source, 'val.jsonl.zst'), 'wb') as handle:
        handle.write(b'not zstd at all')
    with pytest.raises(SourceLayoutError, match='val.jsonl.zst: cannot decompress'):
        convert_pile(source, str(tmp_path / 'a'), splits=['val'], options=OPTIONS)
    with pytest.raises(SourceLayoutError, match='no Pile files'):
        convert_pile(str(tmp_path), str(tmp_path / 'b'), options=OPTIONS)


def test_pile_needs_meta_pile_set_name(tmp_path, helpers):
    helpers.write_jsonl(tmp_path / 'pile' / 'test.jsonl.zst', [{'text': 'a', 'meta': {}}])
    with pytest.raises(SourceLayoutError, match=r'test.jsonl.zst:1: the record has no "meta.pile_set_name"'):
        convert_pile(str(tmp_path / 'pile'), str(tmp_path / 'out'), options=OPTIONS)


# English Wikipedia --------------------------------------------------------------------------------------------------
@pytest.fixture
def enwiki_source(tmp_path, helpers):
    rng = random.Random(6)
    root = tmp_path / 'text'
    expected, page = [], 10
    for relative, count in (('AA/wiki_00', 5), ('AA/wiki_01', 4), ('AB/wiki_00', 6)):
        records = []
        for _ in range(count):
            page += rng.randint(1, 50)
            records.append({'id': str(page), 'revid': str(page * 3), 'url': f'https://en.wikipedia.org/wiki?curid={page}',
                            'title': f'Article {page}', 'text': helpers.random_text(rng, rng.randint(0, 40))})
        helpers.write_jsonl(root / relative, records)
        expected.extend({k: r[k] for k in ('id', 'url', 'title', 'text')} for r in records)
    return str(root), expected


def test_enwiki_round_trip(enwiki_source, tmp_path, helpers):
    source, expected = enwiki_source
    out = str(tmp_path / 'out')
    assert convert_enwiki(source, out, options=OPTIONS)['train'].samples == 15
    assert _sorted(_stream(StreamingEnWiki, out, 'train')) == _sorted(expected)
    assert [LocalDataset(out, split='train')[i] for i in range(15)] == expected
    out2 = str(tmp_path / 'cli')
    assert helpers.run_cli(enwiki_module.register, ['enwiki', source, out2, '--split', 'all', '--workers', '2',
                                                    '--no-progress']) == 0
    assert [LocalDataset(out2, split='all')[i] for i in range(15)] == expected
    with pytest.raises(TypeError, match='single records'):
        StreamingEnWiki(local=out, split='train', target_transform=len)


def test_enwiki_numeric_ids_and_errors(tmp_path, helpers):
    helpers.write_jsonl(tmp_path / 'wiki' / 'part.jsonl.gz', [{'id': 12, 'url': 'u', 'title': 't', 'text': 'x'}])
    convert_enwiki(str(tmp_path / 'wiki'), str(tmp_path / 'out'), options=OPTIONS)
    assert LocalDataset(str(tmp_path / 'out'), split='train')[0]['id'] == '12'
    helpers.write_jsonl(tmp_path / 'bad' / 'wiki_00', [{'id': 1, 'url': 'u', 'text': 'x'}])
    with pytest.raises(SourceLayoutError, match='wiki_00:1: the record has no "title"'):
        convert_enwiki(str(tmp_path / 'bad'), str(tmp_path / 'out2'), options=OPTIONS)
    os.makedirs(tmp_path / 'empty')
    with pytest.raises(SourceLayoutError, match='holds no article files'):
        convert_enwiki(str(tmp_path / 'empty'), str(tmp_path / 'out3'), options=OPTIONS)
