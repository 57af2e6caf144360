"""The P3 spacecraft with two flexible solar-array booms, slewed by a reaction wheel: beside the same
spacecraft with rigid arrays, the total angular momentum stays exactly zero and the energy changes
by exactly the wheel motor's work, while the flexible arrays bend and keep ringing after the slew.

    python examples/flexible_spacecraft.py      # writes flexible_spacecraft.png in the working directory

The bus and wheels are P3's (``conserve.problems.spacecraft``, ``shared/problems.md``): core 100 kg,
inertia diag(10, 15, 20) kg m², three hybrid wheels of 2 kg (axial 0.02, transverse 0.012 kg m²)
on d1, d2, d3 at 0.5 m, here all at rest at the start (as in ``examples/slew.py``), so the total
angular momentum is zero. Two solar arrays (SI units, our choice) stick out along ±e2 from
r = 0.6 m to 4.6 m: a CFRP tube boom (outer radius 20 mm, wall 1 mm, E = 100 GPa, ν = 0.3,
ρ = 1600 kg/m³: EI = 2330 N m²) carrying 1 m wide panels of 1.0 kg/m (so ρA = 1.19 kg/m, and the
panels' rotary inertia w²/12 per unit mass about the boom and about the panel's normal), each a
``cs.Beam`` of 8 elements clamped to the bus by ``cs.Fixed`` at its root node. The rigid twin
has each array's exact mass, centre of mass and inertia (summed over the beam's nodes) as one
rigid body fixed to the bus.

Slew: wheel 2 (about d3) gets a bang-bang torque, τ0 for 10 s then −τ0 for 10 s, with τ0 sized
to turn the rigid spacecraft by 30° about e3 and leave it at rest; then 20 s of coasting. Both
models run 4000 steps of 10 ms. The wheel's axial momentum is exactly the integral of its torque
(zero after the slew), so the rigid craft stops dead; the flexible one stores part of the
momentum in its bending arrays, which keep oscillating (undamped) with the bus rocking against
them at the first antisymmetric bending frequency (``cs.linearize`` of the free spacecraft).
"""

import time

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import spacecraft  # noqa: E402

started = time.perf_counter()
ROOT, LENGTH, ELEMENTS = 0.6, 4.0, 8  # m, m: each array from r = ROOT to ROOT + LENGTH along ±e2
PANEL_MASS, PANEL_WIDTH = 1.0, 1.0  # kg/m, m
SLEW, T_SLEW, T_END, DT = np.radians(30.0), 20.0, 40.0, 0.01  # rad, s, s, s

tube = cs.Section.tube(0.020, 0.019, E=100e9, nu=0.3, rho=1600.0)  # the CFRP boom alone
panel_I = PANEL_MASS * PANEL_WIDTH**2 / 12  # kg m: the panel (width along d1) about d2 and d3
section = cs.Section(EA=tube.EA, GA=tube.GA, GJ=tube.GJ, EI=tube.EI, rhoA=tube.rhoA + PANEL_MASS,
                     rhoI=(tube.rhoI[0], tube.rhoI[1] + panel_I))


def arrays():
    """The two booms along +e2 and −e2, the panels' width along e3 (d1)."""
    return [cs.Beam(f"array {side}", section, [(0.0, sign * ROOT, 0.0), (0.0, sign * (ROOT + LENGTH), 0.0)],
                    elements=ELEMENTS, normal=(0.0, 0.0, 1.0)) for side, sign in (("+y", 1.0), ("-y", -1.0))]


def lumped(beam):
    """One rigid body with the beam's mass, centre of mass and inertia (from its nodes)."""
    m = np.array([n.mass for n in beam.nodes])
    x = np.array([n.position for n in beam.nodes])
    c = m @ x / m.sum()
    J = sum(n.rotation @ n.inertia @ n.rotation.T + mi * ((r @ r) * np.eye(3) - np.outer(r, r))
            for n, mi, r in zip(beam.nodes, m, x - c))
    return cs.RigidBody(f"{beam.name} (rigid)", m.sum(), J, position=c)


def inertia_z(parts):
    """Σ of the parts' inertia about e3 through the origin, kg m²."""
    return sum((p.rotation @ p.inertia @ p.rotation.T)[2, 2] + p.mass * (p.position[:2] @ p.position[:2])
               for p in parts)


