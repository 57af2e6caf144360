"""P2 free rigid body: energy and all momenta conserved, and the intermediate-axis flip.

    python examples/free_body.py            # writes free_body.png and free_body_flip.png
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.results.plotting import plot_conservation  # noqa: E402

# J = diag(6, 8, 3), Ω0 = (10, 20, 20) rad/s in body axes, drifting at 0.3 m/s
body = cs.RigidBody("body", mass=1.0, inertia=(6.0, 8.0, 3.0), velocity=(0.3, 0.0, 0.0),
                    angular_velocity=(10.0, 20.0, 20.0), frame="body")
sol = cs.simulate(cs.System([body]), t_end=100.0, dt=1e-2)  # 10⁴ steps
print(sol.summary())
plot_conservation(sol, "free_body.png", title="Free body (P2): errors of the first integrals")

# Dzhanibekov effect: spin about the intermediate axis of J = diag(1, 2, 3) is unstable
flipper = cs.RigidBody("wingnut", mass=1.0, inertia=(1.0, 2.0, 3.0),
                       angular_velocity=(1e-3, 5.0, 1e-3), frame="body")
flip = cs.simulate(cs.System([flipper]), t_end=20.0, dt=1e-2)
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(flip.t, flip["wingnut"].angular_velocity_body, label=["Ω1", "Ω2", "Ω3"])
ax.set_xlabel("t [s]")
ax.set_ylabel("body angular velocity [rad/s]")
ax.legend()
fig.tight_layout()
fig.savefig("free_body_flip.png", dpi=110)
print("wrote free_body.png, free_body_flip.png")
