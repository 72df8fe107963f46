"""Old code against new code: the same measurements on the tree before the restructuring (issue 14) and on HEAD.

Usage::

    .venv/bin/python benchmarks/bench_versions.py --quick           # smaller data, 3 rounds (~1 min)
    .venv/bin/python benchmarks/bench_versions.py                   # 7 rounds, bigger data, more rows (~3 min)
    .venv/bin/python benchmarks/bench_versions.py --old fbd606c^ --new worktree --rows import,first --profile

**Versions.** ``--old`` (default ``fbd606c^``, the parent of the first plugin-host commit) and ``--new`` (default
``HEAD``; ``worktree``: this working tree with its uncommitted edits) are exported by ``git archive`` into a temporary
directory (removed at the end). A version is selected by ``PYTHONPATH``: ``*.dist-info`` metadata generated from the
tree's own ``pyproject.toml`` files (discovery sees the entry points that tree declares), its root, its ``plugins/*``
directories. Each child drops the installed editable finders of ``streaming*`` packages (they would serve a
submodule the old tree lacks from the working tree) and checks that ``streaming_core`` and ``streaming_mds``, and
after every measurement each loaded ``streaming*`` module, come from its tree: anything else stops the run. Entry
points not declared by both trees (plugins added since, and any installed one) are blocked for both
(``STREAMING_CORE_BLOCK_PLUGINS``), so both load the same plugins (a discovery check lists them). Each version has its
own cache root: the new tree's plugin manifest and binary indexes are its own (the old tree keeps neither).

**Measurements**, one code path for both (``peers/runner.py``'s ``run``, ``peers/impl_ours.py``,
``bench_writer.worker``, and a planning measurement here on the API both trees share):

* ``iter-*``: one warm epoch of small samples (``{'id': int, 'data': 256 B}``) through a DataLoader (batch 256),
  samples/s: 0 workers unshuffled and shuffled (py1e), 2 workers shuffled; the full run adds 2 workers unshuffled
  and images shuffled. Every epoch must be complete (the ids' sum is checked).
* ``access-p50``: ``ds[i]`` median latency over random ids, 10 shards.
* ``first``: constructor to the first sample of ``iter(ds)``, 10 shards, warm (binary index and plugin manifest built
  by a warm-up), in a fresh interpreter; ``import``: ``import streaming_core, streaming_mds`` + ``StreamingDataset``
  there, torch imported first. torch's import leaves a full garbage collection due (~170k objects, 100-300 ms) that
  lands in whichever phase crosses the threshold first: both clocks start after a ``gc.collect()``.
* ``plan``: ``EpochPlanner.plan_node`` for node 0 of 8 canonical nodes (py1e, 8 ranks x 2 workers).
* ``write``: ``MDSWriter`` throughput, small samples, uncompressed (after a 100-sample warm-up writer).

The others run in fresh forks of a per-version server that imported torch and the library once (``gc.freeze()``
first, as ``peers/runner.py --serve``). Rounds interleave the versions per row (old, new, new, old, ...). The table
shows medians and ``new/old``: above 1 is faster for throughput rows (samples/s), below 1 for latency rows (ms, us);
``spread`` is (max - min) / median over the rounds. ``--profile`` cProfiles one more run of each slower row.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, 'peers')
#: Where every measured process caches its bytecode (shared with ``peers/driver.py``).
PYCACHE = os.path.join(tempfile.gettempdir(), 'streaming-core-bench-pycache')
RESULT, DONE = '@@RESULT ', '@@DONE'
ENTRY_POINT_GROUP = 'streaming_core'
#: Imported before any clock starts (the old paths: the new tree aliases them to the very modules that moved).
PRELOAD = ('streaming_core', 'streaming_mds', 'streaming_core.dataset', 'streaming_core.iteration',
           'streaming_core.planning')


@dataclass
class Version:
    """One tree under test."""

    label: str
    commit: str
    root: str
    scratch: str
    packages: dict[str, str]

    def env(self, blocked: list[str]) -> dict[str, str]:
        """The environment of this version's children: ``PYTHONPATH`` = the tree's metadata (:func:`write_metadata`),
        its root and plugin directories; its own cache root; the blocked entry points (see the module doc)."""
        dirs = sorted({os.path.dirname(p) for n, p in self.packages.items() if n != 'streaming_core'})
        path = os.pathsep.join([os.path.join(self.scratch, 'meta'), self.root, *dirs])
        env = dict(os.environ, PYTHONPATH=path, PYTHONPYCACHEPREFIX=PYCACHE,
                   STREAMING_CORE_CACHE_DIR=os.path.join(self.scratch, 'cache'),
                   STREAMING_CORE_BLOCK_PLUGINS=','.join(blocked), TMPDIR=os.path.join(self.scratch, 'tmp'))
        for name in ('PYTHONDONTWRITEBYTECODE', 'STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD',
                     'STREAMING_CORE_PLUGIN_MANIFEST', 'PYTHONSAFEPATH'):
            env.pop(name, None)
        return env


def _under(path: str | None, root: str) -> bool:
    """Whether ``path`` is inside ``root`` (the child side starts here, with the tree first on ``sys.path``)."""
    return path is not None and os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def check_modules(root: str) -> None:
    """Raise unless ``streaming_core``/``streaming_mds`` and every loaded ``streaming*`` module come from ``root``."""
    for name in ('streaming_core', 'streaming_mds'):
        where = getattr(sys.modules.get(name), '__file__', None)
        if not _under(where, root):
            raise SystemExit(f'bench_versions: {name} was loaded from {where}, not from the tree {root}: the '
                             f'version selection by PYTHONPATH failed; no measurement of this run is valid.')
    stray = sorted(f'{name} ({module.__file__})' for name, module in list(sys.modules.items())
                   if (name.split('.')[0] == 'streaming' or name.startswith('streaming_'))
                   and getattr(module, '__file__', None) and not _under(module.__file__, root))
    if stray:
        raise SystemExit(f'bench_versions: modules from outside the tree {root}: {", ".join(stray[:8])}')


def drop_editable_finders() -> None:
    """Remove the editable installs' import hooks of ``streaming*`` packages (see the module doc)."""
    for finder in list(sys.meta_path):
        mapping = getattr(sys.modules.get(getattr(finder, '__module__', '') or ''), 'MAPPING', None)
        if isinstance(mapping, dict) and any(str(name).startswith('streaming') for name in mapping):
            sys.meta_path.remove(finder)


