"""How many pipeline segments a pipelined algorithm cuts a message into."""

from __future__ import annotations

__all__ = ["segments_for", "SEGMENT_BYTES", "MAX_SEGMENTS"]

SEGMENT_BYTES = 256 * 1024  # pipeline segment size for pipelined algorithms
MAX_SEGMENTS = 64


def segments_for(nbytes: int, pieces: int = 1) -> int:
    """Pipeline segments so that each of ``pieces`` parts moves in segments of about 256 KiB."""
    per_piece = -(-nbytes // max(1, pieces))
    return max(1, min(MAX_SEGMENTS, -(-per_piece // SEGMENT_BYTES)))
