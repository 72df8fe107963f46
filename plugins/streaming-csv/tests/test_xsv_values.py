"""Values that a CSV, TSV or XSV writer either writes so that they read back unchanged or refuses: separators that
overlap the values around them, and ``bool`` in ``int`` columns."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core import StreamingDataset
from streaming_core.errors import CodecError
from streaming_csv import CSVWriter, TSVWriter, XSVWriter


def read_back(out: str) -> list[dict[str, Any]]:
    dataset = StreamingDataset(local=out, shuffle=False, batch_size=1)
    return [dataset[i] for i in range(dataset.num_samples)]


def write(out: str, samples: list[dict[str, Any]], **kwargs: Any) -> str:
    with XSVWriter(out=out, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return out


@pytest.mark.parametrize('separator,sample', [
    ('||', {'a': 'x|', 'b': 'y'}),
    ('||', {'a': '|', 'b': ''}),
    ('aba', {'a': 'ab', 'b': 'c'}),
    (' :: ', {'a': 'x ::', 'b': 'y'}),
])
def test_overlapping_separator_is_refused(tmp_path: Any, separator: str, sample: dict[str, str]) -> None:
    out = str(tmp_path / 'ds')
    with XSVWriter(out=out, columns={'a': 'str', 'b': 'str'}, separator=separator) as writer:
        writer.write({'a': 'p', 'b': 'q'})
        with pytest.raises(CodecError, match=r"Column 'a' value .*column 'b' value .*do not quote"):
            writer.write(sample)
    assert read_back(out) == [{'a': 'p', 'b': 'q'}]


def test_values_a_separator_does_not_straddle_round_trip(tmp_path: Any) -> None:
    columns = {'a': 'str', 'b': 'str', 'c': 'str'}
    samples = [{'a': '|x', 'b': '|y|z', 'c': ''}, {'a': '', 'b': '', 'c': '|'}, {'a': 'x', 'b': '|b', 'c': 'y|'}]
    assert read_back(write(str(tmp_path / 'a'), samples, columns=columns, separator='||')) == samples
    samples = [{'a': 'xa', 'b': 'by', 'c': 'a'}, {'a': 'b', 'b': 'a', 'c': 'ba'}]
    assert read_back(write(str(tmp_path / 'b'), samples, columns=columns, separator='ab')) == samples


def test_at_least_one_column(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match='at least one column'):
        XSVWriter(out=str(tmp_path / 'ds'), columns={}, separator='|')


ALPHABET = 'a|'


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(['||', '|a|', 'a|a', '|||', 'a||']) | st.text(ALPHABET, min_size=1, max_size=3),
       st.lists(st.tuples(*[st.text(ALPHABET, max_size=3)] * 3), min_size=1, max_size=4))
def test_written_lines_split_back_into_their_values(separator: str, rows: list[tuple[str, str, str]]) -> None:
    columns = {'c0': 'str', 'c1': 'str', 'c2': 'str'}
    samples = [dict(zip(columns, row, strict=True)) for row in rows]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'ds')
        written = []
        with XSVWriter(out=out, columns=columns, separator=separator) as writer:
            for sample, row in zip(samples, rows, strict=True):
                splits = separator.join(row).split(separator) == list(row)
                if splits:
                    writer.write(sample)
                    written.append(sample)
                else:
                    with pytest.raises(CodecError, match='do not quote'):
                        writer.write(sample)
        if written:
            assert read_back(out) == written


@pytest.mark.parametrize('make', [lambda **kw: CSVWriter(**kw), lambda **kw: TSVWriter(**kw),
                                  lambda **kw: XSVWriter(separator='||', **kw)])
def test_bool_in_an_int_column_reads_back_as_its_int(tmp_path: Any, make: Any) -> None:
    out = str(tmp_path / 'ds')
    samples = [{'flag': True, 'n': 3}, {'flag': False, 'n': True}, {'flag': 7, 'n': -1}]
    with make(out=out, columns={'flag': 'int', 'n': 'int'}) as writer:
        for sample in samples:
            writer.write(sample)
    got = read_back(out)
    assert got == [{'flag': 1, 'n': 3}, {'flag': 0, 'n': 1}, {'flag': 7, 'n': -1}]
    assert all(type(value) is int for sample in got for value in sample.values())
