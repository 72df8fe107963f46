"""``streaming_core.util`` was split by job (issue 14): the moved names stay importable from it, as the same objects."""

from __future__ import annotations

import pytest

import streaming_core.common.arguments as arguments
import streaming_core.storage.retries as retries
import streaming_core.util as util


@pytest.mark.parametrize(('module', 'names'), [
    (arguments, ('bytes_to_int', 'number_abbrev_to_int', 'get_list_arg')),
    (retries, ('retry', 'backoff_delays')),
])
def test_moved_names_are_re_exported_unchanged(module, names):
    for name in names:
        assert getattr(util, name) is getattr(module, name), name
        assert name in util.__all__ and name in module.__all__


def test_the_moved_helpers_behave():
    assert arguments.bytes_to_int('1.5kb') == 1536 and arguments.number_abbrev_to_int('2k') == 2000
    assert arguments.get_list_arg('a,,b') == ['a', 'b'] and arguments.get_list_arg(None) == []
    with pytest.raises(ValueError, match='Unsupported value/suffix'):
        arguments.bytes_to_int('12kbb')
    assert arguments.number_abbrev_to_int('1.5k') == 1500 and arguments.number_abbrev_to_int(' 7 ') == 7
    with pytest.raises(ValueError, match='whole number'):  # the reference refuses it too; it used to give 3
        arguments.number_abbrev_to_int('3.3')
    calls = []

    @retries.retry(KeyError, num_attempts=3, initial_backoff=0.0, max_jitter=0.0)
    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise KeyError('again')
        return 'ok'

    assert flaky() == 'ok' and len(calls) == 3
    assert all(0 <= d <= 30.5 for d in retries.backoff_delays(10))


def test_dead_helpers_are_gone():
    assert not hasattr(util, 'pyjson')  # never used: the on-disk JSON text is pyjson_sorted
    assert util.pyjson_sorted({'b': 1, 'a': 2}) == '{"a": 2, "b": 1}'
    assert util.redact_url('s3://u:p@b/k?X-Amz-Signature=s') == 's3://***@b/k?X-Amz-Signature=***'
