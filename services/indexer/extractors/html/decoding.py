"""An HTML file's bytes as text: UTF-8 unless the bytes say otherwise, else the legacy
charset the page declares, its label read as the WHATWG Encoding Standard reads it.
"""

from __future__ import annotations

import codecs
import re

from govindex.core.errors import Unreadable
from indexer.extractors.html.common import WHAT

_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE
)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""")
# The WHATWG Encoding Standard's reading of labels, where it differs from Python's.
_LABELS = {"windows-874": "cp874", "x-mac-roman": "mac-roman", "x-sjis": "cp932"}
_WEB_CODECS = {
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "iso8859-9": "cp1254",
    "tis-620": "cp874",
    "gb2312": "gbk",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
    "big5": "big5hkscs",
}
_LEGACY = frozenset(
    [f"cp125{n}" for n in range(9)]
    + [f"iso8859-{n}" for n in range(2, 17) if n != 12]
    + (  # noqa: SIM905
        "koi8-r koi8-u mac-roman mac-cyrillic cp866 cp874 gbk gb18030 big5hkscs cp932 "
        "euc_jp iso2022_jp cp949"
    ).split()
)


def _declared(data: bytes) -> str | None:
    """The legacy encoding a page declares in its first 1,024 bytes (a meta charset, or an
    XML declaration), as a Python codec; None when it declares UTF-8, nothing or a label
    that is not a web text encoding."""
    head = data[:1024]
    found = _XML_ENCODING.match(head) or _META_CHARSET.search(head)
    if found is None:
        return None
    label = found.group(1).decode("ascii").lower()
    try:
        name = codecs.lookup(_LABELS.get(label, label)).name
    except LookupError:
        return None
    name = _WEB_CODECS.get(name, name)
    return name if name in _LEGACY else None


def decode(data: bytes) -> str:
    """UTF-8, which is how the file travels; the declared charset only where the bytes are
    not UTF-8. A page re-encoded to UTF-8 on its way here often still declares its old
    charset, and legacy-encoded text with non-ASCII characters is practically never valid
    UTF-8, so the bytes decide."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise Unreadable(
                f"{WHAT} starts with a UTF-16 mark but is not UTF-16 ({exc})"
            ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        declared = _declared(data)
        if declared is None:
            raise Unreadable(
                f"{WHAT} is not UTF-8 ({exc}) and declares no other charset; save it as "
                "UTF-8 or declare its charset in a meta tag"
            ) from None
    try:
        return data.decode(declared)
    except UnicodeDecodeError as exc:
        raise Unreadable(
            f"{WHAT} is neither UTF-8 nor the {declared} it declares ({exc})"
        ) from None
