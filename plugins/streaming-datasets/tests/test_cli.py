from __future__ import annotations

import argparse
import importlib.metadata as md
import os

import pytest

from streaming_datasets import StreamingCIFAR10, StreamingPackedTokens

NAMES = ['ade20k', 'c4', 'cifar10', 'coco', 'enwiki', 'imagenet', 'laion400m', 'pack-tokens', 'pile', 'tokens',
         'webvid']


def test_every_converter_is_registered_by_the_plugin_and_adds_its_subcommand():
    from streaming_core.machinery.lookup import get_registry
    plugins = {ep.value for ep in md.entry_points(group='streaming_core')}
    assert 'streaming_datasets.plugin' in plugins
    assert not [ep for ep in md.entry_points(group='streaming_core.converters')
                if ep.value.startswith('streaming_datasets.')]  # not on the deprecated group any more
    converters = get_registry('converter')
    assert sorted(name for name in converters.names() if converters.origin(name) == 'datasets') == NAMES
    parser = argparse.ArgumentParser(prog='streaming convert')
    subparsers = parser.add_subparsers(dest='converter')
    for name in NAMES:
        before = set(subparsers.choices)
        converters.get(name)(subparsers)
        assert set(subparsers.choices) - before == {name}
        sub = subparsers.choices[name]
        assert callable(sub.get_default('run'))
        help_text = sub.format_help()
        for option in ('--workers', '--compression', '--size-limit', '--exist-ok', '--no-progress'):
            assert option in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(['cifar10', 'src', 'out', '--workers', '0'])


def _core_cli():
    from streaming_core import cli
    assert 'convert' in cli.COMMANDS
    return cli


def test_through_the_streaming_command(cifar_source, tmp_path, capsys):
    cli = _core_cli()
    source, _ = cifar_source
    out = str(tmp_path / 'out')
    assert cli.main(['convert', 'cifar10', source, out, '--no-progress', '--splits', 'val']) == 0
    assert 'cifar10 val: 8 samples' in capsys.readouterr().out
    assert len(list(StreamingCIFAR10(local=out, split='val', batch_size=2))) == 8
    # A bad source is a one-line error, not a traceback.
    assert cli.main(['convert', 'cifar10', str(tmp_path / 'missing'), str(tmp_path / 'o'), '--no-progress']) == 1
    assert 'is not a directory' in capsys.readouterr().err


def test_pack_tokens_through_the_streaming_command(tmp_path, helpers):
    cli = _core_cli()
    helpers.write_jsonl(tmp_path / 'docs.jsonl', [{'text': 'hello world'}, {'text': 'again'}])
    out = str(tmp_path / 'packed')
    assert cli.main(['convert', 'pack-tokens', str(tmp_path / 'docs.jsonl'), out, '--block-size', '8',
                     '--no-progress']) == 0
    assert os.path.isfile(os.path.join(out, 'train', 'index.json'))
    blocks = [b.tolist() for b in StreamingPackedTokens(local=out, split='train', batch_size=1)]
    assert blocks == [list(b'hello wo'), [*b'rld', 256, *b'agai'], [ord('n'), 256, *[257] * 6]]


def test_writer_options_are_checked_before_converting(tmp_path):
    from streaming_datasets import WriterOptions
    with pytest.raises(ValueError, match='Invalid compression: zip') as compression:
        WriterOptions(compression='zip')
    assert str(compression.value).count('zip') == 1
    with pytest.raises(ValueError, match='Invalid hash: crc') as hashing:
        WriterOptions(hashes=['crc'])
    assert str(hashing.value).count('crc') == 1
    with pytest.raises(ValueError, match='sorted list'):
        WriterOptions(hashes=['sha1', 'md5'])
    with pytest.raises(ValueError, match='workers must be a positive integer'):
        WriterOptions(workers=0)
    with pytest.raises(ValueError, match='size_limit'):
        WriterOptions(size_limit=1 << 33)


def test_storage_options_and_quiet(tmp_path, helpers):
    from streaming_datasets.enwiki import register
    helpers.write_jsonl(tmp_path / 'wiki.jsonl', [{'id': 1, 'url': 'u', 'title': 't', 'text': 'x'}])
    with pytest.raises(ValueError, match='expected KEY=VALUE'):
        helpers.run_cli(register, ['enwiki', str(tmp_path / 'wiki.jsonl'), str(tmp_path / 'o'), '--quiet',
                                   '--storage-option', 'endpoint_url'])
    assert helpers.run_cli(register, ['enwiki', str(tmp_path / 'wiki.jsonl'), str(tmp_path / 'o'), '--quiet',
                                      '--storage-option', 'retries=3']) == 0
