"""Registries and plugin discovery: lazy loading, helpful errors, duplicates, broken plugins, switches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest

from streaming_core.errors import DuplicateNameError, PluginLoadError, UnknownNameError
from streaming_core.hookspecs import hookimpl
from streaming_core.machinery import discovery as plugins
from streaming_core.machinery.lookup import INSTALL_HINTS, KINDS, Registry, get_registry
from streaming_core.testing import fresh_plugin_manager, registered_plugin


def test_unknown_name_lists_installed_names_and_suggests():
    with pytest.raises(UnknownNameError) as info:
        get_registry('hash').get('sha257')
    message = str(info.value)
    assert "Unknown hash algorithm 'sha257'" in message
    assert 'sha256' in message and 'xxh3_64' in message
    assert "Did you mean 'sha256'?" in message
    assert isinstance(info.value, LookupError)


def test_uninstalled_first_party_name_gives_the_pip_install():
    with fresh_plugin_manager(blocked=('py1e',)):
        with pytest.raises(UnknownNameError) as info:
            get_registry('shuffle').get('py1e')
    message = str(info.value)
    assert 'pip install streaming-py1e' in message
    assert 'naive' in message  # the installed names are listed


def test_every_kind_has_a_registry_and_hook():
    from streaming_core import hookspecs
    for kind, hook in KINDS.items():
        assert get_registry(kind).kind == kind
        assert callable(getattr(hookspecs, hook))
    with pytest.raises(ValueError, match='Unknown registry kind'):
        get_registry('nope')


def _plugin(**hooks):
    module = types.ModuleType('inline_plugin')
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    return module


def test_duplicate_name_names_both_plugins():
    first = _plugin(register_hashes=lambda registry: registry.add('dup-hash', lambda data: '00'))
    second = _plugin(register_hashes=lambda registry: registry.add('dup-hash', lambda data: '11'))
    with registered_plugin(first, 'first-plugin'):
        with pytest.raises(PluginLoadError) as info:
            with registered_plugin(second, 'second-plugin'):
                pass
        cause = info.value.__cause__
        assert isinstance(cause, DuplicateNameError)
        assert 'first-plugin' in str(cause) and 'second-plugin' in str(cause)
        assert get_registry('hash').get('dup-hash')(b'') == '00'
    assert 'dup-hash' not in get_registry('hash')


def test_override_is_explicit():
    first = _plugin(register_hashes=lambda registry: registry.add('ovr-hash', lambda data: '00'))
    second = _plugin(register_hashes=lambda registry: registry.add('ovr-hash', lambda data: '11', override=True))
    with registered_plugin(first, 'p1'), registered_plugin(second, 'p2'):
        assert get_registry('hash').get('ovr-hash')(b'') == '11'
        assert get_registry('hash').origin('ovr-hash') == 'p2'


def test_registry_add_validates_names():
    registry = Registry('hash')
    with pytest.raises(ValueError, match='non-empty string'):
        registry.add('', object(), plugin='x')
    registry.add('a', 1, plugin='x')
    assert registry.names() == ['a'] and registry.origin('a') == 'x'


def test_hook_failure_is_reported_with_plugin_name():
    def broken(registry):
        raise RuntimeError('boom in hook')
    with pytest.raises(PluginLoadError, match="Plugin 'hook-breaker'.*register_codecs.*boom in hook"):
        with registered_plugin(_plugin(register_codecs=broken), 'hook-breaker'):
            pass
    assert 'hook-breaker' not in {info.name for info in plugins.plugin_infos()}


def test_broken_entry_point_is_reported_with_name_and_cause(tmp_path, monkeypatch):
    dist = tmp_path / 'broken_plugin-0.1.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n')
    (dist / 'entry_points.txt').write_text('[streaming_core]\nbroken = broken_plugin_mod\n')
    (tmp_path / 'broken_plugin_mod.py').write_text('import a_module_that_does_not_exist\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with fresh_plugin_manager():
        with pytest.raises(PluginLoadError) as info:
            get_registry('hash').names()
        assert "Plugin 'broken'" in str(info.value) and 'broken-plugin' in str(info.value)
        assert isinstance(info.value.__cause__, ModuleNotFoundError)
        assert 'STREAMING_CORE_BLOCK_PLUGINS=broken' in str(info.value)
    with fresh_plugin_manager(blocked=('broken',)):
        assert 'sha1' in get_registry('hash').names()


def test_disable_autoload_keeps_only_builtins():
    with fresh_plugin_manager(autoload=False):
        assert get_registry('shuffle').names() == ['naive']
        assert 'zstd' not in get_registry('compressor')
        names = {info.distribution for info in plugins.plugin_infos()}
        assert names == {'streaming-core'}


def test_builtins_use_the_same_registration_path():
    infos = {info.name: info for info in plugins.plugin_infos()}
    assert infos['builtin.hashes'].registered['hash'][:2] == ['blake2b', 'blake2s']
    assert infos['builtin.local'].registered['storage'] == ['file']
    assert get_registry('storage').origin('https') == 'builtin.http'


def test_first_party_distributions_are_discovered():
    dists = {info.distribution for info in plugins.plugin_infos()}
    expected = {f'streaming-{name}' for name in ('mds', 'jsonl', 'csv', 'compression', 's3', 'gcs', 'oci', 'azure',
                                                  'py1e', 'stratified')}
    assert expected <= dists


def test_install_hint_catalog_matches_what_each_distribution_registers():
    registered: dict[tuple[str, str], str] = {}
    for info in plugins.plugin_infos():
        for kind, names in info.registered.items():
            for name in names:
                registered[(kind, name)] = info.distribution
    for kind, hints in INSTALL_HINTS.items():
        for name, dist in hints.items():
            assert registered.get((kind, name)) == dist, f'{kind} {name!r} should be registered by {dist}'


def test_import_is_lazy_and_imports_no_plugin_or_sdk():
    code = textwrap.dedent('''
        import sys
        import streaming_core
        from streaming_core.machinery import discovery as plugins
        assert plugins._state['pm'] is None, 'discovery ran at import'
        bad = [m for m in sys.modules if m.split('.')[0] in (
            'boto3', 'botocore', 'google', 'oci', 'azure', 'streaming_mds', 'streaming_s3', 'streaming_gcs',
            'streaming_oci', 'streaming_azure', 'streaming_py1e', 'streaming_jsonl', 'streaming_csv',
            'streaming_compression', 'streaming_stratified', 'zstandard', 'brotli')]
        assert not bad, bad
        streaming_core.World  # public names resolve lazily
        assert plugins._state['pm'] is None
        print('ok')
    ''')
    env = dict(os.environ)
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok'