def child_imports(root: str) -> float:
    """Import torch, numpy and the measurement helpers, then (timed) the library; return the library's import time."""
    drop_editable_finders()
    import numpy  # noqa: F401
    import torch.utils.data  # noqa: F401
    sys.path.append(PEERS)  # after the tree: common.py, runner.py, impl_ours.py
    import runner
    gc.collect()  # torch's import leaves a full collection due: settle it outside the clocks (see the module doc)
    start = time.perf_counter()
    import streaming_core
    import streaming_mds  # noqa: F401
    streaming_core.StreamingDataset  # noqa: B018 (the facade imports it lazily)
    seconds = time.perf_counter() - start
    check_modules(root)
    runner.IMPORTS['ours'] = PRELOAD
    runner.preload('ours')
    gc.collect()
    return seconds


def plan_once(spec: dict[str, Any]) -> dict[str, Any]:
    """Time ``EpochPlanner.plan_node`` (node 0; py1e; shards of ``spec['shard']`` samples) on either tree."""
    import numpy as np

    from streaming_core import World, planning
    samples, nodes, shard = spec['samples'], spec['nodes'], spec['shard']
    sizes = np.full(samples // shard, shard, np.int64)
    planner = planning.EpochPlanner(sizes, [len(sizes)], [samples], [1.0], samples, 16, nodes, shuffle=True,
                                    shuffle_algo='py1e', shuffle_seed=9176,
                                    shuffle_block_size=max(4_000_000 // nodes, 1 << 18))
    world = World(0, nodes * 8, 8, 0, 2)
    planner.shuffle_algorithm()  # plugin discovery outside the clock
    start = time.perf_counter()
    out = planner.plan_node(world, 0, 0, 0)
    seconds = time.perf_counter() - start
    return {'seconds': seconds, 'valid': int((out >= 0).sum())}


def child_task(spec: dict[str, Any], root: str) -> dict[str, Any]:
    """One measurement (imports done); every module it loaded is checked afterwards."""
    import runner
    task = spec['task']
    if task == 'check':
        from streaming_core import plugins
        plugins.ensure_loaded()
        loaded = {info.name: sys.modules[info.module.split(':')[0]].__file__ for info in plugins.plugin_infos()
                  if info.module.split(':')[0] in sys.modules}
        result: dict[str, Any] = {'plugins': loaded}
    elif task == 'write' and 'size_limit' not in spec:
        sys.path.append(HERE)
        import bench_writer
        with runner.profiled(spec):
            result = bench_writer.worker('ours', spec['case'], spec.get('compression'), spec['count'], spec['path'])
        result['rate'] = spec['count'] / result['seconds']
    elif task == 'plan':
        with runner.profiled(spec):
            result = plan_once(spec)
    else:  # iterate, first, access (profiled inside), write-the-data
        result = runner.run(spec)
    check_modules(root)
    return result


def serve(root: str) -> None:
    """Fork server: imports once, then one forked child per JSON spec line (``@@RESULT``, ``@@DONE``)."""
    import signal
    import traceback
    child_imports(root)
    gc.freeze()
    for line in sys.stdin:
        spec = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.makedirs(spec['tmpdir'], exist_ok=True)
                os.environ['TMPDIR'] = spec['tmpdir']
                tempfile.tempdir = None
                signal.alarm(int(spec.get('timeout', 600)))
                result = child_task(spec, root)
            except BaseException as err:  # reported to the parent, which stops the run
                result = {'error': f'{type(err).__name__}: {err}', 'trace': traceback.format_exc()[-3000:]}
                code = 1
            signal.alarm(0)
            sys.stdout.write(RESULT + json.dumps(result) + '\n')
            sys.stdout.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            sys.stdout.write(RESULT + json.dumps({'error': f'child died: {os.waitstatus_to_exitcode(status)}'}) + '\n')
        sys.stdout.write(DONE + '\n')
        sys.stdout.flush()


def fresh(spec: dict[str, Any], root: str) -> None:
    """A fresh interpreter for one measurement: prints the result (with ``import_s``) as its last line."""
    import_s = child_imports(root)
    result = child_task(spec, root)
    result['import_s'] = import_s
    print(json.dumps(result), flush=True)


def rev_parse(ref: str) -> str:
    """The full hash of commit ``ref`` of this repository."""
    commit = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--verify', f'{ref}^{{commit}}'], capture_output=True,
                            text=True)
    if commit.returncode:
        raise SystemExit(f'bench_versions: {ref!r} is not a commit of {ROOT}: {commit.stderr.strip()}')
    return commit.stdout.strip()


def export(ref: str, dest: str) -> str:
    """Extract commit ``ref`` of this repository into ``dest`` with ``git archive``; return the full hash."""
    sha = rev_parse(ref)
    os.makedirs(dest)
    proc = subprocess.Popen(['git', '-C', ROOT, 'archive', '--format=tar', sha], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=proc.stdout, mode='r|') as archive:
        archive.extractall(dest, filter='data')
    if proc.wait():
        raise SystemExit(f'bench_versions: git archive {sha} failed (exit {proc.returncode})')
    return sha


def packages(root: str) -> dict[str, str]:
    """``{top-level package: its directory}`` for ``streaming_core`` and every ``plugins/*/<package>`` of a tree."""
    found = {'streaming_core': os.path.join(root, 'streaming_core')}
    for init in sorted(glob.glob(os.path.join(root, 'plugins', '*', 'streaming*', '__init__.py'))):
        found[os.path.basename(os.path.dirname(init))] = os.path.dirname(init)
    return found


def declared_entry_points(root: str) -> dict[str, dict[str, dict[str, str]]]:
    """``{distribution: {'version': ..., 'entry_points': {group: {name: value}}}}`` from a tree's pyproject files."""
    import tomllib
    out = {}
    for path in [os.path.join(root, 'pyproject.toml'), *sorted(glob.glob(os.path.join(root, 'plugins', '*',
                                                                                        'pyproject.toml')))]:
        with open(path, 'rb') as handle:
            project = tomllib.load(handle).get('project', {})
        out[project['name']] = {'version': str(project.get('version', '0')),
                                'entry_points': dict(project.get('entry-points', {}))}
    return out


def write_metadata(version: Version, declared: dict[str, dict[str, Any]]) -> None:
    """Minimal ``*.dist-info`` directories of the tree's distributions (name, version, the tree's own entry points),
    first on the version's ``PYTHONPATH``: they shadow the installed metadata of the same names, so discovery sees
    the entry points the tree declares (the old ``streaming_core.converters`` group included)."""
    for dist, info in declared.items():
        base = os.path.join(version.scratch, 'meta', f'{dist.replace("-", "_")}-{info["version"]}.dist-info')
        os.makedirs(base)
        with open(os.path.join(base, 'METADATA'), 'w') as handle:
            handle.write(f'Metadata-Version: 2.1\nName: {dist}\nVersion: {info["version"]}\n')
        with open(os.path.join(base, 'entry_points.txt'), 'w') as handle:
            for group, entries in info['entry_points'].items():
                handle.write(f'[{group}]\n' + ''.join(f'{k} = {v}\n' for k, v in entries.items()) + '\n')


def blocked_entry_points(declared: list[dict[str, dict[str, Any]]]) -> list[str]:
    """The ``streaming_core`` entry points not declared by every tree (those installed here included): blocked for
    both versions, so both load the same plugin set and the old tree never imports a plugin it lacks."""
    import importlib.metadata as md
    names = [{name for info in tree.values() for name in info['entry_points'].get(ENTRY_POINT_GROUP, {})}
             for tree in declared]
    installed = {ep.name for ep in md.entry_points(group=ENTRY_POINT_GROUP)}
    return sorted((installed | set.union(*names)) - set.intersection(*names))


class Server:
    """A version's fork server (``bench_versions.py --serve ROOT``)."""

    def __init__(self, version: Version, env: dict[str, str]) -> None:
        self.version = version
        self.log = open(os.path.join(version.scratch, 'server.log'), 'w')
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--serve', version.root],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, cwd=version.scratch)

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one spec; return its result (or raise with the child's error)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(spec) + '\n')
        self.proc.stdin.flush()
        result = None
        for line in self.proc.stdout:
            if line.startswith(RESULT):
                result = json.loads(line[len(RESULT):])
            elif line.strip() == DONE:
                break
        if result is None or 'error' in result:
            self.log.flush()
            detail = (result or {}).get('trace') or (result or {}).get('error') or 'no answer'
            raise SystemExit(f'bench_versions: {self.version.label} ({self.version.root}) failed on {spec["task"]}:'
                             f'\n{detail}\n{open(self.log.name).read()[-2000:]}')
        return result

    def close(self) -> None:
        """End the server (closing its stdin ends its loop; killed after 30 s)."""
        with contextlib.suppress(Exception):
            self.proc.communicate(timeout=30)
        if self.proc.poll() is None:
            self.proc.kill()
        self.log.close()


def run_fresh(version: Version, env: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a new interpreter of ``version``."""
    os.makedirs(spec['tmpdir'], exist_ok=True)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--fresh', version.root, json.dumps(spec)],
                          capture_output=True, text=True, env=dict(env, TMPDIR=spec['tmpdir']), cwd=version.scratch,
                          timeout=spec.get('timeout', 600))
    if proc.returncode:
        raise SystemExit(f'bench_versions: {version.label} ({version.root}) failed on {spec["task"]}:\n'
                         f'{proc.stderr[-3000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


class Row(NamedTuple):
    """One line of the table: which measurement feeds it and how to read its result."""

    key: str
    label: str
    measurement: str
    metric: str
    unit: str
    higher_is_better: bool
    full_only: bool = False


ROWS = [
    Row('iter-0w', 'iteration, 0 workers, unshuffled', 'iter-0w', 'rate', 'samples/s', True),
    Row('iter-0w-shuf', 'iteration, 0 workers, shuffled', 'iter-0w-shuf', 'rate', 'samples/s', True),
    Row('iter-2w-shuf', 'iteration, 2 workers, shuffled', 'iter-2w-shuf', 'rate', 'samples/s', True),
    Row('iter-2w', 'iteration, 2 workers, unshuffled', 'iter-2w', 'rate', 'samples/s', True, full_only=True),
    Row('iter-img-0w-shuf', 'iteration, images, 0 workers, shuffled', 'iter-img-0w-shuf', 'rate', 'samples/s', True,
        full_only=True),
    Row('access-p50', 'ds[i] p50, 10 shards', 'access', 'p50_us', 'us', False),
    Row('first', 'construct + first sample, 10 shards, warm', 'first', 'first_s', 'ms', False),
    Row('import', 'import streaming_core + streaming_mds', 'first', 'import_s', 'ms', False),
    Row('import+first', 'import + construct + first sample', 'first', 'import_s+first_s', 'ms', False),
    Row('plan', 'plan_node py1e, 8 canonical nodes', 'plan', 'seconds', 'ms', False),
    Row('write', 'MDSWriter, small samples, uncompressed', 'write', 'rate', 'samples/s', True),
]
#: Data sizes and rounds: (quick, full).
SIZES = {'iter': (100_000, 200_000), 'image': (20_000, 50_000), 'access': (50_000, 100_000),
         'count': (2_000, 5_000), 'plan': (10_000_000, 40_000_000), 'write': (50_000, 100_000), 'rounds': (3, 7)}


def value(row: Row, result: dict[str, Any]) -> float:
    """The row's number from one result, in the row's unit."""
    return sum(result[metric] for metric in row.metric.split('+')) * (1e3 if row.unit == 'ms' else 1)


def write_data(server: Server, base: str, source: dict[str, str], sizes: dict[str, int]) -> dict[str, str]:
    """Write the MDS datasets once, with the new tree's writer (``iter``/``image`` in 4 shards, ``access`` in 10)."""
    from common import MDS_SAMPLE_BYTES
    out = {}
    for name, case, shards in (('iter', 'small', 4), ('image', 'image', 4), ('access', 'small', 10)):
        per_shard = -(-sizes[name] // shards)
        out[name] = os.path.join(base, name)
        server.run({'task': 'write', 'impl': 'ours', 'case': case, 'source': source[name], 'path': out[name],
                    'size_limit': per_shard * (MDS_SAMPLE_BYTES[case] + 4) + 64, 'samples_per_shard': per_shard,
                    'tmpdir': os.path.join(base, 'tmp')})
    return out


def specs(source: dict[str, str], sizes: dict[str, int]) -> dict[str, dict]:
    """The measurement specs; ``path`` names a dataset (``measure`` makes it the version's copy)."""
    iterate = {'task': 'iterate', 'impl': 'ours', 'case': 'small', 'source': source['iter'], 'path': 'iter',
               'batch_size': 256, 'seed': 17, 'expect': sizes['iter'], 'shuffle': True, 'workers': 0}
    access = {'impl': 'ours', 'case': 'small', 'source': source['access'], 'path': 'access'}
    return {
        'iter-0w': dict(iterate, shuffle=False), 'iter-0w-shuf': iterate, 'iter-2w-shuf': dict(iterate, workers=2),
        'iter-2w': dict(iterate, shuffle=False, workers=2),
        'iter-img-0w-shuf': dict(iterate, case='image', source=source['image'], path='image', expect=sizes['image']),
        'access': dict(access, task='access', seed=5, count=sizes['count']),
        'first': dict(access, task='first', batch_size=256),
        'plan': {'task': 'plan', 'samples': sizes['plan'], 'nodes': 8, 'shard': 100_000},
        'write': {'task': 'write', 'case': 'small', 'count': sizes['write']},
    }


def measure(version: Version, server: Server, env: dict[str, str], spec: dict[str, Any], tag: str) -> dict:
    """Run one spec for one version (fresh interpreter for ``first``), checking complete epochs."""
    spec = dict(spec, tmpdir=os.path.join(version.scratch, 'tmp', tag))
    if spec['task'] == 'write':
        spec['path'] = os.path.join(version.scratch, f'write-{tag}')
    elif 'path' in spec:
        spec['path'] = os.path.join(version.scratch, 'data', spec['path'])
    result = run_fresh(version, env, spec) if spec['task'] == 'first' else server.run(spec)
    if spec['task'] == 'write':
        shutil.rmtree(spec['path'], ignore_errors=True)
        shutil.rmtree(spec['path'] + '-warmup', ignore_errors=True)
    if 'expect' in spec:
        n = spec['expect']
        if result['samples'] != n or result['id_sum'] != n * (n - 1) // 2:
            raise SystemExit(f'bench_versions: {version.label} read {result["samples"]} samples (id sum '
                             f'{result["id_sum"]}) in {tag}; expected the whole epoch of {n}')
    shutil.rmtree(spec['tmpdir'], ignore_errors=True)
    return result


def profile_row(version: Version, server: Server, env: dict[str, str], spec: dict[str, Any], top: int = 12) -> str:
    """One extra cProfiled run of ``spec``: the functions with the most own time, paths relative to the tree."""
    path = os.path.join(version.scratch, 'profile.json')
    measure(version, server, env, dict(spec, profile=path), 'profile')
    with open(path) as handle:
        rows = json.load(handle)
    rows.sort(key=lambda r: -r[2])
    total = sum(r[2] for r in rows) or 1.0
    lines = [f'  {version.label}: {total:.3f} s profiled (own time; cumulative)']
    for label, calls, own, cum in rows[:top]:
        label = label.replace(os.path.realpath(version.root) + os.sep, '').replace(version.root + os.sep, '')
        lines.append(f'    {own:8.3f} s {100 * own / total:5.1f}%  cum {cum:8.3f} s  {calls:>9}  {label[-110:]}')
    return '\n'.join(lines)


def import_profile(version: Version, env: dict[str, str], runs: int = 5, top: int = 10) -> str:
    """``python -X importtime`` of the ``import`` row, ``runs`` times: its modules and largest median own times."""
    code = (f'import gc, sys; sys.path.insert(0, {HERE!r}); import bench_versions; bench_versions.drop_editable_'
            'finders(); import numpy, torch.utils.data; gc.collect(); sys.stderr.write("@@MARK\\n"); '
            'import streaming_core, streaming_mds; streaming_core.StreamingDataset')
    own: dict[str, list[int]] = {}
    for _ in range(runs):
        err = subprocess.run([sys.executable, '-X', 'importtime', '-c', code], env=env, cwd=version.scratch,
                             capture_output=True, text=True, check=True).stderr.split('@@MARK')[-1]
        for line in err.splitlines():
            parts = line.split('|')
            if line.startswith('import time:') and parts[0].split(':')[1].strip().isdigit():
                own.setdefault(parts[2].strip(), []).append(int(parts[0].split(':')[1]))
    med = sorted(((statistics.median(v) / 1e3, k) for k, v in own.items()), reverse=True)
    ours = sum(1 for name in own if name.startswith('streaming'))
    return (f'  {version.label}: {len(own)} modules ({ours} streaming*), own times summing to '
            f'{sum(m for m, _ in med):.1f} ms (medians of {runs}); largest: '
            + ', '.join(f'{name} {ms:.1f}' for ms, name in med[:top]))


def table(rows: list[Row], results: dict[str, dict[str, list[float]]], labels: list[str]) -> tuple[str, list[Row]]:
    """The Markdown table of medians and ratios, and the rows where new is slower by more than 10%."""
    old, new = labels
    out = [f'| row | unit | {old} | {new} | new/old | verdict | spread {old} / {new} |',
           '| --- | --- | ---: | ---: | ---: | --- | ---: |']
    slower = []
    for row in rows:
        values = results[row.key]
        med = {label: statistics.median(values[label]) for label in labels}
        spread = {label: (max(values[label]) - min(values[label])) / med[label] if med[label] else 0.0
                  for label in labels}
        ratio = med[new] / med[old] if med[old] else float('nan')
        speed = ratio if row.higher_is_better else 1 / ratio
        verdict = 'faster' if speed > 1.1 else 'slower' if speed < 0.9 else 'same (within 10%)'
        if speed < 0.9:
            slower.append(row)
        fmt = '{:,.0f}' if row.unit == 'samples/s' else '{:,.1f}'
        better = 'higher is better' if row.higher_is_better else 'lower is better'
        out.append(f'| {row.label} | {row.unit} ({better}) | {fmt.format(med[old])} | {fmt.format(med[new])} | '
                   f'{ratio:.2f} | {verdict} | {spread[old]:.0%} / {spread[new]:.0%} |')
    return '\n'.join(out), slower


def load() -> str:
    """The load average."""
    return ' / '.join(f'{x:.2f}' for x in os.getloadavg())


def main() -> None:
    """Parse arguments, export the trees, write the data, measure in interleaved rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--old', default='fbd606c^', help='the "before" commit (default: fbd606c^)')
    parser.add_argument('--new', default='HEAD', help="the new commit (default HEAD), or 'worktree' for this tree")
    parser.add_argument('--quick', action='store_true', help='smaller data, 3 rounds, fewer rows')
    parser.add_argument('--rounds', type=int, help='rounds (default 3 with --quick, else 7)')
    parser.add_argument('--rows', help=f'comma-separated subset of: {", ".join(r.key for r in ROWS)}')
    parser.add_argument('--profile', action='store_true', help='cProfile each row where new is slower than old')
    parser.add_argument('--keep', action='store_true', help='keep the temporary directory (exports, data)')
    parser.add_argument('--serve', metavar='ROOT', help=argparse.SUPPRESS)
    parser.add_argument('--fresh', nargs=2, metavar=('ROOT', 'SPEC'), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.fresh:
        fresh(json.loads(args.fresh[1]), args.fresh[0])
        return
    pick = 0 if args.quick else 1
    sizes = {name: pair[pick] for name, pair in SIZES.items()}
    rounds = args.rounds or sizes['rounds']
    wanted = set(args.rows.split(',')) if args.rows else None
    unknown = (wanted or set()) - {r.key for r in ROWS}
    if unknown:
        parser.error(f'--rows: unknown {", ".join(sorted(unknown))}; choose from {", ".join(r.key for r in ROWS)}')
    rows = [r for r in ROWS if (r.key in wanted if wanted else not (r.full_only and args.quick))]
    started = time.perf_counter()
    print(f'# bench_versions: {" ".join(sys.argv[1:]) or "(defaults)"}; load average {load()} on {os.cpu_count()} '
          f'cores', flush=True)
    scratch = tempfile.mkdtemp(prefix='bench-versions-')
    servers: list[Server] = []
    try:
        versions = []
        for label, ref in (('old', args.old), ('new', args.new)):
            base = os.path.join(scratch, label)
            tree = ROOT if label == 'new' and ref == 'worktree' else os.path.join(base, 'tree')
            sha = rev_parse('HEAD') + ' + uncommitted changes' if tree == ROOT else export(ref, tree)
            versions.append(Version(label, sha, tree, base, packages(tree)))
            for sub in ('tmp', 'cache', 'data'):
                os.makedirs(os.path.join(base, sub), exist_ok=True)
            print(f'# {label}: {ref} = {sha[:12]}{sha[40:]} at {tree}', flush=True)
        old, new = versions
        declared = [declared_entry_points(v.root) for v in versions]
        for version, tree in zip(versions, declared):
            write_metadata(version, tree)
        blocked = blocked_entry_points(declared)
        print(f'# entry points blocked for both (not declared by both trees): {", ".join(blocked) or "none"}')
        envs = {v.label: v.env(blocked) for v in versions}
        for version in versions:  # discovery check: which plugins load, from where (check_modules)
            check = run_fresh(version, envs[version.label], {'task': 'check', 'tmpdir': version.scratch + '/tmp/c'})
            names = sorted(check['plugins'])
            if not {'mds', 'py1e'} <= set(names):
                raise SystemExit(f'bench_versions: discovery in {version.label} found {names}; mds and py1e needed')
            print(f'# {version.label} discovery: {len(names)} plugins from its tree ({", ".join(names)}); import '
                  f'{check["import_s"] * 1e3:.0f} ms', flush=True)
        sys.path.insert(0, PEERS)
        import numpy as np
        from common import make_source
        source = {}
        for name, case in (('iter', 'small'), ('image', 'image'), ('access', 'small')):
            np.save(source.setdefault(name, f'{scratch}/source-{name}.npy'), make_source(case, sizes[name]))
        servers = [Server(v, envs[v.label]) for v in versions]
        start = time.perf_counter()
        data = write_data(servers[1], os.path.join(scratch, 'data'), source, sizes)
        for version in versions:  # each its copy: shards hard-linked, JSON files copied (a version may rewrite them)
            for name, path in data.items():
                shutil.copytree(path, os.path.join(version.scratch, 'data', name), copy_function=lambda a, b: (
                    shutil.copyfile if a.endswith('.json') else os.link)(a, b))
        shape = ', '.join(f'{sizes[n]:,} {n} samples in {len(os.listdir(p)) - 1} shards' for n, p in data.items())
        print(f'# data written in {time.perf_counter() - start:.1f} s: {shape}; {rounds} rounds', flush=True)
        all_specs = specs(source, sizes)
        pairs = {v.label: (v, servers[i], envs[v.label]) for i, v in enumerate(versions)}
        for version, server, env in pairs.values():  # unrecorded warm-up: binary index, manifest, bytecode
            measure(version, server, env, all_specs['first'], 'warmup')
            measure(version, server, env, all_specs['iter-0w-shuf'], 'warmup')
        measurements = list(dict.fromkeys(r.measurement for r in rows))
        results: dict[str, dict[str, list[float]]] = {r.key: {'old': [], 'new': []} for r in rows}
        turn = 0
        for round_ in range(rounds):
            for name in measurements:
                order = ['old', 'new'] if turn % 2 == 0 else ['new', 'old']
                turn += 1
                line = f'  round {round_ + 1} {name:18}'
                for label in order:
                    result = measure(*pairs[label], all_specs[name], f'{name}-{round_}')
                    for row in rows:
                        if row.measurement == name:
                            results[row.key][label].append(value(row, result))
                            line += f' {label} {row.key} {value(row, result):,.1f}'
                print(line, flush=True)
        text, slower = table(rows, results, ['old', 'new'])
        print(f'\nold = {args.old} ({old.commit[:10]}), new = {args.new} ({new.commit[:10]}{new.commit[40:]}); '
              f'medians of {rounds} interleaved rounds; load average at the end {load()}; '
              f'{time.perf_counter() - started:.0f} s in all\n')
        print(text, flush=True)
        if slower and args.profile:
            for row in slower:
                print(f'\nprofile of {row.label}:', flush=True)
                for label in ('old', 'new'):
                    print(import_profile(pairs[label][0], pairs[label][2]) if row.key == 'import' else
                          profile_row(*pairs[label], all_specs[row.measurement]), flush=True)
    finally:
        for server in servers:
            server.close()
        if args.keep:
            print(f'# kept {scratch}')
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == '__main__':
    main()
