"""Applied loads that act on many parts at once (fields)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .terms import Term, UniformGravity


class Gravity:
    """Uniform gravity field g (m/s², inertial frame) acting on every body and point mass.

    Its potential V = −Σ m g·x_c is linear in q, so the midpoint gradient is exact (DESIGN §5).
    """

    def __init__(self, g=(0.0, 0.0, -9.81), name="gravity"):
        self.g = np.asarray(g, dtype=float)
        if self.g.shape != (3,) or not np.all(np.isfinite(self.g)):
            raise ModelError(f"Gravity '{name}': g must be 3 finite numbers in m/s², got {g!r}.")
        self.name = name

    def terms(self, layout):
        return [Term(UniformGravity, {"frame": layout.frame(p), "mass": p.mass, "g": self.g}, p.name)
                for p in layout.parts]

    def __repr__(self):
        return f"Gravity({self.g.tolist()})"
