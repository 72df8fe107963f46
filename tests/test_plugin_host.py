"""The plugin host (issue 14) and lazy loading by manifest (issue 15): injectable hosts, pickling as configuration,
a lookup importing only the plugin that registers the name, stale and corrupt manifests never trusted, converters
as an ordinary hook kind.

Lazy loading is observed in fresh processes (as a user's script runs), each with its own cache root so the manifest
is the test's own; third-party plugins are real distributions (a ``*.dist-info`` directory with entry points) on the
child's ``sys.path``.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import types

import pytest

from streaming_core.cli import main
from streaming_core.errors import UnknownNameError
from streaming_core.hookspecs import KINDS, hookimpl
from streaming_core.machinery import manifest as plugin_manifest
from streaming_core.machinery.host import HostConfig, PluginHost, current_host, default_host, using_host
from streaming_core.machinery.lookup import get_registry
from streaming_core.testing import registered_plugin
from tests.fixtures.child_report import child_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 'STREAMING_CORE_BLOCK_PLUGINS'

REPORT = '''
import json, sys
from streaming_core.machinery.discovery import default_host
host = default_host()
print(json.dumps({'loaded': sorted(host.loaded_plugins()), 'complete': host.complete,
                  'modules': sorted(m for m in sys.modules if m.startswith('streaming_') and m.count('.') == 0)}))
'''


def _child(code: str, cache: str, *paths: str, env: dict[str, str] | None = None) -> dict:
    return child_report('import json\n' + textwrap.dedent(code) + REPORT, cache, *paths, env=env)


_LOOKUP = 'from streaming_core.machinery.lookup import get_registry\n'


def test_a_lookup_imports_only_the_plugin_that_registers_the_name(tmp_path):
    cache = str(tmp_path / 'cache')
    first = _child(f"{_LOOKUP}get_registry('format').get('mds')\n", cache)
    assert first['loaded'] == ['mds'] and not first['complete'], 'without a manifest the declarations name it'
    _child('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n', cache)
    assert os.listdir(os.path.join(cache, 'state')) == [os.path.basename(_manifest_path(cache))]
    second = _child(f"{_LOOKUP}get_registry('format').get('mds')\n"
                    "get_registry('shuffle').get('py1e')\n", cache)
    assert second['loaded'] == ['mds', 'py1e'] and not second['complete']
    assert 'streaming_s3' not in second['modules'] and 'streaming_csv' not in second['modules']
    listing = _child(f"{_LOOKUP}"
                     "print(json.dumps(get_registry('format').names()))\n", cache)
    assert listing['complete'] and {'mds', 'json', 'csv'} <= set(json.loads(listing['out'][0]))


def test_an_unknown_name_loads_everything_and_lists_the_installed_names(tmp_path):
    cache = str(tmp_path / 'cache')
    _child('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n', cache)
    report = _child('''
        from streaming_core.machinery.lookup import get_registry
        try:
            get_registry('compressor').get('zstdd')
        except Exception as err:
            print(json.dumps(str(err)))
    ''', cache)
    assert report['complete']
    message = json.loads(report['out'][0])
    assert "Unknown compression 'zstdd'" in message and 'zstd' in message and 'gz' in message


def _manifest_path(cache: str) -> str:
    code = 'from streaming_core.machinery.manifest import manifest_path\nprint(manifest_path())'
    env = {**os.environ, 'STREAMING_CORE_CACHE_DIR': cache, 'PYTHONPATH': ROOT}
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_a_stale_manifest_is_not_trusted(tmp_path):
    """The manifest says the wrong plugin registers 'mds': the lookup still finds the right one (full discovery)
    and the manifest is rewritten."""
    cache = str(tmp_path / 'cache')
    _child('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n', cache)
    path = _manifest_path(cache)
    data = json.load(open(path))
    for record in data['manifests'].values():
        record['names']['format']['mds'] = 'py1e'
        record['names']['format']['ghost'] = 'py1e'
    json.dump(data, open(path, 'w'))
    report = _child(f"{_LOOKUP}"
                    "print(type(get_registry('format').get('mds')).__module__)\n", cache)
    assert report['out'] == ['streaming_mds.reader'] and report['complete']
    fixed = json.load(open(path))
    assert all(r['names']['format']['mds'] == 'mds' and 'ghost' not in r['names']['format']
               for r in fixed['manifests'].values())


@pytest.mark.parametrize('garbage', ['{not json', '[]', '{"version": 2, "manifests": {"k": 3}}', ''])
def test_a_corrupt_manifest_is_ignored_and_rewritten(tmp_path, garbage):
    cache = str(tmp_path / 'cache')
    path = _manifest_path(cache)
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        f.write(garbage)
    report = _child(f"{_LOOKUP}get_registry('format').get('mds')\nget_registry('format').names()\n", cache)
    assert report['complete']
    assert json.load(open(path))['version'] == plugin_manifest.MANIFEST_VERSION


def _fake_dist(root, dist: str, entry: str, module: str, source: str) -> str:
    site = root / f'site-{dist}'
    info = site / f'{dist.replace("-", "_")}-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text(f'[streaming_core]\n{entry} = {module}\n')
    (site / f'{module}.py').write_text(textwrap.dedent(source))
    return str(site)


def test_installing_a_distribution_changes_the_key_and_its_names_are_found(tmp_path):
    cache = str(tmp_path / 'cache')
    _child('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n', cache)
    site = _fake_dist(tmp_path, 'late-plugin', 'late', 'late_plugin_mod', '''
        from streaming_core.hookspecs import hookimpl

        @hookimpl
        def register_hashes(registry):
            registry.add('late-hash', lambda data: 'late')
    ''')
    found = _child(f"{_LOOKUP}print(get_registry('hash').get('late-hash')"
                   "(b''))\n", cache, site)
    assert found['out'] == ['late'] and found['complete']
    lazy = _child(f"{_LOOKUP}print(get_registry('hash').get('late-hash')"
                  "(b''))\n", cache, site)
    assert lazy['out'] == ['late'] and lazy['loaded'] == ['late']
    key = plugin_manifest.environment_key([site])
    os.utime(os.path.join(site, 'late_plugin-0.1.dist-info', 'entry_points.txt'), ns=(1, 1))
    assert plugin_manifest.environment_key([site]) != key


def test_the_order_of_sys_path_is_part_of_the_key(tmp_path):
    """Two distributions with a plugin of one entry-point name: the first on ``sys.path`` is the one that loads, so a
    manifest written with one order must not be trusted with the other (a cached manifest decoded samples with the
    other distribution's codec)."""
    cache = str(tmp_path / 'cache')
    sites = {}
    for which in ('a', 'b'):
        root = tmp_path / which
        root.mkdir()
        sites[which] = _fake_dist(root, 'shout-plugin', 'shout', f'shout_{which}', f'''
            from streaming_core.hookspecs import hookimpl

            @hookimpl
            def register_hashes(registry):
                registry.add('shout-hash', lambda data: {which!r})
        ''')
    code = f"{_LOOKUP}print(get_registry('hash').get('shout-hash')(b''))\n"
    for first, second in (('a', 'b'), ('b', 'a'), ('a', 'b')):
        found = _child(code, cache, sites[first], sites[second])
        assert found['out'] == [first], (first, found)
    assert plugin_manifest.environment_key([sites['a'], sites['b']]) != \
        plugin_manifest.environment_key([sites['b'], sites['a']])


def test_a_distribution_installed_during_a_discovery_is_not_filed_under_the_new_environment(tmp_path):
    """A ``pip install`` while a process discovers the plugins: what that scan found (without the new distribution's
    plugins) is filed under the environment key taken before the scan, never under the new environment's key, which
    a later process would trust without seeing the new plugins."""
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'racer-plugin', 'racer', 'racer_mod', """
        import os
        late = os.path.join(os.path.dirname(__file__), 'late_plugin-0.1.dist-info')
        os.makedirs(late, exist_ok=True)  # installed while the scan runs
        with open(os.path.join(late, 'entry_points.txt'), 'w') as handle:
            handle.write('[streaming_core]\\nlate = late_plugin_mod\\n')
        with open(os.path.join(late, 'METADATA'), 'w') as handle:
            handle.write('Metadata-Version: 2.1\\nName: late-plugin\\nVersion: 0.1\\n')
        with open(os.path.join(os.path.dirname(__file__), 'late_plugin_mod.py'), 'w') as handle:
            handle.write('from streaming_core.hookspecs import hookimpl\\n@hookimpl\\n'
                         'def register_hashes(registry):\\n    registry.add("late-hash", lambda data: "late")\\n')
    """)
    found = _child("""
        from streaming_core.machinery import manifest
        from streaming_core.machinery.discovery import ensure_loaded
        ensure_loaded()
        print(manifest.read_manifest(manifest.environment_key(), manifest.manifest_path()) is None)
    """, cache, site)
    assert found['out'] == ['True'] and 'racer' in found['loaded']
    later = _child(f"{_LOOKUP}print(get_registry('hash').get('late-hash')(b''))\n", cache, site)
    assert later['out'] == ['late']


