"""The ``sftp://[user[:password]@]host[:port]/absolute/path`` storage backend on paramiko.

Credentials, first match wins: the URL's user and password; the options ``username``, ``password``,
``key_filename`` (and ``passphrase``); ``$COMPOSER_SFTP_KEY_FILE``; then paramiko's defaults (an SSH agent and
``~/.ssh/id_*``). Host keys come from ``known_hosts_file`` (else ``$COMPOSER_SFTP_KNOWN_HOSTS_FILE``, else
``~/.ssh/known_hosts``); an unknown host is refused unless ``trust_unknown_hosts=True``, which trusts the key the
host presents for the rest of the process (a later, different key is still refused) and writes it to the
known-hosts file only with ``save_host_keys=True``.

One SSH connection per process, host, port and user: never shared across ``fork`` (a child opens its own), and
opened again after a drop. Uploads go to a temporary name in the target directory and are renamed into place, so
a reader never sees a partial file.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as stat_mode
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from streaming_core.plugin_api import (
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    check_options,
)
from streaming_sftp.errors import translate
from streaming_sftp.urls import SftpUrl, parse_sftp_url

__all__ = ['SftpBackend', 'OPTIONS']

T = TypeVar('T')

logger = logging.getLogger('streaming_sftp')

#: Every option ``SftpBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'username', 'password', 'key_filename', 'passphrase', 'known_hosts_file', 'trust_unknown_hosts',
                     'save_host_keys', 'port', 'allow_agent', 'look_for_keys'})

_CHUNK = 1 << 20
#: Host keys trusted for this process through ``trust_unknown_hosts`` (``(host, port) -> key``).
_TRUSTED: dict[tuple[str, int], Any] = {}
_TRUSTED_LOCK = threading.Lock()
#: Connections inherited through ``fork``: kept referenced (never closed or collected) so the child never touches
#: a socket that belongs to its parent.
_INHERITED: list[Any] = []


class SftpBackend(ProcessLocal):
    """``sftp://`` storage through paramiko.

    Args:
        username: The user when the URL names none (default: the local user, as ssh does).
        password: The password when the URL has none (never shown).
        key_filename: A private key file, or a list of them (default ``$COMPOSER_SFTP_KEY_FILE``).
        passphrase: The private key's passphrase (never shown).
        known_hosts_file: The known-hosts file (default ``$COMPOSER_SFTP_KNOWN_HOSTS_FILE``, else
            ``~/.ssh/known_hosts``).
        trust_unknown_hosts: Accept a host missing from the known-hosts file, trusting its key for this process.
        save_host_keys: With ``trust_unknown_hosts``, also append the accepted key to the known-hosts file.
        port: The port when the URL names none (default 22).
        allow_agent: Try keys from a running SSH agent (default True).
        look_for_keys: Try ``~/.ssh/id_*`` keys (default True).
    """

    def __init__(self, **options: Any) -> None:
        check_options('sftp', options, OPTIONS)
        self.username = options.get('username') or None
        self._password = options.get('password') or None
        keys = options.get('key_filename') or os.environ.get('COMPOSER_SFTP_KEY_FILE') or None
        self.key_filename = [keys] if isinstance(keys, str) else list(keys) if keys else None
        self._passphrase = options.get('passphrase') or None
        self.known_hosts_file = (options.get('known_hosts_file') or os.environ.get('COMPOSER_SFTP_KNOWN_HOSTS_FILE')
                                 or None)
        self.trust_unknown_hosts = bool(options.get('trust_unknown_hosts', False))
        self.save_host_keys = bool(options.get('save_host_keys', False))
        self.port = int(options.get('port') or 22)
        self.allow_agent = bool(options.get('allow_agent', True))
        self.look_for_keys = bool(options.get('look_for_keys', True))
        if self.save_host_keys and not self.trust_unknown_hosts:
            raise PermanentStorageError('Invalid sftp options: save_host_keys=True needs trust_unknown_hosts=True.')
        for path in self.key_filename or ():
            if not os.path.isfile(os.path.expanduser(path)):
                raise PermanentStorageError(f'The SFTP private key file {path} does not exist (key_filename or '
                                            f'$COMPOSER_SFTP_KEY_FILE).')
        from streaming_core.plugin_api import register_secret
        register_secret(self._password)
        register_secret(self._passphrase)
        self._init_runtime()

    _process_local = ('_clients', '_op_locks')

    def _init_runtime(self) -> None:
        stale = getattr(self, '_clients', None)
        if stale:
            _INHERITED.extend(stale.values())
        super()._init_runtime()
        self._clients: dict[tuple[str, int, str | None, str | None], tuple[Any, Any]] = {}
        self._op_locks: dict[tuple[str, int, str | None, str | None], threading.Lock] = {}

    def __repr__(self) -> str:
        return (f'SftpBackend(username={self.username!r}, key_filename={self.key_filename!r}, '
                f'known_hosts_file={self.known_hosts_file!r}, trust_unknown_hosts={self.trust_unknown_hosts!r})')

    def reset(self) -> None:
        """Close every connection of this process (the core calls this between retries)."""
        self._check_process()
        with self._lock:
            clients, self._clients = self._clients, {}
        for ssh, _ in clients.values():
            _close(ssh)

    # Connections.
    def _key(self, target: SftpUrl) -> tuple[str, int, str | None, str | None]:
        return (target.host, target.port or self.port, target.username or self.username,
                target.password or self._password)

    def _sftp(self, target: SftpUrl, timeout: float) -> Any:
        self._check_process()
        key = self._key(target)
        with self._lock:
            found = self._clients.get(key)
            if found is not None and found[0].get_transport() is not None and found[0].get_transport().is_active():
                found[1].get_channel().settimeout(timeout)
                return found[1]
            if found is not None:
                _close(found[0])
            ssh = self._connect(key, timeout)
            try:
                sftp = ssh.open_sftp()
            except BaseException:
                _close(ssh)
                raise
            self._clients[key] = (ssh, sftp)
        sftp.get_channel().settimeout(timeout)
        return sftp

    def _connect(self, key: tuple[str, int, str | None, str | None], timeout: float) -> Any:
        import paramiko

        from streaming_core.plugin_api import install_log_redaction, register_secret
        install_log_redaction('paramiko')
        host, port, username, password = key
        register_secret(password)
        ssh = paramiko.SSHClient()
        known = os.path.expanduser(self.known_hosts_file or os.path.join('~', '.ssh', 'known_hosts'))
        if os.path.exists(known):
            try:
                ssh.load_system_host_keys(known)  # read only: paramiko never writes these back
            except Exception as err:
                raise PermanentStorageError(f'The known-hosts file {known} cannot be read ({type(err).__name__}); '
                                            f'give a file in OpenSSH known_hosts format.') from None
        elif self.known_hosts_file and not self.save_host_keys:
            raise PermanentStorageError(f'The known-hosts file {known} does not exist (known_hosts_file or '
                                        f'$COMPOSER_SFTP_KNOWN_HOSTS_FILE).')
        with _TRUSTED_LOCK:
            trusted = _TRUSTED.get((host, port))
        if trusted is not None:
            ssh.get_host_keys().add(_host_entry(host, port), trusted.get_name(), trusted)
            if self.save_host_keys and ssh.get_host_keys().lookup(_host_entry(host, port)) is not None \
                    and not _listed(known, _host_entry(host, port)):
                _save_key(known, _host_entry(host, port), trusted)
        ssh.set_missing_host_key_policy(_TrustPolicy(known if self.save_host_keys else None)
                                        if self.trust_unknown_hosts else paramiko.RejectPolicy())
        try:
            ssh.connect(host, port=port, username=username, password=password, key_filename=self.key_filename,
                        passphrase=self._passphrase, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                        allow_agent=self.allow_agent, look_for_keys=self.look_for_keys)
        except BaseException:
            _close(ssh)
            raise
        return ssh

    def _run(self, target: SftpUrl, action: str, timeout: float, operation: Callable[[Any], T]) -> T:
        self._check_process()
        with self._operation_lock(target):  # one SFTP session is used by one thread at a time
            return self._run_locked(target, action, timeout, operation)

    def _operation_lock(self, target: SftpUrl) -> threading.Lock:
        with self._lock:
            return self._op_locks.setdefault(self._key(target), threading.Lock())

    def _run_locked(self, target: SftpUrl, action: str, timeout: float, operation: Callable[[Any], T]) -> T:
        try:
            return operation(self._sftp(target, timeout))
        except Exception as err:
            translated = translate(err, target, action)
            if not isinstance(translated, PermanentStorageError) and not isinstance(translated, FileNotFoundError):
                self._drop(target)  # a connection that failed midway is not reused
            raise translated from None

    def _drop(self, target: SftpUrl) -> None:
        with self._lock:
            found = self._clients.pop(self._key(target), None)
        if found is not None:
            _close(found[0])

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Copy the remote file into ``path`` (pipelined reads); fewer bytes than its size is an error."""
        target = parse_sftp_url(url, need_key=True)

        def operation(sftp: Any) -> None:
            size = sftp.stat(target.path).st_size
            written = 0
            with sftp.open(target.path, 'rb') as remote, open(path, 'wb') as out:
                remote.prefetch(size)
                while True:
                    chunk = remote.read(_CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                    written += len(chunk)
            if size is not None and written != size:
                raise TruncatedDownloadError(f'SFTP read of {target.shown} gave {written} of {size} bytes.')

        self._run(target, 'Download', timeout, operation)

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """Bytes ``[start, start + length)`` of the remote file (fewer at its end)."""
        target = parse_sftp_url(url, need_key=True)
        if start < 0 or length < 0:
            raise ValueError(f'read_range needs start >= 0 and length >= 0, got start={start}, length={length}.')

        def operation(sftp: Any) -> bytes:
            if length == 0:
                return b''
            chunks, remaining = [], length
            with sftp.open(target.path, 'rb') as remote:
                remote.seek(start)
                while remaining > 0:
                    chunk = remote.read(min(remaining, _CHUNK))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    remaining -= len(chunk)
            return b''.join(chunks)

        return self._run(target, 'Ranged read', timeout, operation)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Write to a temporary name next to the target (creating missing directories), check its size, then
        rename it into place (replacing an existing file)."""
        target = parse_sftp_url(url, need_key=True)
        size = os.path.getsize(path)

        def operation(sftp: Any) -> None:
            directory, _, name = target.path.rpartition('/')
            _makedirs(sftp, directory)
            temporary = f'{directory}/.{name}.{uuid.uuid4().hex[:8]}.tmp'
            try:
                with open(path, 'rb') as source:
                    sftp.putfo(source, temporary, file_size=size, confirm=True)
                sftp.posix_rename(temporary, target.path)
            except BaseException:
                try:
                    sftp.remove(temporary)
                except Exception:  # already gone, or the connection is: the error being raised matters
                    pass
                raise

        self._run(target, 'Upload', timeout, operation)

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether a regular file exists at the URL's path."""
        return self._stat(url, timeout) is not None

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'size', 'mtime'}`` of the file.

        Raises:
            RemoteNotFoundError: there is no regular file at the URL's path.
        """
        found = self._stat(url, timeout)
        if found is None:
            raise RemoteNotFoundError(f'Remote object not found: {parse_sftp_url(url, need_key=True).shown}')
        return found

    def _stat(self, url: str, timeout: float) -> dict[str, Any] | None:
        """``{'size', 'mtime'}`` of the file, or ``None`` when there is no regular file."""
        target = parse_sftp_url(url, need_key=True)

        def operation(sftp: Any) -> dict[str, Any] | None:
            try:
                info = sftp.stat(target.path)
            except OSError as err:
                if err.errno == errno.ENOENT or isinstance(err, FileNotFoundError):
                    return None
                raise
            if not stat_mode.S_ISREG(info.st_mode or 0):
                return None
            return {'size': info.st_size, 'mtime': info.st_mtime}

        return self._run(target, 'Existence check', timeout, operation)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every regular file whose path starts with the URL's path, as URLs in the input's form."""
        target = parse_sftp_url(url, need_key=False)
        prefix = target.path
        start = prefix if prefix.endswith('/') else prefix.rsplit('/', 1)[0] + '/'

        def operation(sftp: Any) -> list[str]:
            found: list[str] = []
            pending = [start]
            while pending:
                directory = pending.pop()
                try:
                    entries = sftp.listdir_attr(directory.rstrip('/') or '/')
                except OSError as err:
                    if err.errno == errno.ENOENT or isinstance(err, FileNotFoundError):
                        continue
                    raise
                for entry in entries:
                    path = directory + entry.filename
                    if stat_mode.S_ISDIR(entry.st_mode or 0):
                        if (path + '/').startswith(prefix) or prefix.startswith(path + '/'):
                            pending.append(path + '/')
                    elif path.startswith(prefix):
                        found.append(target.child_url(path))
            return sorted(found)

        return self._run(target, 'Listing', timeout, operation)


