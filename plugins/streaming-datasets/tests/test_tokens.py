from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from streaming_core import StreamingDataset, World
from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import (
    ByteTokenizer,
    PackedTokenStream,
    StreamingPackedTokens,
    TokenSpec,
    WriterOptions,
    convert_c4,
    convert_packed_tokens,
    convert_tokens,
)
from streaming_datasets import tokens as tokens_module

BLOCK = 16
EOS, PAD = ByteTokenizer.eos_id, ByteTokenizer.pad_id
OPTIONS = WriterOptions(size_limit=1 << 8, progress=False)  # a few blocks per shard


@pytest.fixture
def corpus(tmp_path, helpers):
    """Two JSON-lines files of 31 documents in all (one empty); returns (folder, texts in order)."""
    rng = random.Random(11)
    texts = [helpers.random_text(rng, rng.randint(1, 12)) for _ in range(31)]
    texts[4] = ''
    helpers.write_jsonl(tmp_path / 'docs' / 'a.jsonl', [{'text': t} for t in texts[:17]])
    helpers.write_jsonl(tmp_path / 'docs' / 'b.jsonl.gz', [{'text': t, 'id': i} for i, t in enumerate(texts[17:])])
    return str(tmp_path / 'docs'), texts


def _stream_ids(texts):
    """The corpus as every packing route sees it: each non-empty document's bytes, then EOS (an empty document
    contributes nothing)."""
    return [token for text in texts if text for token in [*text.encode('utf-8'), EOS]]


def _blocks(dataset):
    return [block.tolist() for block in dataset]


