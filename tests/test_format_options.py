"""Format options of a streaming ``index.json``'s shard formats (``reading/format_options.py``): a format declares
the options it takes, the core configures it or refuses them naming the option, the directory and the format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from streaming_core.reading import stream as stream_module
from streaming_core.reading.derived_index import FormatOptionError
from streaming_core.reading.format_options import configure_format, merge_format_options


class NoOptions:
    """A shard format that declares no options (as a third-party format written before them)."""

    name = 'plain'


class Picky:
    """A shard format taking ``columns``, refusing a value its ``configure`` does not like."""

    name = 'picky'
    option_names = ('columns',)

    def __init__(self, columns: list[str] | None = None) -> None:
        self.columns = columns

    def configure(self, options: Mapping[str, Any]) -> Picky:
        if options['columns'] == ['bad']:
            raise ValueError('columns: this format cannot read a column named bad.')
        return Picky(list(options['columns']))


def test_a_format_without_options_refuses_them() -> None:
    with pytest.raises(FormatOptionError, match=r"format option 'columns' for /data/ds: it holds a streaming "
                                                r"index.json of 'plain' shards, whose format takes no options\."):
        configure_format('plain', NoOptions(), {'columns': ['id']}, '/data/ds')


def test_a_format_with_options_is_configured_or_refuses() -> None:
    configured = configure_format('picky', Picky(), {'columns': ['id']}, '/data/ds')
    assert isinstance(configured, Picky) and configured.columns == ['id']
    with pytest.raises(FormatOptionError, match="option 'split' for /data/ds: .*'picky' shards, whose format takes "
                                                "only 'columns'"):
        configure_format('picky', Picky(), {'columns': ['id'], 'split': 'train'}, '/data/ds')
    with pytest.raises(FormatOptionError, match=r"for /data/ds \(format 'picky'\): columns: this format cannot"):
        configure_format('picky', Picky(), {'columns': ['bad']}, '/data/ds')


def test_merge_format_options_keeps_its_old_import_path() -> None:
    assert stream_module.merge_format_options is merge_format_options
    assert merge_format_options({'split': 'x'}, ('a', 'b')) == {'split': 'x', 'columns': ['a', 'b']}
