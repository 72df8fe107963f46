"""streaming-compat refuses to import beside a mosaicml-streaming distribution (both provide ``streaming``)."""

from __future__ import annotations

import os
from typing import Any


def _fake_reference(root: Any) -> str:
    """A site directory holding only mosaicml-streaming's metadata (what pip leaves next to its files)."""
    dist = root / 'mosaicml_streaming-0.13.0.dist-info'
    dist.mkdir(parents=True)
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: mosaicml-streaming\nVersion: 0.13.0\n')
    (dist / 'RECORD').write_text('')
    return str(root)


def test_import_refuses_when_the_reference_is_installed(tmp_path: Any, python: Any) -> None:
    site = _fake_reference(tmp_path / 'site')
    result = python('import streaming', env={'PYTHONPATH': site})
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith('streaming._conflict.ReferenceInstalledError: Both streaming-compat and '
                           'mosaicml-streaming are installed'), result.stderr
    assert 'pip uninstall mosaicml-streaming' in last
    assert os.path.join(site, 'mosaicml_streaming-0.13.0.dist-info') in last


def test_the_error_is_an_import_error(tmp_path: Any, python: Any) -> None:
    site = _fake_reference(tmp_path / 'site')
    code = ('try:\n    import streaming\nexcept ImportError as err:\n    print("ImportError", type(err).__name__)\n')
    result = python(code, env={'PYTHONPATH': site})
    assert result.stdout.strip() == 'ImportError ReferenceInstalledError', result.stderr


def test_import_works_without_the_reference(python: Any) -> None:
    result = python('import streaming; print(streaming.ENGINE, streaming.__version__)')
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['streaming-core', '0.13.0']
