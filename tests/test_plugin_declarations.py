"""Plugins declare the names they register (issue 15): the first process of an environment, with no plugin manifest
yet, imports only the plugin that declares a looked-up name; a declaration that differs from what the plugin really
registers is an error naming the plugin; an environment with a plugin that declares nothing discovers everything.

Each case runs in a fresh process with its own cache root (no manifest); third-party plugins are real distributions
(a ``*.dist-info`` directory with entry points) on the child's ``sys.path``.
"""

from __future__ import annotations

import json
import os
import textwrap

from streaming_core.machinery.declarations import (
    BUILTIN_NAMES,
    DECLARATION_GROUP,
    declared_manifest,
    parse_entry_points,
    read_declarations,
)
from tests.fixtures.child_report import child_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORT = '''
import json, sys
from streaming_core.machinery.discovery import default_host
host = default_host()
print(json.dumps({'loaded': sorted(host.loaded_plugins()), 'complete': host.complete,
                  'modules': sorted(m for m in sys.modules if m.startswith('streaming_') and m.count('.') == 0),
                  'state': sorted(os.listdir(os.path.join(os.environ['STREAMING_CORE_CACHE_DIR'], 'state')))
                  if os.path.isdir(os.path.join(os.environ['STREAMING_CORE_CACHE_DIR'], 'state')) else []}))
'''


def _child(code: str, cache: str, *paths: str) -> dict:
    return child_report('import json, os\n' + textwrap.dedent(code) + REPORT, cache, *paths)


def _fake_dist(root, dist: str, entry: str, module: str, source: str, declared: list[str] | None) -> str:
    site = root / f'site-{dist}'
    info = site / f'{dist.replace("-", "_")}-0.3.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n')
    text = f'[streaming_core]\n{entry} = {module}\n'
    if declared is not None:
        text += f'\n[{DECLARATION_GROUP}]\n' + ''.join(f'{name} = {module}\n' for name in declared)
    (info / 'entry_points.txt').write_text(text)
    (site / f'{module}.py').write_text(textwrap.dedent(source))
    return str(site)


_HASHES = '''
    from streaming_core.plugin_api import hookimpl

    @hookimpl
    def register_hashes(registry):
        registry.add('decl-hash', lambda data: 'declared')
        registry.add('decl-hash2', lambda data: 'declared too')
'''

_LOOKUP = "from streaming_core.machinery.lookup import get_registry\n"


def test_the_first_lookup_imports_only_the_declaring_plugins(tmp_path):
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'decl-plugin', 'decl', 'decl_plugin_mod', _HASHES,
                      ['hash.decl-hash', 'hash.decl-hash2'])
    first = _child(f"{_LOOKUP}get_registry('format').get('mds')\nget_registry('storage').get('file')\n"
                   "print(get_registry('hash').get('decl-hash')(b''))\n", cache, site)
    assert first['out'] == ['declared']
    assert first['loaded'] == ['builtin.local', 'decl', 'mds'] and not first['complete']
    assert 'streaming_s3' not in first['modules'] and 'streaming_hf' not in first['modules']
    # The declarations it read are kept as the environment's manifest: the next process reads one file instead of
    # every distribution's metadata, and still imports only the declaring plugin.
    assert len(first['state']) == 1 and first['state'][0].startswith('plugin-manifest-')
    second = _child(f"{_LOOKUP}print(get_registry('hash').get('decl-hash2')(b''))\n", cache, site)
    assert second['out'] == ['declared too'] and second['loaded'] == ['decl'] and not second['complete']
    infos = _child(f"{_LOOKUP}get_registry('hash').get('decl-hash')\n"
                   "from streaming_core.machinery.discovery import plugin_infos\n"
                   "print(json.dumps({i.name: [i.distribution, i.version, i.registered] for i in plugin_infos()}))\n",
                   cache, site)
    table = json.loads(infos['out'][0])
    assert table['decl'] == ['decl-plugin', '0.3', {'hash': ['decl-hash', 'decl-hash2']}]
    assert table['builtin.local'][0] == 'streaming-core' and table['mds'][0] == 'streaming-mds'
    assert infos['complete'] and len(infos['state']) == 1, 'listing discovers everything and writes the manifest'


