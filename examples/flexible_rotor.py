"""A hingeless three-bladed rotor with flexible blades: a motor spins the hub up from rest, the
centrifugal tension stiffens the blades, and a fan plot of the blades' flap and lag frequencies
against rotor speed is compared with Southwell's rule.

    python examples/flexible_rotor.py       # writes flexible_rotor.png in the working directory

The rotor (SI units) is a small hingeless model rotor of our own choosing, sized so that the
blades' first flap frequency at rest lies well below the top rotor speed (as on full-size
hingeless rotors, where it ends near 1.1/rev):

* blades: three flat spars of unidirectional glass/epoxy (E = 40 GPa, G = 5 GPa, ρ = 1950 kg/m³),
  chord 40 mm (in the rotor plane, the section's d1) and thickness 10 mm (d2, the flap direction),
  span 1.0 m from a root at r = 0.1 m (tip radius R = 1.1 m): ρA = 0.78 kg/m,
  EI_flap = 133 N m², EI_lag = 2133 N m², each a ``cs.Beam`` of 8 elements clamped to the hub
  (``cs.Fixed`` at the root node);
* hub: a disc of 2 kg, inertia (0.005, 0.005, 0.01) kg m², on a ``cs.Revolute`` to the ground
  about e3, gravity 9.81 m/s² along −e3 (the blades droop at rest);
* motor: a ``cs.JointMotor`` on the hub's bearing tracking the speed Ω_ref(t) that rises from 0
  to Ω_max = 120 rad/s (1146 rpm, tip speed 132 m/s) with a sin² acceleration over 3 s:
  τ = J Ω̇_ref + c (Ω_ref − Ω), J = 1.05 kg m² the rotor's inertia about its axis, c = 20 N m s.

(a) Spin-up: from the gravity sag at rest (``cs.equilibrium``), 4 s in steps of 1 ms. The
energy changes by exactly the motor's work (E − E0 − W_motor at round-off); the tip's flap
deflection (its droop) shrinks as the speed rises, following the rotating blade's static droop.
(b) Fan plot: a blade spinning rigidly with the hub is a relative equilibrium only once it has
stretched under its centrifugal load, and that tension is what stiffens it in flap. The
stretched state is found with ``cs.equilibrium`` of one blade clamped in the rotating frame, its
nodes loaded by their centrifugal forces m_i Ω² (x_i, y_i, 0): a load law of the node's position
reading the speed as a ``cs.Parameter``, so Newton follows the load as the blade stretches and
every speed reuses one compiled program. ``cs.linearize(..., frame_rate=
(0, 0, Ω))`` about that state (its ``imbalance`` is then zero; the straight, unstretched blade
is off by the whole centrifugal load) gives the frequencies; the root clamped to the ground is
clamped to the turning frame there, i.e. the hub held at exactly Ω (the classical fan plot).
Southwell: ω² = ω0² + K Ω², with K = ∫ N̂ φ′² / ∫ φ² from the non-rotating mode φ and the
centrifugal tension N̂ per unit ρAΩ², 1.193 for the first flap mode of a uniform cantilever,
1.350 with our root offset e/L = 0.1 (7.343 for the second); lag modes have K − 1 (the in-plane
centrifugal softening). K is the slope of ω² in Ω² at Ω → 0 (Rayleigh's quotient with the
non-rotating mode); the model's slope converges to it as h² (flap 1: 1.317, 1.342, 1.348 and
flap 2: 6.04, 7.00, 7.25 with 8, 16, 32 elements), and at speed the stiffened mode shape bends
the curve below Southwell's parabola (the secant K of flap 1 falls to 1.25 at 120 rad/s).
"""

import time
from dataclasses import replace

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

import conserve as cs  # noqa: E402

started = time.perf_counter()
E, G, RHO = 40e9, 5e9, 1950.0  # Pa, Pa, kg/m³: unidirectional glass/epoxy
CHORD, THICKNESS = 0.040, 0.010  # m
ROOT, SPAN, ELEMENTS, BLADES = 0.1, 1.0, 8, 3  # m, m
HUB_MASS, HUB_INERTIA = 2.0, (0.005, 0.005, 0.01)  # kg, kg m²
OMEGA_MAX, T_UP, T_END, DT = 120.0, 3.0, 4.0, 1e-3  # rad/s, s, s, s
GAIN, GRAVITY = 20.0, 9.81  # N m s, m/s²

