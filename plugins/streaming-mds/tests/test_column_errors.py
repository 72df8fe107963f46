"""A value of the wrong type names its column, raised once (issue 12, item 5).

It used to read ``MDS encoding 'int' takes int, got str: 'hello'`` (no column), printed twice ("During handling of
the above exception, another exception occurred") with frames of the writer's generated code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from streaming_core.errors import CodecError
from streaming_mds import MDSWriter
from streaming_mds.encodings import EncodingOverflowError, EncodingTypeError

SCRIPT = textwrap.dedent('''
    import sys
    from streaming_mds import MDSWriter
    with MDSWriter(out=sys.argv[1], columns={'text': 'str', 'label': 'int', 'blob': 'bytes'}) as writer:
        writer.write({'text': 'fine', 'label': 1, 'blob': b'x'})
        writer.write({'text': 'fine', 'label': 'hello', 'blob': b'x'})
''')


def test_user_script_prints_one_error_naming_the_column(tmp_path: Any) -> None:
    script = tmp_path / 'write.py'
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / 'out')], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert done.returncode == 1
    err = done.stderr
    expected = ("streaming_mds.encodings.EncodingTypeError: Column 'label' is declared 'int' (which takes int), but "
                "the value is str: 'hello'.")
    assert err.count(expected) == 1, err
    assert err.count('Traceback (most recent call last)') == 1, err
    assert 'During handling' not in err and 'direct cause' not in err
    assert '<string>' not in err  # no frame of generated code
    assert err.count('EncodingTypeError') == 1


@pytest.mark.parametrize('columns,value,error,phrases', [
    ({'n': 'int'}, 'hello', EncodingTypeError, ["Column 'n' is declared 'int' (which takes int), but the value is "
                                                "str: 'hello'."]),
    ({'n': 'int'}, 1 << 70, EncodingOverflowError, ["Column 'n' (declared 'int', value int)", 'out of range']),
    ({'s': 'str'}, 5, EncodingTypeError, ["Column 's' is declared 'str' (which takes str), but the value is int: 5."]),
    ({'f': 'str_float'}, 3, EncodingTypeError, ["Column 'f' is declared 'str_float' (which takes float)"]),
    ({'d': 'str_decimal'}, 1.5, EncodingTypeError, ["Column 'd' is declared 'str_decimal'", 'float: 1.5']),
    ({'u': 'uint8'}, 'abc', EncodingTypeError, ["Column 'u' is declared 'uint8'", "str: 'abc'"]),
    ({'a': 'ndarray:uint8:2'}, [1, 2], EncodingTypeError, ["Column 'a' is declared 'ndarray:uint8:2' (which takes a "
                                                          "numpy ndarray), but the value is list: [1, 2]."]),
    ({'a': 'ndarray:uint8:2'}, np.zeros(3, np.uint8), CodecError, ["Column 'a' (declared 'ndarray:uint8:2', value "
                                                                   "ndarray)", 'Wrong shape']),
    ({'j': 'json'}, {1, 2}, CodecError, ["Column 'j' (declared 'json', value set)"]),
    ({'b': 'bytes'}, 'x' * 200, EncodingTypeError, ["Column 'b' is declared 'bytes'", "'xxxxx", '...']),
])
def test_each_encoding_names_the_column(columns: dict[str, str], value: Any, error: type, phrases: list[str],
                                        tmp_path: Any) -> None:
    writer = MDSWriter(out=str(tmp_path / 'out'), columns={**columns, 'k': 'int'})
    name = next(iter(columns))
    with pytest.raises(error) as info:
        writer.write({name: value, 'k': 1})
    text = str(info.value)
    for phrase in phrases:
        assert phrase in text, text
    assert text.count(f'Column {name!r}') == 1 and len(text) < 400
    assert info.value.__cause__ is None and info.value.__suppress_context__
    writer.write({name: {'int': 3, 'str': 's', 'str_float': 1.0, 'str_decimal': Decimal('1'), 'uint8': 1,
                         'ndarray:uint8:2': np.zeros(2, np.uint8), 'json': [1], 'bytes': b'x'}[columns[name]],
                  'k': 2})  # the writer still works after a refused sample
    writer.finish()


def test_the_compiled_path_and_the_checked_path_agree(tmp_path: Any) -> None:
    writer = MDSWriter(out=str(tmp_path / 'out'), columns={'a': 'int', 'b': 'str', 'c': 'bytes'})
    good = {'a': 7, 'b': 'x', 'c': b'yz'}
    assert writer._encode_fast(good) == writer.encode_sample(good) == writer._encode_sample_checked(good)
    assert writer._encode_fast({'a': 'no', 'b': 'x', 'c': b''}) is None  # never raises: the caller explains
    assert writer._encode_fast({'a': b'\x01', 'b': 'x', 'c': b''}) is None  # a wrong fixed size too
    writer.finish()
