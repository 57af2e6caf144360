"""P1 heavy top in steady precession: energy, J·e3 and constraints over 10⁴ steps.

    python examples/heavy_top.py            # writes heavy_top.png next to this file's cwd

The top's data (a cone on a fixed tip) and the exact steady precession come from
``conserve.problems.HeavyTop``; the model is three lines of the public API (see its
``system()``): a RigidBody, a Spherical joint to cs.ground and a Gravity field.
"""

import numpy as np

import conserve as cs
from conserve.problems import HeavyTop
from conserve.results.plotting import plot_conservation

top = HeavyTop()
sol = cs.simulate(top.system(), t_end=20.0, dt=2e-3)
print(sol.summary())

x = sol["top"].position
print(f"centre-of-mass height: {x[:, 2].min():.6f} … {x[:, 2].max():.6f} m (exact {top.height():.6f})")
J3 = sol.angular_momentum[:, 2]
print(f"J·e3 relative drift: {np.max(np.abs(J3 - J3[0])) / abs(J3[0]):.2e}")
plot_conservation(sol, "heavy_top.png", title="Heavy top (P1): errors of the first integrals",
                  momentum_components=(2,))
print("wrote heavy_top.png")