# the rigid inertia about e3 that the wheel's torque turns (all but the wheel's own axial inertia)
booms = arrays()
J_slew = 20.0 + 2 * (0.012 + 2.0 * 0.5**2) + inertia_z([n for b in booms for n in b.nodes])
TAU = -4 * J_slew * SLEW / T_SLEW**2  # N m on the wheel; the bus turns the other way


def bang_bang(t):
    return jnp.where(t < T_SLEW / 2, TAU, jnp.where(t < T_SLEW, -TAU, 0.0))


def model(flexible):
    base = spacecraft(spin_rates=(0.0, 0.0, 0.0), core_rate=(0.0, 0.0, 0.0),
                      laws=[lambda t: 0.0 * t, lambda t: 0.0 * t, bang_bang])
    core = next(e for e in base.elements if getattr(e, "name", None) == "core")
    booms = arrays()
    for boom in booms:
        if flexible:
            base.add(boom)
            base.add(cs.Fixed(boom.start, core, at=boom.start.position, name=f"{boom.name} clamp"))
        else:
            body = lumped(boom)
            base.add(body)
            base.add(cs.Fixed(body, core, at=body.position, name=f"{boom.name} clamp"))
    return base, booms


def attitude(sol):
    """The bus's rotation angle about e3 (rad; the motion stays planar)."""
    R = np.asarray(sol["core"].rotation)
    return np.unwrap(np.arctan2(R[:, 1, 0], R[:, 0, 0]))


results = {}
for name, flexible in (("rigid arrays", False), ("flexible arrays", True)):
    system, booms = model(flexible)
    clock = time.perf_counter()
    sol = cs.simulate(system, T_END, DT)
    elapsed = time.perf_counter() - clock
    H, P = np.asarray(sol.angular_momentum), np.asarray(sol.linear_momentum)
    out = {"sol": sol, "time": elapsed, "angle": attitude(sol), "booms": booms,
           "H": np.max(np.linalg.norm(H, axis=1)), "H_scale": sol.momentum_scale("angular_momentum"),
           "P": np.max(np.linalg.norm(P, axis=1)), "balance": np.asarray(sol.energy_balance_error),
           "work": sol.cumulative_work["wheel2"]}
    if flexible:  # each tip's displacement relative to the bus, in the bus's axes
        R, x = np.asarray(sol["core"].rotation), np.asarray(sol["core"].position)
        out["tips"] = [np.einsum("nji,nj->ni", R, np.asarray(sol[b.end.name].position) - x) - b.end.position
                       for b in booms]
    results[name] = out

rigid, flex = results["rigid arrays"], results["flexible arrays"]
jitter = flex["angle"] - rigid["angle"]  # rad
free, _ = model(True)
lin = cs.linearize(free)  # the free spacecraft at rest
lam = lin.eigenvalues  # its six rigid motions are zero modes, which round-off splits by ~1e-5 rad/s: left out
bending = np.sort(lam.imag[lam.imag > 1e-6 * np.max(np.abs(lam))])
t = np.asarray(flex["sol"].t)
after = t >= T_SLEW
tip = flex["tips"][0][:, 0]  # the +y array's tip along e1 (in the bus axes): in-plane bending of the slew
k = np.flatnonzero(after[:-1] & (np.sign(tip[:-1]) != np.sign(tip[1:])))
crossings = t[k] - tip[k] * (t[k + 1] - t[k]) / (tip[k + 1] - tip[k])  # interpolated zero crossings
ringing = np.pi * (len(crossings) - 1) / (crossings[-1] - crossings[0])  # rad/s
mode = bending[np.argmin(np.abs(bending - ringing))]
print(f"P3 spacecraft (bus 100 kg, three wheels at rest) with two {LENGTH:g} m solar arrays "
      f"(ρA = {section.rhoA:.3g} kg/m, EI = {section.EI[0]:.4g} N m², {ELEMENTS} elements each); "
      f"slew {np.degrees(SLEW):g}° about e3 by wheel 2, bang-bang ±{abs(TAU):.4f} N m over {T_SLEW:g} s "
      f"(J about e3 {J_slew:.4g} kg m²), then coasting to {T_END:g} s; {len(t) - 1} steps of {DT:g} s")
