"""Keep credentials out of messages and logs: URLs without their secrets, a logging filter for third-party SDK
loggers, and literal secrets to mask.

Every message or log line that shows a storage URL shows :func:`redact_url` of it. Storage plugins call
:func:`register_secret` with the credentials they use and :func:`install_log_redaction` with their SDK's logger
names (``botocore``, ``azure``...). SDKs log request headers and signing material at DEBUG; the filter rewrites
such records before any handler sees them.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from streaming_core.common.fork_safe import ForkSafeLock

__all__ = ['redact_url', 'redact_repr', 'register_secret', 'redact_text', 'install_log_redaction', 'RedactingFilter']

_secrets: set[str] = set()
_lock = ForkSafeLock()  # a forked child never inherits it held
_PATTERNS = [
    # header or query parameter names followed by a value: Authorization, X-Amz-Security-Token, Signature, sig ...
    re.compile(r'''(?ix)((?:authorization|x-amz-security-token|x-amz-signature|x-amz-credential|signature|
                   x-goog-signature|sig|sharedkey|accountkey|account_key|secret[_-]?access[_-]?key|session[_-]?token)
                   ['"]?\s*[:=]\s*['"]?)([^'"&\s,}]+)'''),
]
_FILTER_NAME = 'streaming-core-redaction'
_URL_SECRET = re.compile(r'(?i)((?:x-amz-[a-z-]*|signature|sig|token|key|secret|password|credential|sas)[^=&]*=)'
                         r'[^&]*')
# ``user:password@`` up to the LAST ``@`` before the path (as urllib splits it: a password may hold a raw ``@``).
_URL_USERINFO = re.compile(r'(?<=://)[^/@\s]*:[^/\s]*@')


def redact_url(url: str) -> str:
    """Remove credentials from a URL (``user:pass@`` and signature/token query values) for messages and logs."""
    text = _URL_USERINFO.sub('***@', str(url))
    if '?' in text:
        head, _, query = text.partition('?')
        text = head + '?' + _URL_SECRET.sub(r'\1***', query)
    return text


def redact_repr(value: Any) -> str:
    """``repr(value)`` with :func:`redact_url` applied to every string in it (inside tuples, lists and dict values
    too), for messages that show an argument such as ``out=('local', 'sftp://user:pw@host/x')``."""
    return repr(_redacted(value))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value)
    if type(value) in (tuple, list):  # not a named tuple: its repr would change
        return type(value)(_redacted(item) for item in value)
    if type(value) is dict:
        return {key: _redacted(item) for key, item in value.items()}
    return value


def register_secret(value: str | None) -> None:
    """Mask this literal value (a secret key, a token) wherever it would appear in a log record."""
    if isinstance(value, str) and len(value) >= 6:
        with _lock:
            _secrets.add(value)


def redact_text(text: str) -> str:
    """``text`` with registered secrets and credential-looking header/parameter values replaced by ``***``."""
    for secret in list(_secrets):
        if secret in text:
            text = text.replace(secret, '***')
    for pattern in _PATTERNS:
        text = pattern.sub(r'\1***', text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message with :func:`redact_text` (only records that pass the level reach it)."""

    def __init__(self) -> None:
        super().__init__(_FILTER_NAME)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact and keep the record."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error handling
            return True
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def install_log_redaction(*prefixes: str) -> None:
    """Attach the filter to every existing logger under ``prefixes`` (call it after the SDK is imported)."""
    manager = logging.Logger.manager
    names = [name for name in list(manager.loggerDict) if name.split('.')[0] in prefixes]
    for name in [*prefixes, *names]:
        logger = logging.getLogger(name)
        if not any(getattr(f, 'name', None) == _FILTER_NAME for f in logger.filters):
            logger.addFilter(RedactingFilter())