def test_a_misspelt_hook_is_reported_when_a_plugin_loads_lazily(tmp_path):
    """check_pending runs on each plugin as it loads: a manifest naming a plugin whose module gained a misspelt hook
    leads to the error naming the plugin and the closest hook, never to a silent miss."""
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'typo-plugin', 'typo', 'typo_plugin_mod', '''
        from streaming_core.hookspecs import hookimpl

        @hookimpl
        def register_hashes(registry):
            registry.add('typo-hash', lambda data: 'ok')
    ''')
    good = _child(f"{_LOOKUP}get_registry('hash').get('typo-hash')\n",
                  cache, site)
    assert good['complete']
    with open(os.path.join(site, 'typo_plugin_mod.py'), 'a') as f:  # the module changes, the metadata does not
        f.write('\n\n@hookimpl\ndef register_codec(registry):\n    pass\n')
    code = '''
        from streaming_core.machinery.lookup import get_registry
        try:
            get_registry('hash').get('typo-hash')
        except Exception as err:
            print(json.dumps([type(err).__name__, str(err)]))
    '''
    report = _child(code, cache, site)
    name, message = json.loads(report['out'][0])
    assert name == 'PluginLoadError'
    assert "'typo'" in message and "'register_codec'" in message and "did you mean 'register_codecs'" in message