section = cs.Section.rectangle(CHORD, THICKNESS, E=E, G=G, rho=RHO)  # width along d1 = chord: EI[0] is flap


def blade(name, azimuth):
    """A straight blade along the radius at ``azimuth`` (rad): d1 the chord (in the rotor plane,
    ahead in the sense of rotation), d2 = e3 (flap), d3 radial."""
    radial = np.array([np.cos(azimuth), np.sin(azimuth), 0.0])
    return cs.Beam(name, section, [ROOT * radial, (ROOT + SPAN) * radial], elements=ELEMENTS,
                   normal=np.cross([0.0, 0.0, 1.0], radial))


def omega_ref(t):
    """The speed the motor tracks (rad/s): 0 → Ω_max with acceleration ∝ sin²(πt/T_up)."""
    x = jnp.clip(t / T_UP, 0.0, 1.0)
    return OMEGA_MAX * (x - jnp.sin(2 * jnp.pi * x) / (2 * jnp.pi))


def omega_ref_rate(t):
    x = t / T_UP
    return jnp.where(x < 1.0, 2 * OMEGA_MAX / T_UP * jnp.sin(jnp.pi * x) ** 2, 0.0)


# --- one blade clamped in the turning frame: statics and the fan plot -------------------------
held = blade("blade", 0.0)
nodes = held.nodes
spin, weight = cs.Parameter("spin", 0.0), cs.Parameter("gravity", 0.0)  # Ω in rad/s and g in m/s²


def centrifugal(mass):
    """The load law m (Ω² (x, y, 0) − (0, 0, g)) of a node of ``mass`` in the turning frame."""
    return lambda t, s: mass * (spin.value**2 * s.position * jnp.array([1.0, 1.0, 0.0])
                                - jnp.array([0.0, 0.0, weight.value]))


loads = [cs.Force(n, force=centrifugal(n.mass), name=f"load {i}") for i, n in enumerate(nodes)]
statics = cs.System([held, cs.Fixed(held.start, cs.ground, at=held.start.position, name="root"), *loads]).assemble()
first = {n.name: 3 * statics.layout.offsets[n.name] for n in nodes}  # a node's first coordinate in q


def positions(q):
    return np.array([q[first[n.name]:first[n.name] + 3] for n in nodes])


def rotating_equilibrium(omega, g=0.0, q=None):
    """The blade's equilibrium in the frame turning with the hub at ``omega`` (rad/s) under its
    centrifugal loads and gravity g (m/s², along −e3), from ``q`` (default: straight)."""
    model = replace(statics.model, parameters={"spin": np.float64(omega), "gravity": np.float64(g)})
    start = statics.initial_state if q is None else statics.initial_state._replace(q=jnp.asarray(q))
    return cs.equilibrium(replace(statics, model=model, initial_state=start)).q


def classified(lin):
    """{"flap": ω…, "lag": ω…} (rad/s) of a blade's linearisation: each node's minimal coordinates
    are rotations about e1, e2, e3 and translations along e1, e2, e3 (for the straight blade along
    e1), so flap modes move (θ2, u3) and lag modes (θ3, u2)."""
    lam, vectors = lin.modes()
    n = lin.M.shape[0]
    out = {"flap": [], "lag": []}
    for k in np.flatnonzero(lam.imag > 1e-6 * np.max(np.abs(lam))):
        u = np.abs(vectors[:n, k].reshape(-1, 6)) ** 2
        share = {"flap": u[:, [1, 5]].sum(), "lag": u[:, [2, 4]].sum()}
        kind = max(share, key=share.get)
        if share[kind] > 0.99 * u.sum():
            out[kind].append(lam[k].imag)
    return {kind: np.sort(w) for kind, w in out.items()}


