"""`streaming convert`: the built-in converters from the command line, and third-party converters discovered through
entry points (a fake distribution put on sys.path, with real importlib.metadata discovery)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from streaming_core import LocalDataset
from streaming_core.cli import main
from streaming_core.machinery.discovery import BLOCK_ENV, DISABLE_ENV


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_convert_jsonl_command_line(tmp_path, capsys):
    src = tmp_path / 'in.jsonl'
    src.write_text(''.join(json.dumps({'id': i, 'text': f't{i}', 'vec': [i, i]}) + '\n' for i in range(300)))
    out = tmp_path / 'out'
    code, text, _ = run(capsys, 'convert', 'jsonl', str(src), str(out), '--columns', 'id:int32,vec:ndarray:int16:2',
                        '--columns', 'text', '--workers', '3', '--compression', 'zstd', '--hashes', 'xxh64,sha1',
                        '--size-limit', '2kb', '--quiet')
    assert code == 0 and text == ''
    index = json.loads((out / 'index.json').read_text())
    assert index['shards'][0]['hashes'] == ['sha1', 'xxh64'] and index['shards'][0]['compression'] == 'zstd'
    data = LocalDataset(str(out))
    assert [int(data[i]['id']) for i in range(300)] == list(range(300))
    assert data[5]['vec'].tolist() == [5, 5] and data[5]['text'] == 't5'
    code, text, _ = run(capsys, 'convert', 'jsonl', str(src), str(tmp_path / 'j'), '--format', 'json',
                        '--columns', 'id,text')
    assert code == 0 and 'Wrote 300 samples in 1 json shards' in text and 'Columns: id:int, text:str' in text
    code, _, err = run(capsys, 'convert', 'jsonl', str(src), str(out), '--quiet')
    assert code == 1 and 'Directory is not empty' in err and '--exist-ok' in err
    local, remote = tmp_path / 'local', tmp_path / 'remote'
    code, _, _ = run(capsys, 'convert', 'jsonl', str(src), f'{local}::file://{remote}', '--quiet', '--keep-local')
    assert code == 0 and (remote / 'index.json').exists() and (local / 'index.json').exists()
    # Without --keep-local nothing stays in LOCAL, with several workers too (the merged index.json stayed, and
    # read as a dataset it named files no longer there).
    for workers in ('1', '3'):
        local, remote = tmp_path / f'local-{workers}', tmp_path / f'remote-{workers}'
        code, _, err = run(capsys, 'convert', 'jsonl', str(src), f'{local}::file://{remote}', '--quiet',
                           '--workers', workers)
        assert code == 0, err
        assert not local.exists() or not any(local.rglob('*')), sorted(local.rglob('*'))
        data = LocalDataset(str(remote))
        assert sorted(int(data[i]['id']) for i in range(len(data))) == list(range(300))


def test_a_failed_conversion_commits_nothing_and_says_only_what_failed(tmp_path, capsys, caplog):
    """A record that does not fit its column stops the conversion with an error naming it, and nothing is committed.
    The writer, abandoned on purpose, also logged that it was "dropped without finish()" and advised a `with` block,
    which would commit a partial dataset; and it kept the output until collected. Now: no such warning, no index, and
    the output is free at once (a second conversion of fixed data into it succeeds)."""
    src = tmp_path / 'in.jsonl'
    records = [{'id': i} for i in range(80)]
    records[50] = {'id': 'notanint'}
    src.write_text(''.join(json.dumps(r) + '\n' for r in records))
    out = tmp_path / 'out'
    with caplog.at_level('WARNING'):
        code, _, err = run(capsys, 'convert', 'jsonl', str(src), str(out), '--columns', 'id:int', '--quiet')
    assert code == 1 and "column 'id': the value 'notanint' does not fit the encoding int" in err
    assert not any('dropped without finish' in r.getMessage() for r in caplog.records)
    assert not (out / 'index.json').exists()
    records[50] = {'id': 50}
    src.write_text(''.join(json.dumps(r) + '\n' for r in records))
    code, _, err = run(capsys, 'convert', 'jsonl', str(src), str(out), '--columns', 'id:int', '--quiet', '--exist-ok')
    assert code == 0, err
    assert [int(s['id']) for s in LocalDataset(str(out))] == list(range(80))


@pytest.mark.parametrize('kind', ['jsonl', 'imagefolder'])
def test_convert_refuses_an_output_that_holds_its_source(tmp_path, capsys, kind):
    """`streaming convert jsonl ds/raw/x.jsonl ds` says the directory is not empty and to pass --exist-ok; doing
    so cleared ``ds``, the source with it, and then failed. The output holding the source is refused either way,
    and the source stays."""
    out = tmp_path / 'ds'
    if kind == 'jsonl':
        src = out / 'raw' / 'x.jsonl'
        src.parent.mkdir(parents=True)
        src.write_text(''.join(json.dumps({'id': i}) + '\n' for i in range(20)))
    else:
        from PIL import Image
        src = out / 'images'
        (src / 'cat').mkdir(parents=True)
        Image.new('RGB', (4, 4)).save(src / 'cat' / 'a.png')
    for extra in ([], ['--exist-ok']):
        code, _, err = run(capsys, 'convert', kind, str(src), str(out), '--quiet', *extra)
        assert code == 1 and f'holds the source {src}' in err and 'Write to another directory' in err
        assert src.exists()


def test_convert_csv_delimiter(tmp_path, capsys):
    src = tmp_path / 'in.txt'
    src.write_text('a;b\n1;x\n2;y\n')
    code, _, _ = run(capsys, 'convert', 'csv', str(src), str(tmp_path / 'o'), '--delimiter', ';', '--quiet')
    assert code == 0 and LocalDataset(str(tmp_path / 'o'))[1] == {'a': 2, 'b': 'y'}


@pytest.fixture
def fake_converters(tmp_path, monkeypatch):
    """A distribution 'fake-conv' declaring four converter entry points (one good, three broken)."""
    dist = tmp_path / 'fake_conv-0.1.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: fake-conv\nVersion: 0.1\n')
    (dist / 'entry_points.txt').write_text(textwrap.dedent('''\
        [streaming_core.converters]
        fakeconv = fake_conv_mod:register
        brokenconv = fake_conv_missing_module:register
        noparser = fake_conv_mod:register_nothing
        clash = fake_conv_mod:register_jsonl
        '''))
    (tmp_path / 'fake_conv_mod.py').write_text(textwrap.dedent('''\
        def register(subparsers):
            parser = subparsers.add_parser('fakeconv', help='a fake dataset recipe')
            parser.add_argument('out')
            parser.add_argument('--count', type=int, default=5)
            parser.set_defaults(run=run)

        def run(args):
            from streaming_core.machinery.lookup import get_registry
            writer = get_registry('format').get('mds').writer(out=args.out, columns={'x': 'int'})
            for i in range(args.count):
                writer.write({'x': i * i})
            writer.finish()
            print('fake converter wrote', args.count)
            return 0

        def register_nothing(subparsers):
            pass

        def register_jsonl(subparsers):
            subparsers.add_parser('jsonl')
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    return tmp_path


def test_entry_point_converter_runs(fake_converters, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(['convert', '--help'])
    listing = capsys.readouterr().out
    assert 'fakeconv' in listing and 'a fake dataset recipe' in listing and 'brokenconv' in listing
    assert 'noparser' in listing and 'clash      (failed to load; run it to see why)' in listing
    out = str(tmp_path / 'fake-out')
    code, text, _ = run(capsys, 'convert', 'fakeconv', out, '--count', '7')
    assert code == 0 and 'fake converter wrote 7' in text
    data = LocalDataset(out)
    assert [data[i]['x'] for i in range(7)] == [i * i for i in range(7)]


def test_broken_entry_points_are_reported_not_fatal(fake_converters, capsys):
    code, _, err = run(capsys, 'convert', 'brokenconv', 'anything', '--flag')
    assert code == 1 and err.count('\n') == 1
    assert "Converter plugin 'brokenconv' (distribution 'fake-conv'" in err
    assert 'ModuleNotFoundError' in err and 'STREAMING_CORE_BLOCK_PLUGINS=brokenconv' in err
    code, _, err = run(capsys, 'convert', 'noparser')
    assert code == 1 and 'added no subcommand' in err
    code, _, err = run(capsys, 'convert', 'clash')
    assert code == 1 and "subcommand 'jsonl', which is a built-in converter" in err
    code, text, _ = run(capsys, 'plugins', '--json')  # the rest of the CLI is unaffected
    assert code == 0 and json.loads(text)


def test_blocked_and_disabled_converters(fake_converters, monkeypatch, capsys):
    monkeypatch.setenv(BLOCK_ENV, 'fakeconv,brokenconv')
    with pytest.raises(SystemExit) as info:
        main(['convert', 'fakeconv', 'x'])
    assert info.value.code == 2 and "invalid choice: 'fakeconv'" in capsys.readouterr().err
    monkeypatch.delenv(BLOCK_ENV)
    monkeypatch.setenv(DISABLE_ENV, '1')
    from streaming_core.tools.convert.discovery import converter_entry_points
    assert converter_entry_points() == []
    monkeypatch.delenv(DISABLE_ENV)
    names = [ep.name for ep in converter_entry_points()]
    assert {'fakeconv', 'brokenconv', 'noparser', 'clash'} <= set(names) and names == sorted(names)
    assert os.environ.get(BLOCK_ENV) is None


@pytest.mark.slow
def test_s3_output_convert_inspect_verify(tmp_path, capsys, moto_server, cloud_env):
    """A remote-only OUT on moto's S3: partitions uploaded, merged from the remote, then inspected and verified."""
    import boto3
    bucket = 'convert-cli'
    boto3.client('s3', endpoint_url=moto_server.url, aws_access_key_id='testing', aws_secret_access_key='testing',
                 region_name='us-east-1').create_bucket(Bucket=bucket)
    options = [f'--storage-option=endpoint_url={moto_server.url}', '--storage-option=aws_access_key_id=testing',
               '--storage-option=aws_secret_access_key=testing', '--storage-option=region=us-east-1']
    src = tmp_path / 'in.jsonl'
    src.write_text(''.join(json.dumps({'id': i, 'text': f'row {i}'}) + '\n' for i in range(500)))
    url = f's3://{bucket}/corpus'
    code, _, err = run(capsys, 'convert', 'jsonl', str(src), url, '--workers', '2', '--compression', 'zstd',
                       '--hashes', 'xxh64', '--size-limit', '4kb', '--quiet', *options)
    assert code == 0, err
    code, text, _ = run(capsys, 'inspect', url, '--json', *options)
    info = json.loads(text)
    assert code == 0 and info['samples'] == 500 and info['compression'] == {'zstd': info['shards']}
    code, text, _ = run(capsys, 'verify', url, '--quiet', *options)
    assert code == 0 and 'OK' in text and 'hashes xxh64' in text
    code, _, err = run(capsys, 'convert', 'jsonl', str(src), url, '--quiet', *options)
    assert code == 1 and 'already holds a dataset' in err
    from streaming_core import StreamingDataset
    storage = {'endpoint_url': moto_server.url, 'aws_access_key_id': 'testing',
               'aws_secret_access_key': 'testing', 'region': 'us-east-1'}
    data = StreamingDataset(remote=url, local=str(tmp_path / 'cache'), batch_size=1, storage_options=storage)
    assert [data[i]['id'] for i in range(data.num_samples)] == list(range(500))