class _TrustPolicy:
    """Accept an unknown host key for the rest of the process (``trust_unknown_hosts``), logging its fingerprint;
    append it to the known-hosts file only when one is given (``save_host_keys``)."""

    def __init__(self, save_to: str | None) -> None:
        self.save_to = save_to

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        """Trust ``key`` for ``hostname`` (``host`` or ``[host]:port``) in this process."""
        if hostname.startswith('[') and ']:' in hostname:
            host, port = hostname[1:].split(']:', 1)
        else:
            host, port = hostname, '22'
        with _TRUSTED_LOCK:
            _TRUSTED[(host, int(port))] = key
        logger.warning('Trusting the %s host key of %s (%s) for this process (trust_unknown_hosts=True).',
                       key.get_name(), hostname, key.fingerprint)
        client.get_host_keys().add(hostname, key.get_name(), key)
        if self.save_to:
            _save_key(self.save_to, hostname, key)


def _listed(known: str, entry: str) -> bool:
    if not os.path.exists(known):
        return False
    with open(known, encoding='utf-8', errors='replace') as handle:
        return any(line.split(' ', 1)[0] == entry for line in handle)


def _save_key(known: str, entry: str, key: Any) -> None:
    os.makedirs(os.path.dirname(known) or '.', exist_ok=True)
    with open(known, 'a', encoding='utf-8') as handle:
        handle.write(f'{entry} {key.get_name()} {key.get_base64()}\n')


def _host_entry(host: str, port: int) -> str:
    return host if port == 22 else f'[{host}]:{port}'


def _makedirs(sftp: Any, directory: str) -> None:
    missing = []
    current = directory
    while current and current != '/':
        try:
            if stat_mode.S_ISDIR(sftp.stat(current).st_mode or 0):
                break
            raise StorageError(f'{current} exists and is not a directory.')
        except FileNotFoundError:
            missing.append(current)
            current = current.rsplit('/', 1)[0]
    for path in reversed(missing):
        try:
            sftp.mkdir(path)
        except OSError:
            if not stat_mode.S_ISDIR(sftp.stat(path).st_mode or 0):  # created meanwhile by another writer is fine
                raise


def _close(ssh: Any) -> None:
    try:
        ssh.close()
    except Exception as err:  # closing a broken connection: nothing more to do
        logger.debug('closing an SSH connection failed: %s', err)
