"""Hook implementations are checked and called through pluggy (issue 14).

A plugin with ``@hookimpl def register_codec(registry)`` (singular) used to load, register nothing and tell nobody.
Now it is an error naming the plugin, the bad hook name and the closest valid one. The third-party plugins here are
real distributions, built and installed by pip into a private directory (never into the shared virtualenv) and
discovered through their entry points in fresh processes, as a user's script would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest

from streaming_core.errors import PluginLoadError
from streaming_core.hookspecs import hookimpl
from streaming_core.machinery import discovery as plugins
from streaming_core.machinery.lookup import get_registry
from streaming_core.testing import registered_plugin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PYPROJECT = '''
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.3.0"
dependencies = []

[project.entry-points.streaming_core]
{entry} = "{package}.plugin"

[tool.setuptools]
packages = ["{package}"]
'''

TYPO_PLUGIN = '''
from streaming_core.hookspecs import hookimpl


class Upper:
    size = None
    unsafe = False

    def __init__(self, args=None):
        pass

    def encode(self, obj):
        return obj.upper().encode()

    def decode(self, data):
        return bytes(data).decode()


@hookimpl
def register_codec(registry):          # misspelt: the hook is register_codecs
    registry.add('upper', Upper)
'''

# One plugin exercising pluggy's calling conventions: ordering inside the plugin, a wrapper, and an implementation
# that takes none of the hook's arguments (pluggy passes only what an implementation declares).
ORDERED_PLUGIN = '''
from streaming_core.hookspecs import hookimpl

CALLS = []


@hookimpl(specname='register_hashes', trylast=True)
def late(registry):
    CALLS.append('late')
    registry.add('ordered-hash', lambda data: 'late', override=True)


@hookimpl(specname='register_hashes', tryfirst=True)
def early(registry):
    CALLS.append('early')
    registry.add('ordered-hash', lambda data: 'early')


@hookimpl(specname='register_hashes', wrapper=True)
def around(registry):
    CALLS.append('before')
    result = yield
    CALLS.append('after')
    return result


@hookimpl
def register_compressors():
    CALLS.append('no-arguments')


@hookimpl(optionalhook=True)
def register_something_later(registry):
    CALLS.append('never called: optional hooks of a future version are allowed')
'''


def _install(target, tmp_path, dist: str, entry: str, package: str, code: str) -> None:
    project = tmp_path / dist
    (project / package).mkdir(parents=True)
    (project / 'pyproject.toml').write_text(PYPROJECT.format(dist=dist, entry=entry, package=package))
    (project / package / '__init__.py').write_text('')
    (project / package / 'plugin.py').write_text(code)
    result = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-build-isolation',
                             '--disable-pip-version-check', '--target', str(target), str(project)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """A directory holding the two pip-installed third-party plugin distributions."""
    tmp_path = tmp_path_factory.mktemp('plugin-dists')
    target = tmp_path / 'site'
    _install(target, tmp_path, 'streaming-typo-plugin', 'typo', 'streaming_typo_plugin', TYPO_PLUGIN)
    _install(target, tmp_path, 'streaming-ordered-plugin', 'ordered', 'streaming_ordered_plugin', ORDERED_PLUGIN)
    return str(target)


def _run(site: str, code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, 'PYTHONPATH': os.pathsep.join([site, ROOT]), **env}
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True,
                          env=environ, timeout=300, cwd=ROOT)


def test_misspelt_hook_in_an_installed_plugin_is_an_error_naming_plugin_hook_and_fix(site, tmp_path):
    result = _run(site, '''
        from streaming_core import StreamingDataset
        StreamingDataset(local='unused', batch_size=1)
    ''')
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith('streaming_core.errors.PluginLoadError: ')
    assert "Plugin 'typo'" in last and "'streaming-typo-plugin'" in last and 'streaming_typo_plugin.plugin' in last
    assert "'register_codec'" in last and "did you mean 'register_codecs'?" in last
    assert 'STREAMING_CORE_BLOCK_PLUGINS=typo' in last


def test_blocking_the_misspelt_plugin_lets_everything_else_load(site):
    result = _run(site, '''
        from streaming_core.machinery import discovery as plugins
        from streaming_core.machinery.lookup import get_registry
        names = {info.name for info in plugins.plugin_infos()}
        codecs, formats = get_registry('codec'), get_registry('format')
        print('typo' in names, 'ordered' in names, 'upper' in codecs, formats.origin('mds'))
    ''', STREAMING_CORE_BLOCK_PLUGINS='typo')
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['False', 'True', 'False', 'mds']


def test_hooks_are_called_through_pluggy_in_an_installed_plugin(site):
    result = _run(site, '''
        import streaming_ordered_plugin.plugin as plugin
        from streaming_core.machinery import discovery as plugins
        from streaming_core.machinery.lookup import get_registry
        info = {i.name: i for i in plugins.plugin_infos()}['ordered']
        print(plugin.CALLS)
        print(get_registry('hash').get('ordered-hash')(b''), get_registry('hash').origin('ordered-hash'))
        print(info.distribution, info.registered)
    ''', STREAMING_CORE_BLOCK_PLUGINS='typo')
    assert result.returncode == 0, result.stderr
    calls, hashed, registered = result.stdout.strip().splitlines()
    # Kinds in their order (compressors before hashes); inside a hook pluggy's order: the wrapper around both,
    # tryfirst before trylast.
    assert calls == "['no-arguments', 'before', 'early', 'late', 'after']"
    assert hashed == 'late ordered'
    assert registered == "streaming-ordered-plugin {'hash': ['ordered-hash']}"


def test_misspelt_hook_registered_in_process_is_refused_and_leaves_nothing(tmp_path):
    module = types.ModuleType('typo_in_process')
    module.register_hashes = hookimpl(lambda registry: registry.add('typo-ok-hash', lambda data: '00'))
    module.register_shuffle_algorithm = hookimpl(lambda registry: None)
    with pytest.raises(PluginLoadError) as info:
        plugins.register_plugin(module, 'typo-in-process')
    message = str(info.value)
    assert "Plugin 'typo-in-process'" in message
    assert "'register_shuffle_algorithm' (did you mean 'register_shuffle_algorithms'?), which is" in message
    assert 'typo-in-process' not in {i.name for i in plugins.plugin_infos()}
    assert 'typo-ok-hash' not in get_registry('hash')
    assert plugins.get_plugin_manager().get_plugin('typo-in-process') is None
    # The same object, fixed, registers fine afterwards (nothing was left behind in pluggy).
    del module.register_shuffle_algorithm
    with registered_plugin(module, 'typo-in-process') as registered:
        assert registered.registered == {'hash': ['typo-ok-hash']}


def test_a_hook_name_far_from_any_hook_lists_the_hooks():
    module = types.ModuleType('far_typo')
    module.setup_everything = hookimpl(lambda registry: None)
    with pytest.raises(PluginLoadError) as info:
        plugins.register_plugin(module, 'far-typo')
    message = str(info.value)
    assert "'setup_everything', which is not a streaming_core hook" in message and 'did you mean' not in message
    assert 'register_batching_methods, register_codecs' in message


def test_hook_signature_not_matching_the_spec_is_an_error_naming_the_plugin():
    module = types.ModuleType('bad_signature')
    module.register_codecs = hookimpl(lambda registry, extra: None)
    expected = r"Plugin 'bad-signature'.*invalid hook implementation.*'register_codecs'.*extra"
    with pytest.raises(PluginLoadError, match=expected):
        plugins.register_plugin(module, 'bad-signature')
    assert plugins.get_plugin_manager().get_plugin('bad-signature') is None


def test_each_plugin_is_credited_with_its_own_names_when_two_implement_the_same_hook():
    first = types.ModuleType('credit_first')
    first.register_hashes = hookimpl(lambda registry: registry.add('credit-a', lambda data: 'a'))
    second = types.ModuleType('credit_second')
    second.register_hashes = hookimpl(lambda registry: registry.add('credit-b', lambda data: 'b'))
    with registered_plugin(first, 'credit-first') as one, registered_plugin(second, 'credit-second') as two:
        assert one.registered == {'hash': ['credit-a']} and two.registered == {'hash': ['credit-b']}
        assert get_registry('hash').origin('credit-a') == 'credit-first'
        assert get_registry('hash').origin('credit-b') == 'credit-second'
    assert 'credit-a' not in get_registry('hash') and 'credit-b' not in get_registry('hash')
