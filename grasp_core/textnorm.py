"""Text at the boundary: every text a user hands us (CLI argument, JSONL line, SKB file) passes here once.

The rule: text must be valid Unicode. Bytes that are not UTF-8 (Python turns them into lone surrogates
``\\udc80``-``\\udcff`` in ``sys.argv``) and lone surrogates written as JSON escapes (``"\\ud800"``) are
refused with a one-line :class:`GraspError` naming where the text came from (the argument, the file and
line, the file and row); a batch reports such a line and answers the others. Accepted text is NFC-normalized
(a composed "é" and "e" + combining accent are the same query) and stripped of surrounding whitespace.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from grasp_core.errors import GraspError

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_unicode(text: str, where: str) -> str:
    """``text`` unchanged when it holds no lone surrogate, else a one-line error naming ``where``."""
    bad = _SURROGATE.search(text)
    if bad is None:
        return text
    char = bad.group()
    what = (
        f"byte 0x{ord(char) - 0xDC00:02x} is not UTF-8"
        if 0xDC80 <= ord(char) <= 0xDCFF
        else f"lone surrogate \\u{ord(char):04x}"
    )
    raise GraspError(f"{where}: {what} at character {bad.start()}; give the text as valid UTF-8")


def normalize_text(text: str, where: str) -> str:
    """The accepted form of a user text: valid Unicode (else :class:`GraspError`), NFC, stripped."""
    return unicodedata.normalize("NFC", check_unicode(text, where)).strip()


def decode_line(raw: bytes, where: str) -> str:
    """A line of a file as text; invalid UTF-8 is a one-line error naming ``where`` and the byte offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraspError(
            f"{where}: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8; save the file as UTF-8"
        ) from None


# Matching keys: the tokens a name and a mention are compared by (casefolded, NFKC, plural-stemmed).
_TOKEN = re.compile(r"[^\W_]+")


def _stem(token: str) -> str:
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


@functools.lru_cache(maxsize=1 << 17)
def _key(token: str) -> str:
    """A token's matching key (remembered: a gazetteer's hundred thousand names repeat a few thousand words)."""
    return _stem(token.casefold())


def _nfkc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFKC", text)  # ASCII is its own NFKC form


def tokenize(text: str) -> list[tuple[str, int, int]]:
    """Normalized tokens of ``text`` with their character spans in the NFKC-normalized text."""
    return [(_key(m.group()), m.start(), m.end()) for m in _TOKEN.finditer(_nfkc(text))]


def tokens(text: str) -> list[str]:
    """The normalized tokens of ``text``: :func:`tokenize` without the spans (faster, for building dictionaries)."""
    return list(map(_key, _TOKEN.findall(_nfkc(text))))


def normalize(text: str) -> str:
    return " ".join(tokens(text))