def test_listing_one_kind_imports_only_the_plugins_of_that_kind(tmp_path):
    """Detecting a directory's format lists every index builder: only the plugins declaring one are imported, and
    the listing is the one a full discovery gives (before and after the manifest exists)."""
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'decl-plugin', 'decl', 'decl_plugin_mod', _HASHES,
                      ['hash.decl-hash', 'hash.decl-hash2'])
    listing = (f"{_LOOKUP}print(json.dumps([[e.name, e.plugin] for e in get_registry('index_builder').entries()]))\n"
               "print(json.dumps([e.name for e in get_registry('hash').entries()]))\n")
    lazy = _child(listing, cache, site)
    assert not lazy['complete'] and 'streaming_s3' not in lazy['modules'] and 'streaming_hf' not in lazy['modules']
    builders, hashes = json.loads(lazy['out'][0]), json.loads(lazy['out'][1])
    assert {'parquet', 'webdataset'} <= {name for name, _ in builders}
    assert {'decl-hash', 'decl-hash2', 'sha1', 'xxh64'} <= set(hashes)
    full = _child('from streaming_core.machinery.discovery import plugin_infos\nplugin_infos()\n' + listing,
                  cache, site)
    assert full['complete'] and full['out'] == lazy['out'] and set(lazy['loaded']) < set(full['loaded'])
    trusted = _child(listing, cache, site)  # the manifest the full discovery wrote
    assert not trusted['complete'] and trusted['out'] == lazy['out'] and trusted['loaded'] == lazy['loaded']


def test_a_declaration_that_differs_from_the_registrations_is_an_error_naming_the_plugin(tmp_path):
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'liar-plugin', 'liar', 'liar_plugin_mod', _HASHES, ['hash.decl-hash', 'hash.ghost'])
    code = f'''
        {_LOOKUP.strip()}
        try:
            get_registry('hash').get('decl-hash')
        except Exception as err:
            print(json.dumps([type(err).__name__, str(err)]))
    '''
    for _ in range(2):  # the second process reads the manifest the first one wrote from the declarations
        report = _child(code, cache, site)
        name, message = json.loads(report['out'][0])
        assert name == 'PluginLoadError'
        assert "Plugin 'liar'" in message and "registers hash ['decl-hash2'] without declaring" in message
        assert "declares hash ['ghost'] but does not register" in message and 'liar-plugin' in message


def test_a_plugin_without_declarations_makes_the_first_lookup_discover_everything(tmp_path):
    cache = str(tmp_path / 'cache')
    site = _fake_dist(tmp_path, 'plain-plugin', 'plain', 'plain_plugin_mod', _HASHES, None)
    first = _child(f"{_LOOKUP}get_registry('format').get('mds')\n", cache, site)
    assert first['complete'] and 'plain' in first['loaded'] and len(first['state']) == 1
    second = _child(f"{_LOOKUP}print(get_registry('hash').get('decl-hash2')(b''))\n", cache, site)
    assert second['out'] == ['declared too'] and second['loaded'] == ['plain'], 'then the manifest makes it lazy'


def test_every_first_party_plugin_declares_exactly_what_it_registers():
    """The installed first-party distributions and the builtins declare their names (a full discovery would raise
    on a mismatch); a name declared by two plugins is left to the full discovery."""
    from streaming_core.machinery.discovery import plugin_infos
    infos = {info.name: info for info in plugin_infos()}
    found = read_declarations()
    for name in ('mds', 'py1e', 'parquet', 'hf', 's3', 'webdataset'):
        assert found[name].names == {k: set(v) for k, v in infos[name].registered.items()}, name
    for name, declared in BUILTIN_NAMES.items():
        assert infos[name].registered == {k: list(v) for k, v in declared.items()}, name
    manifest = declared_manifest([('builtin.local', 'streaming_core.builtin.local')], True, set(), ['format'])
    assert manifest is not None and manifest['names']['format']['mds'] == 'mds'
    assert manifest['names']['storage']['file'] == 'builtin.local'


def test_entry_points_text_is_parsed_like_importlib_metadata():
    text = '[streaming_core]\nmds = streaming_mds.plugin\n# a comment\n\n[streaming_core.names]\n' \
           'codec.list[jpeg] = streaming_mds.plugin\nformat.mds=streaming_mds.plugin\n'
    assert parse_entry_points(text) == {
        'streaming_core': [('mds', 'streaming_mds.plugin')],
        'streaming_core.names': [('codec.list[jpeg]', 'streaming_mds.plugin'), ('format.mds', 'streaming_mds.plugin')]}


def test_a_distribution_whose_entry_points_are_not_utf8_is_skipped(tmp_path):
    """Another package's damaged ``entry_points.txt`` (not UTF-8) on the path: discovery goes on (it raised a bare
    ``UnicodeDecodeError`` for every lookup)."""
    broken = tmp_path / 'broken-1.0.dist-info'
    broken.mkdir()
    (broken / 'entry_points.txt').write_bytes(b'[console_scripts]\nx = \xff\xfe\n')
    ours = tmp_path / 'ours-1.0.dist-info'
    ours.mkdir()
    (ours / 'entry_points.txt').write_text('[streaming_core]\nmine = ours.plugin\n')
    assert list(read_declarations([str(tmp_path)])) == ['mine']