def southwell(mode, e=ROOT, L=SPAN):
    """(K, βL) of Southwell's coefficient for the clamped-free mode ``mode`` (0, 1, …) of a
    uniform blade with root offset e: K = ∫ N̂ φ′² dx / ∫ φ² dx, N̂ = e (L − x) + (L² − x²)/2."""
    beta_L = brentq(lambda z: np.cos(z) * np.cosh(z) + 1, 1.5 + 3.0 * mode, 3.0 + 3.0 * mode)
    b, x = beta_L / L, np.linspace(0.0, L, 20001)
    sigma = (np.cosh(beta_L) + np.cos(beta_L)) / (np.sinh(beta_L) + np.sin(beta_L))
    phi = np.cosh(b * x) - np.cos(b * x) - sigma * (np.sinh(b * x) - np.sin(b * x))
    N_hat = e * (L - x) + (L**2 - x**2) / 2
    return np.trapezoid(N_hat * np.gradient(phi, x) ** 2, x) / np.trapezoid(phi**2, x), beta_L


speeds = np.linspace(0.0, 1.25 * OMEGA_MAX, 11)
fan, imbalance, q = [], [], None
for omega in speeds:
    q = rotating_equilibrium(omega, q=q)
    at = replace(statics, initial_state=statics.initial_state._replace(q=jnp.asarray(q)))
    lin = cs.linearize(at, frame_rate=(0.0, 0.0, omega))
    fan.append(classified(lin))
    imbalance.append(np.max(np.abs(lin.imbalance)))
straight = cs.linearize(statics, frame_rate=(0.0, 0.0, OMEGA_MAX))  # not stretched: not an equilibrium
flap1 = np.array([f["flap"][0] for f in fan])
flap2 = np.array([f["flap"][1] for f in fan])
lag1 = np.array([f["lag"][0] for f in fan])
(K1, bL1), (K2, bL2), (K1_0, _) = southwell(0), southwell(1), southwell(0, e=0.0)
EI_flap, EI_lag = section.EI
euler = [bL**2 * np.sqrt(EI / (section.rhoA * SPAN**4)) for bL, EI in ((bL1, EI_flap), (bL1, EI_lag), (bL2, EI_flap))]
slow = classified(cs.linearize(replace(statics, initial_state=statics.initial_state._replace(
    q=jnp.asarray(rotating_equilibrium(1.0)))), frame_rate=(0.0, 0.0, 1.0)))  # Ω = 1 rad/s: the slope at Ω → 0
K_slow = {name: (slow[kind][i] ** 2 - w[0] ** 2) / 1.0**2 for name, kind, i, w in
          (("flap 1", "flap", 0, flap1), ("lag 1", "lag", 0, lag1), ("flap 2", "flap", 1, flap2))}
fan_time = time.perf_counter() - started

# --- the rotor: hub on its bearing, three blades clamped to it, the motor ------------------------
hub = cs.RigidBody("hub", HUB_MASS, HUB_INERTIA)
blades = [blade(f"blade{k}", 2 * np.pi * k / BLADES) for k in range(BLADES)]
bearing = cs.Revolute(cs.ground, hub, at=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="bearing")
J_rotor = HUB_INERTIA[2] + BLADES * sum(n.mass * (n.position[:2] @ n.position[:2])
                                        + (n.rotation @ n.inertia @ n.rotation.T)[2, 2] for n in nodes)
motor = cs.JointMotor(bearing, lambda t, joint: J_rotor * omega_ref_rate(t) + GAIN * (omega_ref(t) - joint.rate),
                      name="motor")
rotor = cs.System([hub, *blades, bearing, motor, cs.Gravity((0.0, 0.0, -GRAVITY)),
                   *[cs.Fixed(b.start, hub, at=b.start.position, name=f"root{k}") for k, b in enumerate(blades)]])
assembly = rotor.assemble()

# start at rest in the gravity sag: one blade's equilibrium, turned to each blade's azimuth
sag = rotating_equilibrium(0.0, GRAVITY)
q0 = np.array(assembly.initial_state.q)
for k, b in enumerate(blades):
    c, s = np.cos(2 * np.pi * k / BLADES), np.sin(2 * np.pi * k / BLADES)
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    for mine, node in zip(nodes, b.nodes):
        i, j = first[mine.name], 3 * assembly.layout.offsets[node.name]
        q0[j:j + 12] = (sag[i:i + 12].reshape(4, 3) @ turn.T).ravel()  # position and d1, d2, d3
run_started = time.perf_counter()
sol = cs.simulate(replace(assembly, initial_state=assembly.initial_state._replace(q=jnp.asarray(q0))), T_END, DT)
run_time = time.perf_counter() - run_started