def test_an_injected_host_is_used_where_names_are_looked_up():
    builtins_only = PluginHost(HostConfig(autoload=False, blocked=(), manifest=False))
    assert get_registry('hash', host=builtins_only).get('sha256')(b'') is not None
    with pytest.raises(UnknownNameError, match='pip install streaming-mds'):
        get_registry('format', host=builtins_only).get('mds')
    assert get_registry('format').get('mds') is not None  # the process default is untouched
    with using_host(builtins_only) as host:
        assert current_host() is host
        assert 'mds' not in get_registry('format')
    assert current_host() is default_host()
    assert builtins_only.complete and 'mds' not in builtins_only.loaded_plugins()


def test_a_host_pickles_as_its_configuration():
    host = PluginHost(HostConfig(autoload=False, blocked=('builtin.http',), manifest=False))
    host.ensure_loaded()
    blob = pickle.dumps(host)
    assert b'pluggy' not in blob and len(blob) < 1000
    assert pickle.loads(pickle.dumps(default_host())) is default_host()
    code = textwrap.dedent('''
        import pickle, sys, json
        host = pickle.loads(sys.stdin.buffer.read())
        names = host.registry('storage').names()
        print(json.dumps([host.config.blocked, 'https' in names, 'file' in names, host.complete]))
    ''')
    result = subprocess.run([sys.executable, '-c', code], input=blob, capture_output=True, timeout=120,
                            env={**os.environ, 'PYTHONPATH': ROOT})
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout) == [['builtin.http'], False, True, True]


def _converter(name: str) -> types.ModuleType:
    module = types.ModuleType(f'{name}_converter_plugin')

    def add(subparsers):
        parser = subparsers.add_parser(name, help='a converter registered through the hook')
        parser.add_argument('count', type=int)
        parser.set_defaults(run=lambda args: print(f'{name} converted {args.count}'))

    def register_converters(registry):
        registry.add(name, add)

    module.register_converters = hookimpl(register_converters)
    return module


