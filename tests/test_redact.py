"""Credentials are masked in third-party SDK log records."""

from __future__ import annotations

import logging

from streaming_core.storage.redact import install_log_redaction, redact_repr, redact_text, redact_url, register_secret


def test_registered_secrets_and_credential_headers_are_masked():
    register_secret('super-secret-value-123')
    text = ("headers: {'Authorization': 'AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=abcdef', "
            "'X-Amz-Security-Token': 'tok123456'} body super-secret-value-123 url ?sig=zzzz&x=1")
    cleaned = redact_text(text)
    for leaked in ('super-secret-value-123', 'tok123456', 'abcdef', 'zzzz', 'AWS4-HMAC-SHA256'):
        assert leaked not in cleaned
    assert 'x=1' in cleaned
    assert redact_text('nothing to hide') == 'nothing to hide'


def test_filter_rewrites_child_logger_records(caplog):
    logging.getLogger('fakesdk.endpoint')  # exists before installation, like an imported SDK's loggers
    install_log_redaction('fakesdk')
    register_secret('another-secret-987')
    with caplog.at_level(logging.DEBUG, logger='fakesdk'):
        logging.getLogger('fakesdk.endpoint').debug('sending %s', {'X-Amz-Security-Token': 'another-secret-987'})
    assert 'another-secret-987' not in caplog.text and '***' in caplog.text


def test_a_password_holding_at_signs_is_masked_whole():
    # urllib splits the user information at the LAST '@' before the path: all of it is the password.
    for url in ('sftp://user:p@ss-word@host:22/data', 'sftp://user:p@ss@wo@rd@host/data', 'https://u:p@w@h'):
        shown = redact_url(url)
        assert shown.startswith(url.split('://')[0] + '://***@h')
        assert 'ss' not in shown and 'rd' not in shown and 'p@' not in shown
    assert redact_url('sftp://user:pw@host/dir/a@b.bin') == 'sftp://***@host/dir/a@b.bin'  # an '@' in the path
    assert redact_url('http://host/a@b') == 'http://host/a@b'
    assert redact_url('sftp://user@host/x') == 'sftp://user@host/x'  # a user name alone is no secret


def test_redact_repr_masks_every_url_in_an_argument():
    out = ('/tmp/local', 'sftp://user:p@ss@host/data')
    assert redact_repr(out) == "('/tmp/local', 'sftp://***@host/data')"
    assert redact_repr(['s3://b/k?X-Amz-Signature=abc', 7]) == "['s3://b/k?X-Amz-Signature=***', 7]"
    assert redact_repr({'out': 'https://a:b@h/x'}) == "{'out': 'https://***@h/x'}"