t = np.asarray(sol.t)
rate = np.asarray(sol.joint("bearing").angle_rate)
tips = [np.asarray(sol[b.end.name].position) for b in blades]
flap = np.mean([tip[:, 2] for tip in tips], axis=0)  # the tips' height (the roots stay at z = 0), m
R_hub = np.asarray(sol["hub"].rotation)
lead = np.einsum("nji,nj->ni", R_hub, tips[0])[:, 1]  # blade 0's tip ahead of its radial line, in hub axes
W = sol.cumulative_work["motor"]
balance = np.asarray(sol.energy_balance_error)
scale = sol.energy_scale

# quasi-static droop of the blade spinning at a steady Ω (gravity and centrifugal loads)
droop_speeds = OMEGA_MAX * np.sqrt(np.linspace(0.0, 1.0, 13))  # even in Ω², as the droop varies
droop, q = [], sag
for omega in droop_speeds:
    q = rotating_equilibrium(omega, GRAVITY, q)
    droop.append(positions(q)[-1, 2])
droop = np.array(droop)
hold = t >= T_UP + 0.5
static = 1 / np.interp(rate**2, droop_speeds**2, 1 / droop)  # the static droop at the run's speed (1/w ~ linear in Ω²)
total = time.perf_counter() - started

print(f"rotor: {BLADES} blades of {ELEMENTS} elements (ρA = {section.rhoA:.3g} kg/m, EI flap {EI_flap:.4g}, "
      f"lag {EI_lag:.4g} N m², span {SPAN} m from r = {ROOT} m), hub on a revolute, J = {J_rotor:.4g} kg m²; "
      f"{assembly.degrees_of_freedom} degrees of freedom")
print(sol.summary())
print(f"(a) spin-up 0 → {OMEGA_MAX:g} rad/s in {T_UP:g} s, {len(t) - 1} steps of {DT:g} s: hub at "
      f"{rate[-1]:.4f} rad/s at t = {T_END:g} s, motor work {W[-1]:.6g} J, "
      f"kinetic energy {sol.energy.kinetic[-1]:.6g} J")
print(f"    energy balance max |E − E0 − W_motor| = {np.max(np.abs(balance)):.2e} J "
      f"({np.max(np.abs(balance)) / scale:.1e} of the energy scale {scale:.4g} J); "
      f"constraints {np.max(sol.constraint_residual):.1e}")
print(f"    tip height (flap deflection; the roots stay at z = 0): {1e3 * flap[0]:.4f} mm at rest → "
      f"{1e3 * np.mean(flap[hold]):.4f} mm at {OMEGA_MAX:g} rad/s (mean over the last {T_END - T_UP - 0.5:g} s, "
      f"oscillating by ±{1e6 * np.ptp(flap[hold]) / 2:.2g} µm); static droop of the blade spinning at "
      f"{OMEGA_MAX:g} rad/s {1e3 * droop[-1]:.4f} mm: the droop shrinks to {droop[-1] / droop[0]:.4f} of its value at "
      f"rest (one-mode estimate ω_F(0)²/ω_F(Ω)² = {(flap1[0] / np.interp(OMEGA_MAX, speeds, flap1)) ** 2:.4f}); "
      f"largest gap between run and static droop {1e3 * np.max(np.abs(flap - static)):.4f} mm")
print(f"    blade 0's tip lags its radial line by up to {1e3 * -np.min(lead):.3f} mm while accelerating "
      f"(peak motor torque {np.max(J_rotor * np.asarray(omega_ref_rate(t))):.4g} N m)")
print(f"(b) fan plot: {len(speeds)} speeds, rotating-frame equilibrium then cs.linearize; its imbalance there ≤ "
      f"{max(imbalance):.1e} N (the straight, unstretched blade at {OMEGA_MAX:g} rad/s: "
      f"{np.max(np.abs(straight.imbalance)):.4g} N)")
print(f"    at rest: flap 1 {flap1[0]:.3f}, lag 1 {lag1[0]:.3f}, flap 2 {flap2[0]:.3f} rad/s; Euler–Bernoulli "
      f"{euler[0]:.3f}, {euler[1]:.3f}, {euler[2]:.3f} ({ELEMENTS} lumped-mass elements)")
