"""Root pytest configuration shared by the core tests and every plugin's tests."""

from __future__ import annotations

import collections
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.deps import require  # noqa: E402,F401  (re-exported: `from conftest import require` keeps working)

# Fixture modules, each owned by one area (servers for storage tests, datasets for runtime tests).
pytest_plugins = [name for name in ('tests.fixtures.servers', 'tests.fixtures.data')
                  if os.path.exists(os.path.join(ROOT, *name.split('.')) + '.py')]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--soak`` for the long fault and load runs."""
    parser.addoption('--soak', action='store_true', default=False, help='run the long soak tests')


#: The longest test files (minutes each, measured with ``--durations``), handed to the pytest-xdist workers first, so
#: that no long file is left to one worker at the end of the run (tests/trainers/, collected last, used to be). The
#: Makefile passes ``--no-loadscope-reorder``: xdist's own order (the files with the most tests first) knows nothing
#: of their duration.
LONGEST_FIRST = ('tests/trainers/test_lightning.py', 'tests/test_index_stream.py', 'tests/trainers/test_huggingface.py',
                 'tests/trainers/test_torch_loops.py', 'tests/test_elastic.py', 'tests/test_rank_state.py')


def _longest_first(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: the :data:`LONGEST_FIRST` files, then the others by their number of tests (xdist's
    default order); the sort is stable, so each file's tests stay together and in their order."""
    files = [os.path.relpath(str(item.path), ROOT) for item in items]
    counts = collections.Counter(files)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    order = sorted(range(len(items)), key=lambda i: (rank.get(files[i], len(rank)),
                                                     0 if files[i] in rank else -counts[files[i]]))
    items[:] = [items[i] for i in order]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the soak tests unless ``--soak`` is given; refuse the ``compat`` tests in a pytest-xdist worker, where
    the longest files are collected first; rerun a trainer test once if it hung in CPython's fork bug."""
    if os.environ.get('PYTEST_XDIST_WORKER'):
        _longest_first(items)
        # mosaicml-streaming 0.13's 2-worker DataLoader hangs when started from a pytest-xdist worker, and its
        # clean_stale_shared_memory() unlinks the shared memory of any other reference run on the machine.
        refuse = pytest.mark.skip(reason='a compat test: run it without -n (make test runs `pytest -m compat` apart)')
        for item in items:
            if 'compat' in item.keywords:
                item.add_marker(refuse)
    if config.pluginmanager.hasplugin('rerunfailures'):
        # A trainer run that hangs in CPython's own fork bug (gh-112275, Python < 3.11.10: a forked DataLoader worker
        # stuck inside os.fork(), told apart by its native stack) runs once more; any other failure fails.
        from tests.trainers.harness import KnownForkHang  # the class, not a pattern a message could contain
        rerun = pytest.mark.flaky(reruns=1, only_rerun=[KnownForkHang])
        for item in items:
            if os.sep + os.path.join('tests', 'trainers') + os.sep in str(item.path):
                item.add_marker(rerun)
    if config.getoption('--soak'):
        return
    skip = pytest.mark.skip(reason='soak test: run with --soak')
    for item in items:
        if 'soak' in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own default cache directory and no leaked world variables."""
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path_factory.mktemp('cache')))
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'):
        monkeypatch.delenv(name, raising=False)
