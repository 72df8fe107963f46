"""Credentials are masked in third-party SDK log records."""

from __future__ import annotations

import logging

from streaming_core.storage.redact import install_log_redaction, redact_text, register_secret


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
