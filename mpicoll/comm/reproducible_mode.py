"""Whether a summing call runs in the reproducible mode: its ``reproducible`` keyword, or else
``MPICOLL_REPRODUCIBLE``, read once (:data:`DEFAULT`, :func:`wanted`)."""

from __future__ import annotations

from mpicoll import config

__all__ = ["DEFAULT", "wanted"]


class _Unread:
    """``DEFAULT[0]`` before ``MPICOLL_REPRODUCIBLE`` is read: true, so that the first call reads it."""

    def __bool__(self) -> bool:
        return True


#: ``[MPICOLL_REPRODUCIBLE]``, read by the first call that takes ``reproducible=None`` (and again after
#: ``mpicoll.config.reload()``); ``Comm``'s summing methods test it without a call
DEFAULT: list = [_Unread()]
config.on_reload(lambda: DEFAULT.__setitem__(0, _Unread()))


def wanted(reproducible: bool | None) -> bool:
    """Whether a call runs in the reproducible mode: its keyword, or ``MPICOLL_REPRODUCIBLE`` when None."""
    if reproducible is not None:
        return bool(reproducible)
    if isinstance(DEFAULT[0], _Unread):
        DEFAULT[0] = config.current().reproducible
    return DEFAULT[0]