def test_packed_epoch_conserves_every_token(corpus, tmp_path):
    folder, texts = corpus
    out = str(tmp_path / 'packed')
    result = convert_packed_tokens(folder, out, block_size=BLOCK, options=OPTIONS)['train']
    ids = _stream_ids(texts)
    blocks = -(-len(ids) // BLOCK)
    assert result.samples == blocks
    stored = LocalDataset(out, split='train')
    assert stored[0]['tokens'].dtype == np.uint16 and stored[0]['tokens'].shape == (BLOCK,)
    # In storage order the blocks are the corpus stream, then padding up to a whole block.
    concatenated = [t for i in range(len(stored)) for t in stored[i]['tokens'].tolist()]
    assert concatenated == ids + [PAD] * (blocks * BLOCK - len(ids))
    # A shuffled epoch yields every block exactly once: every token once, plus the documented EOS and PAD ids.
    dataset = StreamingPackedTokens(local=out, split='train', shuffle=True, batch_size=4, shuffle_seed=3)
    epoch = _blocks(dataset)
    assert all(len(b) == BLOCK for b in epoch)
    assert sorted(epoch) == sorted(stored[i]['tokens'].tolist() for i in range(len(stored)))
    assert epoch != [stored[i]['tokens'].tolist() for i in range(len(stored))]
    assert Counter(t for b in epoch for t in b) == Counter(ids) + Counter({PAD: blocks * BLOCK - len(ids)})
    assert Counter(t for b in epoch for t in b)[EOS] == len([t for t in texts if t])
    assert (result.skipped, result.skip_reasons) == (1, [f'{folder}/a.jsonl:5: empty document'])


@pytest.mark.parametrize('stop', [0, 1, 7, 'all'])
def test_packed_resumption_is_exact(corpus, tmp_path, stop):
    folder, _ = corpus
    out = str(tmp_path / 'packed')
    convert_packed_tokens(folder, out, block_size=BLOCK, options=OPTIONS)

    def make():
        return StreamingPackedTokens(local=out, split='train', shuffle=True, batch_size=2, num_canonical_nodes=2)

    full = _blocks(make())
    stop = len(full) if stop == 'all' else stop
    dataset = make()
    before = []
    for block in dataset:
        if len(before) == stop:
            break
        before.append(block.tolist())
    resumed = make()
    resumed.load_state_dict(dataset.state_dict(stop, True))
    after = _blocks(resumed)
    if stop == len(full):
        # The core's one meaning of resumption state: a state covering the epoch resumes at the next epoch's start
        # (a whole epoch of the same blocks; the partition may repeat a block to even out ranks, so compare sets).
        assert before == full and len(after) == len(full) and set(map(tuple, after)) == set(map(tuple, full))
        return
    assert before + after == full
    assert Counter(map(tuple, before + after)) == Counter(map(tuple, full))


def test_parallel_packing_pads_each_partition(corpus, tmp_path, helpers):
    folder, texts = corpus
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(tokens_module.register_pack_tokens, [
        'pack-tokens', folder, out, '--block-size', str(BLOCK), '--workers', '2', '--no-progress']) == 0
    stored = LocalDataset(out, split='train')
    tokens = [t for i in range(len(stored)) for t in stored[i]['tokens'].tolist()]
    # Two partitions (one per file), each padded: removing PAD gives back the corpus stream exactly.
    assert [t for t in tokens if t != PAD] == _stream_ids(texts)
    assert 0 < tokens.count(PAD) < 2 * BLOCK and len(tokens) % BLOCK == 0


def test_wide_vocabulary_uses_uint32_and_ids_are_checked(tmp_path, helpers):
    helpers.write_jsonl(tmp_path / 'd.jsonl', [{'body': 'abc'}, {'body': 'de'}])
    wide = TokenSpec.create(_Wide(), eos_id=69_999, pad_id=0, vocab_size=70_000)
    assert wide.dtype == 'uint32'
    out = str(tmp_path / 'wide')
    convert_packed_tokens(str(tmp_path / 'd.jsonl'), out, block_size=4, tokenizer=_Wide(), eos_id=69_999, pad_id=0,
                          vocab_size=70_000, text_key='body', options=OPTIONS)
    stored = LocalDataset(out, split='train')
    assert stored[0]['tokens'].dtype == np.uint32
    assert [t for i in range(len(stored)) for t in stored[i]['tokens'].tolist()] == \
        [65_597, 65_598, 65_599, 69_999, 65_600, 65_601, 69_999, 0]
    with pytest.raises(ValueError, match=r'd.jsonl:1: token id 65599 is outside \[0, 1000\)'):
        convert_packed_tokens(str(tmp_path / 'd.jsonl'), str(tmp_path / 'x'), block_size=4, tokenizer=_Wide(),
                              eos_id=1, vocab_size=1000, text_key='body', options=OPTIONS)
    with pytest.raises(ValueError, match='has no eos_id'):
        TokenSpec.create(_Wide())
    with pytest.raises(ValueError, match='Cannot import the tokenizer'):
        TokenSpec.create('no_such_module:tok')
    assert TokenSpec.create('streaming_datasets.tokenizers:ByteTokenizer').tokenizer == ByteTokenizer()


class _Wide:
    """A tokenizer with ids above uint16: ord(c) + 65500."""

    def __call__(self, text):
        return [ord(c) + 65_500 for c in text]


# Per-document tokens and on-the-fly packing -------------------------------------------------------------------------
def _documents(out):
    return StreamingDataset(local=out, split='train', shuffle=True, batch_size=1, shuffle_seed=21)


def test_tokens_converter_one_sample_per_document(corpus, tmp_path):
    folder, texts = corpus
    out = str(tmp_path / 'tokens')
    result = convert_tokens(folder, out, options=OPTIONS)['train']
    assert (result.samples, result.skipped) == (30, 1)  # the empty document is skipped, and counted
    stored = LocalDataset(out, split='train')
    assert [ByteTokenizer().decode(stored[i]['tokens']) for i in range(30)] == [t for t in texts if t]


def test_on_the_fly_packing_conserves_tokens(corpus, tmp_path):
    folder, texts = corpus
    out = str(tmp_path / 'tokens')
    convert_tokens(folder, out, options=OPTIONS)
    stream = PackedTokenStream(_documents(out), block_size=BLOCK)
    epoch = _blocks(stream)
    ids = _stream_ids([t for t in texts if t])
    assert all(len(b) == BLOCK for b in epoch)
    assert len(epoch) == -(-len(ids) // BLOCK)
    assert Counter(t for b in epoch for t in b) == Counter(ids) + Counter({PAD: len(epoch) * BLOCK - len(ids)})
    assert _blocks(PackedTokenStream(_documents(out), block_size=BLOCK)) == epoch  # deterministic


@pytest.mark.parametrize('stop', [0, 1, 5, 13, 'all'])
def test_on_the_fly_resumption_is_exact(corpus, tmp_path, stop):
    folder, _ = corpus
    out = str(tmp_path / 'tokens')
    convert_tokens(folder, out, options=OPTIONS)
    full = _blocks(PackedTokenStream(_documents(out), block_size=BLOCK))
    stop = len(full) if stop == 'all' else stop
    stream = PackedTokenStream(_documents(out), block_size=BLOCK)
    before = []
    for block in stream:  # the generator is left suspended after `stop` blocks, as a training loop would
        if len(before) == stop:
            break
        before.append(block.tolist())
    state = stream.state_dict(stop)
    resumed = PackedTokenStream(_documents(out), block_size=BLOCK)
    resumed.load_state_dict(state)
    after = _blocks(resumed)
    if stop == len(full):
        # A state covering the whole epoch resumes at the next epoch's start (the core's one meaning of a state):
        # the same documents in the next epoch's order, so the same tokens.
        assert before == full and Counter(t for b in after for t in b) == Counter(t for b in full for t in b)
        return
    assert before + after == full
    # The state after the resumed pass's blocks also resumes exactly (states compose).
    if len(after) > 2:
        again = PackedTokenStream(_documents(out), block_size=BLOCK)
        again.load_state_dict(state)
        first = [b.tolist() for _, b in zip(range(2), again)]
        third = PackedTokenStream(_documents(out), block_size=BLOCK)
        third.load_state_dict(again.state_dict(2))
        assert before + first + _blocks(third) == full


def test_on_the_fly_packing_tokenizes_text_datasets(c4_source, tmp_path):
    source, expected = c4_source
    out = str(tmp_path / 'c4')
    convert_c4(source, out, splits=['validation'], options=OPTIONS)
    documents = StreamingDataset(local=out, split='val', batch_size=1)
    blocks = _blocks(PackedTokenStream(documents, block_size=BLOCK, tokenizer=ByteTokenizer()))
    ids = _stream_ids([r['text'] for r in expected['val']])
    assert [t for b in blocks for t in b] == ids + [PAD] * (len(blocks) * BLOCK - len(ids))


def test_on_the_fly_packing_refuses_multi_rank_worlds(corpus, tmp_path):
    folder, _ = corpus
    out = str(tmp_path / 'tokens')
    convert_tokens(folder, out, options=OPTIONS)
    dataset = StreamingDataset(local=out, split='train', batch_size=1, world=World(rank=0, world_size=2))
    with pytest.raises(RuntimeError, match='single rank'):
        next(iter(PackedTokenStream(dataset, block_size=BLOCK)))
    stream = PackedTokenStream(_documents(out), block_size=BLOCK)
    with pytest.raises(RuntimeError, match='nothing was iterated'):
        stream.state_dict()
    with pytest.raises(ValueError, match='block_size 8'):
        stream.load_state_dict({'dataset': {}, 'skip_tokens': 0, 'block_size': 8})
