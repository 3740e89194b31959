"""Content hashes as they appear in records and events: `sha256:<hex>`."""

from __future__ import annotations

import hashlib


def sha256_hex(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
