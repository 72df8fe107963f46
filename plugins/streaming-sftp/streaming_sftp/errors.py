"""Mapping paramiko and SFTP errors onto the core's storage errors (never a password)."""

from __future__ import annotations

import errno
import socket

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    redact_text,
)
from streaming_sftp.urls import SftpUrl

__all__ = ['translate']


def translate(err: BaseException, target: SftpUrl, action: str) -> BaseException:
    """The core's error for a failed ``action`` on ``target``: not found, permanent (authentication, host key,
    permission) or transient (a lost connection, a timeout), which the core retries on a new connection."""
    import paramiko

    shown = target.shown
    where = f'{target.host}:{target.port or 22}'
    text = redact_text(str(err))
    if target.password:
        text = text.replace(target.password, '***')
    if isinstance(err, StorageError):
        return err
    if isinstance(err, paramiko.BadHostKeyException):
        return PermanentStorageError(f'{action} of {shown} refused: the host key of {where} does not match the known '
                                     f'one ({type(err).__name__}). If the server was re-keyed, update the known-hosts '
                                     f'file.')
    if isinstance(err, paramiko.AuthenticationException):
        return PermanentStorageError(f'{action} of {shown} failed: authentication to {where} was rejected '
                                     f'({type(err).__name__}). Check the user, the password or the key '
                                     f'(key_filename or $COMPOSER_SFTP_KEY_FILE).')
    if isinstance(err, paramiko.SSHException) and 'not found in known_hosts' in str(err):
        return PermanentStorageError(f'{action} of {shown} refused: {where} is not in the known-hosts file. Add its '
                                     f'key (ssh-keyscan) to ~/.ssh/known_hosts or to known_hosts_file / '
                                     f'$COMPOSER_SFTP_KNOWN_HOSTS_FILE, or pass storage_options='
                                     f'{{"trust_unknown_hosts": True}} to trust it for this process.')
    if isinstance(err, OSError) and not isinstance(err, socket.timeout) and err.errno is not None:
        if err.errno == errno.ENOENT:
            return RemoteNotFoundError(f'Remote object not found: {shown} (SFTP: {text}).')
        if err.errno in (errno.EACCES, errno.EPERM):
            return PermanentStorageError(f'{action} of {shown} was denied by the server (SFTP: {text}).')
    if isinstance(err, LOCAL_FILE_ERRORS) and getattr(err, 'filename', None):  # a local file problem: as is
        return err
    if isinstance(err, socket.gaierror):
        return PermanentStorageError(f'{action} of {shown} failed: the host name {target.host} does not resolve.')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {text}')
