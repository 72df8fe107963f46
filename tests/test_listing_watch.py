"""How a download of a listed file is compared with the listing entry its index was derived from: a stat and a
listing describe one version in different forms (``streaming_core.reading.listing_watch.agrees``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming_core.reading.listing_watch import agrees
from streaming_core.storage.facade import ObjectStat


@pytest.mark.parametrize('entry, stat, same', [
    # S3: the listing's LastModified in milliseconds, HEAD's in seconds; the etag decides.
    (['a', 10, '"md5a"', '2026-11-27T15:30:01.900000+00:00'], ObjectStat(10, '2026-11-27T15:30:01+00:00', '"md5a"'),
     True),
    (['a', 10, '"md5a"', '2026-11-27T15:30:01+00:00'], ObjectStat(10, '2026-11-27T15:30:01+00:00', '"md5b"'), False),
    # GCS in HMAC mode: the listing's MD5 etag, the stat's generation: another kind, so the times decide.
    (['a', 10, '"md5a"', '2026-11-27T15:30:01.900000+00:00'],
     ObjectStat(10, '2026-11-27T15:30:01+00:00', 'generation:17'), True),
    (['a', 10, '"md5a"', '2026-11-27T15:30:01+00:00'], ObjectStat(10, '2026-11-27T15:31:05+00:00', 'generation:18'),
     False),
    # A listing in epoch milliseconds, a stat with an HTTP date (Databricks' two APIs), and SFTP's seconds.
    (['a', 10, None, '1795793401123'], ObjectStat(10, 'Fri, 27 Nov 2026 15:30:01 GMT'), True),
    (['a', 10, None, '1795793401123'], ObjectStat(10, 'Fri, 27 Nov 2026 15:30:09 GMT'), False),
    (['a', 10, None, '1795793401'], ObjectStat(10, '1795793401'), True),
    # hf://: the stat's etag is the directory's digest, the listing's the blob id; the size is all there is.
    (['a', 10, 'blobid', None], ObjectStat(10, None, 'dir:abc'), True),
    (['a', 10, 'blobid', None], ObjectStat(11, None, 'dir:abc'), False),
    # Weak and quoted forms of one etag.
    (['a', 10, '"x1"', None], ObjectStat(10, None, 'W/"x1"'), True),
])
def test_a_stat_agrees_with_the_listing_entry_of_its_version(entry, stat, same):
    assert agrees(entry, stat) is same


def test_a_time_without_a_zone_is_utc_whatever_the_hosts_zone(monkeypatch):
    """Azure Data Lake's listing gives times without a zone, its stat with one: never read as the host's time."""
    import time
    monkeypatch.setenv('TZ', 'America/New_York')
    time.tzset()
    try:
        assert agrees(['a', 1, '', '2026-11-27T15:30:19'], ObjectStat(1, '2026-11-27T15:30:19+00:00', '"0x1"'))
        assert not agrees(['a', 1, '', '2026-11-27T15:30:19'], ObjectStat(1, '2026-11-27T20:30:19+00:00', '"0x1"'))
    finally:
        monkeypatch.delenv('TZ')
        time.tzset()


@given(size=st.integers(0, 1 << 40), other=st.integers(0, 1 << 40), etag=st.text('abcdef0123', min_size=1))
def test_another_size_never_agrees(size, other, etag):
    assert agrees(['a', size, etag, None], ObjectStat(other, None, etag)) is (size == other)