print(f"    Southwell K (Rayleigh, non-rotating mode, root offset e/L = {ROOT / SPAN:g}): flap 1 {K1:.4f} "
      f"(no offset: {K1_0:.4f}), lag 1 K − 1 = {K1 - 1:.4f}, flap 2 {K2:.4f}")
print(f"    model's slope (ω² − ω0²)/Ω² at Ω = 1 rad/s: flap 1 {K_slow['flap 1']:.4f}, lag 1 {K_slow['lag 1']:.4f} "
      f"(= flap 1 − {K_slow['flap 1'] - K_slow['lag 1']:.4f}), flap 2 {K_slow['flap 2']:.4f}")
print("    Ω rad/s |  flap 1: model Southwell    K   /rev |  lag 1: model Southwell    K   "
      "|  flap 2: model Southwell    K")
for omega, f1, l1, f2 in zip(speeds, flap1, lag1, flap2):
    cells = []
    for w, w0, K in ((f1, flap1[0], K1), (l1, lag1[0], K1 - 1), (f2, flap2[0], K2)):
        secant = f"{(w**2 - w0**2) / omega**2:6.3f}" if omega else "     -"
        cells.append(f"{w:14.3f} {np.sqrt(w0**2 + K * omega**2):9.3f} {secant}")
    per_rev = f"{f1 / omega:5.3f}" if omega else "    -"
    print(f"    {omega:7.1f} | {cells[0]} {per_rev} | {cells[1]} | {cells[2]}")
print(f"time: statics and fan plot {fan_time:.1f} s, rotor run {run_time:.1f} s "
      f"(compile {sol.stats['compile_time']:.1f} s), total {total:.1f} s")

fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
ax = axes[0, 0]
ax.plot(t, rate, label="hub Ω (rad/s)")
ax.plot(t, np.asarray(omega_ref(t)), "--", label="Ω_ref")
ax.set(xlabel="t (s)", ylabel="rad/s", title="spin-up by the speed-tracking motor")
ax2 = ax.twinx()
ax2.plot(t[1:], np.diff(W) / np.diff(t), color="C3", lw=0.8, label="motor power (W)")
ax2.set_ylabel("motor power (W)", color="C3")
ax.legend(loc="upper left", fontsize=8)
ax = axes[0, 1]
ax.plot(t, 1e3 * flap, label="run: mean tip height of the three blades")
ax.plot(t, 1e3 * static, "--", label="static droop of the blade spinning at Ω(t)")
ax.set(xlabel="t (s)", ylabel="tip flap deflection (mm)", title="centrifugal stiffening: the droop shrinks")
ax.legend(fontsize=8)
ax = axes[1, 0]
ax.plot(t, balance / scale, label="(E − E0 − W_motor) / energy scale")
ax.set(xlabel="t (s)", ylabel="relative error", title=f"energy balance (scale {scale:.3g} J)")
ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
ax.legend(fontsize=8)
ax = axes[1, 1]
fine = np.linspace(0.0, speeds[-1], 200)
for w, K, name, color in ((flap1, K1, "flap 1", "C0"), (lag1, K1 - 1, "lag 1", "C1"), (flap2, K2, "flap 2", "C2")):
    ax.plot(speeds, w, "o", color=color, label=f"{name}: cs.linearize")
    ax.plot(fine, np.sqrt(w[0] ** 2 + K * fine**2), "-", color=color, lw=1, label=f"Southwell K = {K:.3f}")
for n in (1, 2, 3):
    ax.plot(fine, n * fine, ":", color="grey", lw=0.8)
    ax.annotate(f"{n}/rev", (fine[-1], n * fine[-1]), fontsize=8, color="grey", ha="right", va="bottom")
ax.axvline(OMEGA_MAX, color="k", lw=0.5)
ax.set(xlabel="rotor speed Ω (rad/s)", ylabel="frequency ω (rad/s)", ylim=(0, 1.1 * flap2[-1]),
       title="fan plot of the blade (hub held at Ω)")
ax.legend(fontsize=7, ncol=2)
fig.tight_layout()
fig.savefig("flexible_rotor.png", dpi=110)
print("wrote flexible_rotor.png")