def test_converters_are_an_ordinary_hook_kind(capsys):
    assert KINDS['converter'] == 'register_converters'
    with registered_plugin(_converter('hookconv'), 'hookconv-plugin'):
        assert get_registry('converter').origin('hookconv') == 'hookconv-plugin'
        with pytest.raises(SystemExit):
            main(['convert', '--help'])
        assert 'a converter registered through the hook' in capsys.readouterr().out
        assert main(['convert', 'hookconv', '3']) in (0, None)
        assert 'hookconv converted 3' in capsys.readouterr().out
        assert main(['plugins', '--json']) == 0
        records = json.loads(capsys.readouterr().out)
        mine = [r for r in records if 'hookconv-plugin' in r['plugins']]
        assert mine and mine[0]['registered']['converter'] == ['hookconv']


def test_the_old_converter_group_warns(tmp_path, monkeypatch):
    site = tmp_path / 'old'
    info = site / 'old_conv-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: old-conv\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text('[streaming_core.converters]\noldconv = old_conv_mod:register\n')
    (site / 'old_conv_mod.py').write_text(
        'def register(subparsers):\n    subparsers.add_parser("oldconv").set_defaults(run=lambda args: 0)\n')
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(BLOCK, raising=False)
    monkeypatch.delenv('STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD', raising=False)
    from streaming_core.tools.convert import discovery
    monkeypatch.setattr(discovery, '_warned', set())
    with pytest.warns(DeprecationWarning, match="'oldconv' of the distribution 'old-conv'.*register_converters"):
        with pytest.raises(SystemExit):
            main(['convert', '--help'])
    assert main(['convert', 'oldconv']) in (0, None)


def test_a_discovery_with_a_plugin_blocked_writes_no_manifest_a_later_process_would_trust(tmp_path):
    # The blocked plugin overrides a name another plugin registers: a manifest written under the block would send a
    # later, unblocked lookup to the other plugin without ever importing this one.
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'shadow-plugin', 'shadow', 'shadow_plugin_mod', '''
        from streaming_core.hookspecs import hookimpl

        @hookimpl
        def register_hashes(registry):
            registry.add('xxh64', lambda data: 'shadowed', override=True)
    ''')
    code = f"{_LOOKUP}import contextlib\nwith contextlib.suppress(Exception):\n    get_registry('hash').get('nope')\n"
    blocked = _child(code, cache, site, env={BLOCK: 'shadow'})
    assert 'shadow' not in blocked['loaded']
    assert not os.path.exists(_manifest_path(cache))
    unblocked = _child(f"{_LOOKUP}print(get_registry('hash').get('xxh64')(b''))\n", cache, site)
    assert unblocked['out'] == ['shadowed']


def test_registering_an_installed_plugin_again_says_what_to_do():
    import streaming_mds.plugin
    with pytest.raises(ValueError, match=r"already registered as plugin 'mds' .* block it for the test"):
        with registered_plugin(streaming_mds.plugin, name='mds-again'):
            pass


_DATASET = '''
from streaming_core import StreamingDataset
from streaming_core.errors import UnknownNameError
'''


