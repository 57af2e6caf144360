"""A free flexible beam thrown by a load pulse ("flying spaghetti", after Simo and Vu-Quoc 1988):
energy and angular momentum exact once the load ends, the beam tumbling and flexing.

    python examples/flying_beam.py          # writes flying_beam.png in the working directory

A straight beam from (6, 0, 0) to (0, 0, 8) m, EA = GA = 1e4 N, EI = GJ = 500 N m², ρA = 1 kg/m,
rotary inertia 10 kg m per metre about each section axis (20 polar), 10 elements; a dead force
F = (20, 0, 0) N and torque M = (0, 200, 100) N m at its first node (the load of AeroBeams.jl's and
crmS3R3's versions of the problem), raised linearly over 2.5 s and lowered to zero at 5 s.
The step is Δt = 0.05 s: 600 steps to t = 30 s.
"""

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402

section = cs.Section(EA=1e4, GA=1e4, GJ=500.0, EI=500.0, rhoA=1.0, rhoI=10.0)
beam = cs.Beam("beam", section, [(6, 0, 0), (0, 0, 8)], elements=10)
F, M = jnp.array([20.0, 0.0, 0.0]), jnp.array([0.0, 200.0, 100.0])


def pulse(t):
    return jnp.clip(jnp.minimum(t / 2.5, (5.0 - t) / 2.5), 0.0, None)


load = cs.Force(beam.start, force=lambda t, s: pulse(t) * F, torque=lambda t, s: pulse(t) * M)
sol = cs.simulate(cs.System([beam, load]), t_end=30.0, dt=0.05)
print(sol.summary())

t = np.asarray(sol.t)
free = t >= 5.0
E, L = np.asarray(sol.energy.total), np.asarray(sol.angular_momentum)
E_error = (E[free] - E[free][0]) / E[free][0]
L_error = np.linalg.norm(L[free] - L[free][0], axis=1) / sol.momentum_scale("angular_momentum")
print(f"after the load (t ≥ 5 s): energy {E[free][0]:.6g} J, relative change ≤ {np.max(np.abs(E_error)):.1e}; "
      f"angular momentum change ≤ {np.max(L_error):.1e} of its scale")

centre = sol[beam].centreline  # (time nodes, beam nodes, 3)
fig = plt.figure(figsize=(12, 4.8))
ax, ax_e = fig.add_subplot(1, 2, 1, projection="3d"), fig.add_subplot(1, 2, 2)
for k in range(0, len(t), 20):
    ax.plot(*centre[k].T, color=plt.cm.viridis(t[k] / t[-1]), lw=1.5)
ax.set(xlabel="x (m)", ylabel="y (m)", zlabel="z (m)", title="centreline every 1 s (colour: time)")
ax.set_box_aspect(np.ptp(centre.reshape(-1, 3), axis=0) + 1.0)
ax_e.semilogy(t[free], np.abs(E_error) + 1e-18, label="|E − E(5 s)| / E")
ax_e.semilogy(t[free], L_error + 1e-18, label="|L − L(5 s)| / scale")
ax_e.set(xlabel="t (s)", title="after the load: first integrals", ylim=(1e-18, 1e-10))
ax_e.legend()
fig.tight_layout()
fig.savefig("flying_beam.png", dpi=120)
print("wrote flying_beam.png")
