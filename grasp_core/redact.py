"""Credentials never reach a log, an MLflow parameter, a Dagster event or an error message.

:func:`redact` masks the password of a URI (``bolt://neo4j:s3cret@host`` -> ``bolt://neo4j:***@host``) and the
value of any ``key=value`` / ``key: value`` whose key looks like a credential (password, secret, token, api key);
:func:`is_secret_key` tells which configuration keys hold one (their values are logged as ``***``).
"""

from __future__ import annotations

import re

MASK = "***"
_SECRET_WORD = r"(?:password|passwd|secret|token|api[_-]?key|credentials?)"
_SECRET_KEY = re.compile(rf"(?:^|[_-]){_SECRET_WORD}$", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+(?=@)", re.IGNORECASE)
_KEY_VALUE = re.compile(
    rf"(?P<key>\b(?:[\w.-]*[_.-])?{_SECRET_WORD})(?![\w])"
    r"(?P<sep>['\"]?\s*[=:]\s*['\"]?)(?P<value>[^\s'\",;&)}]+)",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """True for a configuration key that holds a credential (e.g. ``graph_store.password``)."""
    return bool(_SECRET_KEY.search(key.rsplit(".", 1)[-1]))


def redact(text: str) -> str:
    """``text`` with URI passwords and ``secret=value`` pairs masked."""
    text = _URI_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _KEY_VALUE.sub(lambda m: m.group("key") + m.group("sep") + MASK, text)


def one_line_error(exc: BaseException) -> str:
    """An exception as one redacted line: the message of our own errors, ``Type: message`` for the others."""
    from grasp_core.errors import GraspError

    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if not isinstance(exc, GraspError):
        message = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return redact(message)