for name, r in results.items():
    s = r["sol"]
    print(f"{name}: {s.stats['unknowns']} unknowns per step, {s.layout['degrees_of_freedom']} degrees of freedom")
    print("  " + s.summary().replace("\n", "\n  "))
    print(f"  max |H| = {r['H']:.2e} kg m²/s ({r['H'] / r['H_scale']:.1e} of its scale {r['H_scale']:.3g}; "
          f"zero at the start), max |P| = {r['P']:.2e} kg m/s; energy balance max |E − E0 − W_wheel| = "
          f"{np.max(np.abs(r['balance'])):.2e} J ({np.max(np.abs(r['balance'])) / s.energy_scale:.1e} of "
          f"{s.energy_scale:.4g} J); wheel work at the end {r['work'][-1]:.3e} J")
    print(f"  bus angle at {T_SLEW:g} s: {np.degrees(r['angle'][after][0]):.4f}°, at {T_END:g} s "
          f"{np.degrees(r['angle'][-1]):.4f}° (range after the slew "
          f"{3600 * np.degrees(np.ptp(r['angle'][after])):.3g}″); "
          f"wheel 2 rate peak {np.max(np.abs(s.rotor('wheel2').rate)):.2f} rad/s, run {r['time']:.1f} s "
          f"(compile {s.stats['compile_time']:.1f} s)")
print(f"flexible arrays: tip deflection relative to the bus, along e1 (in-plane of the slew): up to "
      f"{1e3 * np.max(np.abs(tip[~after])):.3f} mm during the slew (+y array; the −y array's: "
      f"{1e3 * np.max(np.abs(flex['tips'][1][~after, 0])):.3f} mm), ringing at "
      f"±{1e3 * np.max(np.abs(tip[after])):.3f} mm "
      f"after it; bus attitude against the rigid model's ±{3600 * np.degrees(np.max(np.abs(jitter[after]))):.1f}″ "
      f"after the slew; the energy left in the vibration is the wheel's net work, {flex['work'][-1]:.4e} J")
print(f"  ringing after the slew at {ringing:.4f} rad/s (the tip's zero crossings); cs.linearize of the free "
      f"spacecraft: bending modes {', '.join(f'{w:.3f}' for w in bending[:4])} rad/s, the nearest {mode:.4f} rad/s "
      f"(the arrays bending in the slew plane against the bus rocking about e3; the midpoint rule's "
      f"period error at ωΔt = {mode * DT:.2f} is (ωΔt)²/12 = {(mode * DT) ** 2 / 12:.1e})")
print(f"total {time.perf_counter() - started:.1f} s")

fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
ax = axes[0, 0]
for name, r in results.items():
    ax.plot(t, np.degrees(r["angle"]), label=name)
ax.axhline(np.degrees(SLEW), color="grey", lw=0.5)
ax.set(ylabel="bus angle about e3 (°)", title=f"slew by wheel 2: bang-bang ±{abs(TAU):.3f} N m")
ax.legend(fontsize=8)
ax = axes[0, 1]
ax.plot(t, 1e3 * tip, label="flexible: +y array tip, along e1")
ax.plot(t, 1e3 * flex["tips"][1][:, 0], "--", label="flexible: −y array tip, along e1")
ax.plot(t, np.zeros_like(t), label="rigid arrays")
ax.set(ylabel="tip deflection relative to the bus (mm)", title="array tip deflection")
ax.legend(fontsize=8, loc="upper left")
zoom = ax.inset_axes([0.62, 0.05, 0.36, 0.3])  # around the end of the slew
near = (t > T_SLEW - 1.0) & (t < T_SLEW + 1.0)
zoom.plot(t[near], 1e3 * tip[near], lw=1)
zoom.plot(t[near], 1e3 * flex["tips"][1][near, 0], "--", lw=1)
zoom.axvline(T_SLEW, color="grey", lw=0.5)
zoom.tick_params(labelsize=7)
ax = axes[1, 0]
ax.plot(t, 3600 * np.degrees(jitter), color="C1")
ax.set(xlabel="t (s)", ylabel="flexible − rigid (arcsec)", title="bus attitude: effect of the flexible arrays")
ax = axes[1, 1]
for name, r in results.items():
    s = r["sol"]
    ax.semilogy(t, np.abs(r["balance"]) / s.energy_scale + 1e-18, label=f"{name}: |E − E0 − W| / energy scale")
    ax.semilogy(t, np.linalg.norm(np.asarray(s.angular_momentum), axis=1) / r["H_scale"] + 1e-18, ":",
                label=f"{name}: |H| / momentum scale")
ax.set(xlabel="t (s)", ylim=(1e-18, 1e-11), title="exact balance: energy with the wheel's work, momentum")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig("flexible_spacecraft.png", dpi=110)
print("wrote flexible_spacecraft.png")
