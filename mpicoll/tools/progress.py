"""A progress bar on stderr for the tools that can take seconds (verify, model, draw).

It stays silent for the first two seconds, so quick commands print nothing
extra, and it is drawn only when stderr is a terminal: a log file, a pipe or a
test that captures stderr never sees it.  One line, redrawn in place at most
ten times a second, and cleared when the work is done::

    verify allreduce/ring p=1024: checking in place  [##########..........]  1023/2046 rounds  9 s
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "DELAY"]

DELAY = 2.0      # seconds of silence before the bar appears
WIDTH = 20       # characters of the bar itself


class Progress:
    """``with Progress("model allreduce") as bar: bar.update(done, total, "what now")``.

    Parameters
    ----------
    title : str
        What the command does, shown first on the line.
    stream : file, optional
        Where to draw (default ``sys.stderr``).
    enabled : bool, optional
        Draw at all; default: whether ``stream`` is a terminal.
    """

    def __init__(self, title: str, stream: TextIO | None = None, enabled: bool | None = None):
        self.title = title
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) if enabled is None else enabled
        self.start = time.perf_counter()
        self.drawn = 0.0     # when the line was last drawn (0: never)
        self.width = 0       # characters on the line now

    def update(self, done: int, total: int, stage: str = "", unit: str = "") -> None:
        """Say that ``done`` of ``total`` units of the current ``stage`` are done (drawn if due)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.start < DELAY or now - self.drawn < 0.1:
            return
        self.drawn = now
        filled = WIDTH * min(done, total) // total if total > 0 else 0
        line = (f"{self.title}{': ' + stage if stage else ''}  [{'#' * filled}{'.' * (WIDTH - filled)}]  "
                f"{done}/{total}{' ' + unit if unit else ''}  {now - self.start:.0f} s")
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """Clear the line, if one was drawn."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