def test_a_dataset_checks_its_order_names_without_importing_their_plugins(tmp_path):
    """Construction checks ``shuffle_algo`` and ``batching_method`` against the manifest: a run that never shuffles
    imports no shuffle plugin, a misspelt or blocked name still fails at construction, and a shuffled run loads the
    shuffle when it plans, with the same order as a process that discovered everything first."""
    from streaming_mds import MDSWriter
    local = str(tmp_path / 'data')
    with MDSWriter(out=local, columns={'id': 'int'}, size_limit=200) as writer:
        for i in range(40):
            writer.write({'id': i})
    cache = str(tmp_path / 'cache')
    for _ in range(2):  # without, then with the manifest file the first process writes
        plain = _child(_DATASET + f"ds = StreamingDataset(local={local!r}, batch_size=4)\nprint(int(ds[7]['id']))\n",
                       cache)
        assert plain['out'] == ['7'] and not plain['complete']
        assert plain['loaded'] == ['mds'] and 'streaming_py1e' not in plain['modules'], plain
    shuffled = f"ds = StreamingDataset(local={local!r}, batch_size=4, shuffle=True, shuffle_seed=5)\n" \
               "print(json.dumps([int(s['id']) for s in ds]))\n"
    lazy = _child(_DATASET + shuffled, cache)
    assert 'py1e' in lazy['loaded'] and not lazy['complete']
    full = _child('from streaming_core.machinery.discovery import ensure_loaded\nensure_loaded()\n' + _DATASET
                  + shuffled, str(tmp_path / 'cache-full'))
    assert full['complete'] and lazy['out'] == full['out']
    order = json.loads(lazy['out'][0])
    assert sorted(order) == list(range(40)) and order != list(range(40))
    misspelt = _child(_DATASET + textwrap.dedent(f'''
        for kwargs in ({{'shuffle_algo': 'py1ee'}}, {{'batching_method': 'randomm'}}):
            try:
                StreamingDataset(local={local!r}, batch_size=4, **kwargs)
            except (UnknownNameError, ValueError) as err:
                print(json.dumps(str(err)))
    '''), cache)
    assert len(misspelt['out']) == 2 and misspelt['complete']
    assert "Did you mean 'py1e'" in misspelt['out'][0] and "Did you mean 'random'" in misspelt['out'][1]
    blocked = _child(_DATASET + textwrap.dedent(f'''
        try:
            StreamingDataset(local={local!r}, batch_size=4)
        except UnknownNameError as err:
            print(json.dumps(str(err)))
    '''), cache, env={BLOCK: 'py1e'})
    assert len(blocked['out']) == 1 and "Unknown shuffle algorithm 'py1e'" in blocked['out'][0], blocked


def test_a_declared_shuffle_whose_plugin_cannot_import_fails_when_an_epoch_is_first_planned(tmp_path):
    """Construction trusts the declarations (the plugin is not imported to check the name); a plugin that cannot
    import then fails, naming itself and the cause, when the first epoch is planned, before any sample is read."""
    from streaming_mds import MDSWriter
    site = _fake_dist(tmp_path, 'brokenshuffle', 'brokenshuffle', 'brokenshuffle_plugin',
                      'import a_module_that_is_not_installed\n')
    info = tmp_path / 'site-brokenshuffle' / 'brokenshuffle-0.1.dist-info' / 'entry_points.txt'
    info.write_text(info.read_text() + '\n[streaming_core.names]\nshuffle.py9 = brokenshuffle_plugin\n')
    local = str(tmp_path / 'data')
    with MDSWriter(out=local, columns={'id': 'int'}, size_limit=200) as writer:
        for i in range(20):
            writer.write({'id': i})
    report = _child(_DATASET + textwrap.dedent(f'''
        ds = StreamingDataset(local={local!r}, batch_size=4, shuffle=True, shuffle_algo='py9')
        print(json.dumps(int(ds[3]['id'])))
        try:
            next(iter(ds))
        except Exception as err:
            print(json.dumps(f'{{type(err).__name__}}: {{err}}'))
    '''), str(tmp_path / 'cache'), site)
    assert report['out'][0] == '3' and len(report['out']) == 2, report
    message = json.loads(report['out'][1])
    assert message.startswith('PluginLoadError') and 'brokenshuffle' in message, message
    assert 'a_module_that_is_not_installed' in message, message


def test_the_key_does_not_depend_on_directories_without_distributions(tmp_path):
    """The working directory and a script's directory are on ``sys.path``: running from another directory is the
    same environment (one manifest, not one per directory, of which eight are kept)."""
    site = _fake_dist(tmp_path, 'some-plugin', 'some', 'some_mod', '')
    for which in ('a', 'b'):
        (tmp_path / which).mkdir()
    assert plugin_manifest.environment_key([str(tmp_path / 'a'), site]) == \
        plugin_manifest.environment_key([str(tmp_path / 'b'), site])
