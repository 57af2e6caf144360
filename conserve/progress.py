"""A text progress bar for long runs: ``simulate(..., progress=ProgressBar("label"))`` calls it
after every scan chunk (no Python in the step loop)."""

from __future__ import annotations

import sys


class ProgressBar:
    """A one-line text progress bar on stderr for ``simulate(..., progress=bar)``."""

    def __init__(self, label, width=30, stream=None):
        self.label, self.width, self.stream = label, width, stream or sys.stderr

    def __call__(self, done, total):
        filled = int(self.width * done / max(total, 1))
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} steps{end}")
        self.stream.flush()
