"""The core's import graph: no cycle inside ``streaming_core``, and no core module importing a plugin package.

Every module of ``streaming_core`` is parsed with :mod:`ast` (never imported). Every import counts: module level,
inside functions, inside ``try`` blocks; only the bodies of ``if TYPE_CHECKING:`` blocks are skipped (they never
run). ``from package import name`` is an edge to ``package.name`` when that is a module of the core, else to
``package`` itself. Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; those implicit parent
edges are not counted (the package facades re-export lazily and would otherwise close a trivial circle through
every package).
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = 'streaming_core'

#: Cycles that exist and are owned by someone else's ongoing work, each as the sorted tuple of its modules. The test
#: fails on any cycle not listed here, and on a listed one that no longer exists (so the list only shrinks).
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _module_files() -> dict[str, str]:
    """``{dotted module name: path}`` for every module of the core package."""
    modules: dict[str, str] = {}
    base = os.path.join(ROOT, CORE)
    for directory, subdirs, files in os.walk(base):
        subdirs[:] = sorted(d for d in subdirs if d != '__pycache__')
        rel = os.path.relpath(directory, ROOT)
        package = rel.replace(os.sep, '.')
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            dotted = package if name == '__init__.py' else f'{package}.{name[:-3]}'
            modules[dotted] = os.path.join(directory, name)
    return modules


def _plugin_packages() -> set[str]:
    """Top-level import names of every plugin distribution in this repository (first-party and the example)."""
    names: set[str] = set()
    for parent in ('plugins', 'examples'):
        top = os.path.join(ROOT, parent)
        if not os.path.isdir(top):
            continue
        for dist in os.listdir(top):
            dist_dir = os.path.join(top, dist)
            if not os.path.isdir(dist_dir):
                continue
            for entry in os.listdir(dist_dir):
                if os.path.isfile(os.path.join(dist_dir, entry, '__init__.py')) and entry != 'tests':
                    names.add(entry)
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == 'TYPE_CHECKING'
    return isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, str | None, int]]:
    """``(imported module, imported name or None, line)`` for every import that can run."""
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split('.')
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = '.'.join(parts[:keep])
                target = f'{base}.{node.module}' if node.module else base
            else:
                target = node.module or ''
            for alias in node.names:
                found.append((target, alias.name, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """The import graph of the core and the list of core -> plugin imports (``module:line -> target``)."""
    files = _module_files()
    plugin_tops = _plugin_packages()
    graph: dict[str, set[str]] = {name: set() for name in files}
    plugin_imports: list[str] = []
    for module, path in files.items():
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read(), filename=path)
        for target, name, line in _imports(tree, module, path.endswith('__init__.py')):
            top = target.split('.')[0]
            if top in plugin_tops:
                plugin_imports.append(f'{module}:{line} -> {target}')
                continue
            if top != CORE:
                continue
            if name is not None and f'{target}.{name}' in files:
                target = f'{target}.{name}'
            if target in files and target != module:
                graph[module].add(target)
    return graph, plugin_imports


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Every strongly connected component with more than one module (Tarjan), each as a sorted tuple."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[tuple[str, ...]] = []
    counter = [0]

    def strongconnect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                strongconnect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return sorted(components)


def _describe(graph: dict[str, set[str]], component: tuple[str, ...]) -> str:
    """One concrete circle through a component, for the failure message."""
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    node = start
    while True:
        nexts = sorted(s for s in graph[node] if s in members)
        if start in nexts and len(path) > 1:
            return ' -> '.join([*path, start])
        unvisited = [s for s in nexts if s not in seen]
        if not unvisited:
            return ' <-> '.join(component)
        node = unvisited[0]
        path.append(node)
        seen.add(node)


def test_the_parser_sees_every_kind_of_import():
    source = (
        'from typing import TYPE_CHECKING\n'
        'import streaming_core.errors\n'
        'from . import registry\n'
        'from .util import thing\n'
        'if TYPE_CHECKING:\n'
        '    from streaming_core.dataset import StreamingDataset\n'
        'else:\n'
        '    from streaming_core import paths\n'
        'def f():\n'
        '    from streaming_core.plugins import ensure_loaded\n'
        '    try:\n'
        '        import streaming_mds\n'
        '    except ImportError:\n'
        '        pass\n'
    )
    found = {(target, name) for target, name, _ in _imports(ast.parse(source), 'streaming_core.stream', False)}
    assert ('streaming_core.errors', None) in found
    assert ('streaming_core', 'registry') in found
    assert ('streaming_core.util', 'thing') in found
    assert ('streaming_core', 'paths') in found
    assert ('streaming_core.plugins', 'ensure_loaded') in found
    assert ('streaming_mds', None) in found
    assert not any(target == 'streaming_core.dataset' for target, _ in found)
    nested = {t for t, _, _ in _imports(ast.parse('from .. import errors\nfrom .base import X\n'),
                                        'streaming_core.convert.runner', False)}
    assert nested == {'streaming_core', 'streaming_core.convert.base'}
    init = {t for t, _, _ in _imports(ast.parse('from .base import X\n'), 'streaming_core.convert', True)}
    assert init == {'streaming_core.convert.base'}


def test_cycle_finder_finds_a_circle():
    graph = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}, 'e': set()}
    assert _cycles(graph) == [('a', 'b', 'c')]
    assert _describe(graph, ('a', 'b', 'c')) == 'a -> b -> c -> a'


def test_graph_covers_the_whole_core():
    graph, _ = _graph()
    assert 'streaming_core.machinery.discovery' in graph and 'streaming_core.tools.convert.runner' in graph
    assert 'streaming_core.errors' in graph['streaming_core.machinery.discovery']
    # convert.runner imports the registry only inside functions: such imports count.
    assert 'streaming_core.machinery.lookup' in graph['streaming_core.tools.convert.runner']
    assert {'streaming_mds', 'streaming_s3', 'streaming_py1e'} <= _plugin_packages()


def test_no_import_cycle_in_the_core():
    graph, _ = _graph()
    cycles = _cycles(graph)
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not new, 'Import cycles in streaming_core (every import counts, except under TYPE_CHECKING):\n' + '\n'.join(
        _describe(graph, c) for c in new)
    fixed = KNOWN_CYCLES - set(cycles)
    if fixed:
        pytest.fail(f'These known cycles are gone: remove them from KNOWN_CYCLES: {sorted(fixed)}')


def test_no_core_module_imports_a_plugin_package():
    _, plugin_imports = _graph()
    assert not plugin_imports, 'The core must not import plugin packages (ask the registry by name instead):\n' + \
        '\n'.join(plugin_imports)


#: The wings, each importing only from wings after it in this list (``builtin`` holds plugins: it may use any).
WING_ORDER = ['tools', 'writing', 'reading', 'ordering', 'storage', 'machinery', 'common']
#: The modules allowed at the top of the core: the public facade and the entry modules.
TOP_LEVEL = {'__init__', '_moved', 'errors', 'plugin_api', 'hookspecs', 'testing', 'cli', 'compat', 'util'}


def _wing(module: str) -> str | None:
    parts = module.split('.')
    return parts[1] if len(parts) > 2 else None


def test_the_top_level_holds_only_the_facade_and_entry_modules():
    base = os.path.join(ROOT, CORE)
    modules = {name[:-3] for name in os.listdir(base) if name.endswith('.py')}
    packages = {name for name in os.listdir(base)
                if os.path.isfile(os.path.join(base, name, '__init__.py'))}
    assert modules == TOP_LEVEL
    assert packages == {*WING_ORDER, 'builtin'}


def test_each_wing_imports_only_the_wings_after_it():
    graph, _ = _graph()
    wrong = []
    for module, targets in graph.items():
        source = _wing(module)
        if source not in WING_ORDER:
            continue
        for target in targets:
            wing = _wing(target) if target.startswith(CORE + '.') else None
            if wing is None or wing == source:
                continue
            if wing == 'builtin' or WING_ORDER.index(wing) < WING_ORDER.index(source):
                wrong.append(f'{module} -> {target}')
    assert not wrong, 'imports against the wing order:\n' + '\n'.join(sorted(wrong))


def test_the_architecture_page_names_every_module_of_every_wing():
    page = open(os.path.join(ROOT, 'docs', 'architecture.md')).read()
    rows = {line.split('|')[1].strip().strip('`'): line for line in page.splitlines()
            if line.startswith('| `') and line.split('|')[1].strip().strip('`').rstrip('/') in WING_ORDER}
    missing = []
    for wing in WING_ORDER:
        row = rows.get(f'{wing}/', '')
        for name in sorted(os.listdir(os.path.join(ROOT, CORE, wing))):
            if name == '__init__.py' or name.startswith(('_', '.')) or name == '__pycache__':
                continue
            shown = f'`{name}`' if name.endswith('.py') else f'`{name}/`'
            if (name.endswith('.py') or os.path.isdir(os.path.join(ROOT, CORE, wing, name))) and shown not in row:
                missing.append(f'{wing}/{name}')
    assert not missing, f'docs/architecture.md does not name: {missing}'
