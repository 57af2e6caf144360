"""A text progress bar for long runs: ``simulate(..., progress=ProgressBar("label"))`` calls it
after every scan chunk (no Python in the step loop)."""

from __future__ import annotations

import numbers
import sys


class ProgressBar:
    """A text progress bar for ``simulate(..., progress=bar)``, written to ``stream`` (default
    sys.stderr).

    On a terminal it is one line redrawn in place (a carriage return before each update). Written
    elsewhere — a log file, a pipe, a notebook's captured output — each update that fills the bar
    further, and the last, is a line of its own, so a log holds at most ``width`` + 1 plain lines
    and no carriage-return animation.

    label : text before the bar;  width : characters of the bar
    Called as ``bar(done, total)``: steps (integers) for fixed steps, simulated seconds for
    adaptive ones (any other numbers: shown as numbers).
    """

    def __init__(self, label, width=30, stream=None):
        self.label, self.width, self.stream = label, width, stream or sys.stderr
        self._shown = None  # the (filled, finished) of the last line written off a terminal

    def __call__(self, done, total):
        fraction = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        filled, finished = int(self.width * fraction), done >= total
        steps = all(isinstance(x, numbers.Integral) for x in (done, total))
        count = f"{done}/{total} steps" if steps else f"{done:.4g}/{total:.4g} s"
        line = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {count}"
        if self.interactive():
            self.stream.write(f"\r{line}" + ("\n" if finished else ""))
        elif (filled, finished) != self._shown:
            self.stream.write(line + "\n")
            self._shown = (filled, finished)
        else:
            return
        self.stream.flush()

    def interactive(self) -> bool:
        """True when the stream is a terminal (the bar is redrawn in place)."""
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
            return False
