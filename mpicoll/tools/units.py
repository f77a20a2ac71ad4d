"""Byte counts written the way people write them: ``8``, ``64K``, ``1M``, ``2MiB`` (no MPI needed)."""

from __future__ import annotations

import re

__all__ = ["parse_size"]

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "MIB": 1024 ** 2,
          "G": 1024 ** 3, "GB": 1024 ** 3, "GIB": 1024 ** 3}


def parse_size(text: str) -> int:
    """``8``, ``64K``, ``1M``, ``2MiB`` -> bytes (K, M, G are powers of 1024)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?I?B?)", text.strip().upper())
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"--sizes: cannot read size {text!r} (examples: 8, 64K, 1M)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])
