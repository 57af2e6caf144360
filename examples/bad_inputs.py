"""What conserve says to bad input: each case below is tried and its message printed as a
Markdown table (the README's "Errors that help" shows a few of its rows).

    python examples/bad_inputs.py     # prints the table

Every message names the part (body, joint, force, option) and says how to fix it;
tests/test_errors.py checks each case's error type and that the message names the culprit.
"""

import tempfile
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import conserve as cs


def body(name="b", **kw):
    return cs.RigidBody(name, 1.0, (1.0, 1.0, 1.0), **kw)


def one_body():
    return cs.System([body()])


def _self_joint():
    b = body()
    return cs.System([b, cs.Revolute(b, b, at=(0, 0, 0), axis=(0, 0, 1))]).assemble()


def _off_constraint():
    b = body(position=(0.0, 0.0, -1.0), velocity=(0.0, 0.0, 1.0))  # radial velocity on a pendulum
    return cs.System([b, cs.Distance(cs.ground, b, at_a=(0, 0, 0), at_b=(0, 0, 0.5))]).assemble()


def _redundant():
    b = body()
    return cs.System([b, cs.Spherical(cs.ground, b, at=(0, 0, 0), name="pivot"),
                      cs.Spherical(cs.ground, b, at=(0, 0, 0), name="pivot again")]).assemble(redundant="raise")


def _newton_failure():
    return cs.simulate(cs.problems.HeavyTop().system(), 0.2, 0.05, newton=cs.Newton(max_iterations=3))


def _plate():
    return cs.RigidBody("plate", 1.0, (1.0, 2.0, 2.5))


def _force_law(law):
    b = _plate()
    return cs.System([b, cs.Force(b, law, name="thrust")]).assemble()


#: Where the checkpoint cases write (the table shows paths relative to it).
SCRATCH = Path(tempfile.mkdtemp(prefix="conserve-bad-inputs-"))


def _scratch(case):
    """A directory of its own for one checkpoint case."""
    return SCRATCH / case


def _existing_run():
    path = _scratch("full") / "run"
    cs.simulate(one_body(), 0.02, 1e-2, checkpoint=path)
    return cs.simulate(one_body(), 0.02, 1e-2, checkpoint=path)


def _directory_in_use():
    from conserve.run import checkpoint

    path = _scratch("busy") / "run"
    cs.simulate(one_body(), 0.02, 1e-2, checkpoint=path)
    held = checkpoint._lock(path, "another run")  # as a live run holds it
    try:
        return cs.resume(path, one_body())
    finally:
        held.close()


def _changed_law():
    def system(gain):
        b = _plate()
        return cs.System([b, cs.Torque(b, lambda t, s: gain * jnp.array([1.0, 0.0, 0.0]), name="actuator")])

    path = _scratch("law") / "run"
    cs.simulate(system(0.05), 0.02, 1e-2, checkpoint=path)
    return cs.resume(path, system(0.06))


def _swapped_piece():
    path = _scratch("swap") / "run"
    cs.simulate(one_body(), 0.05, 1e-2, checkpoint=path, checkpoint_every=1)
    a, b = sorted(path.glob("piece-*.npz"))[2:4]
    data = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(data)
    return cs.resume(path, one_body())


def _jumping_force():
    """A force switching on at z = 0.5 m with the first step's midpoint where neither branch holds."""
    h = 1e-3
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, 0.5 + h / 2 - h**2 / 8), velocity=(0.0, 0.0, -1.0))
    kick = cs.Force(bob, lambda t, s: jnp.where(s.position[2] > 0.5, 0.0, 1.0) * jnp.array([0.0, 0.0, 1.0]),
                    name="kick")
    return cs.simulate(cs.System([bob, kick]), 4 * h, h, newton=cs.Newton(max_iterations=4))


def _hinged_point_mass():
    """A hinge on a point mass (at its own position, as a point mass's joints must be): its axis
    equations would fix an orientation the point mass does not have."""
    bob = cs.PointMass("bob", 1.0, position=(0.0, 0.0, -1.0))
    return cs.System([bob, cs.Revolute(cs.ground, bob, at=(0, 0, -1), axis=(1, 0, 0), name="hinge")]).assemble()


def _at_the_centre_of_gravity():
    """A point mass at the centre of a central gravity field, where its potential energy is −∞."""
    return cs.simulate(cs.System([cs.PointMass("sat", 1.0), cs.CentralGravity(3.986e14)]), 1.0, 1e-2)


def _thrust_turning_nan():
    """A thrust law that returns NaN after t = 0.05 s."""
    plate = body("plate")
    thrust = cs.Force(plate, lambda t, s: jnp.where(t > 0.05, jnp.nan, 1.0) * jnp.array([1.0, 0.0, 0.0]),
                      name="thrust")
    return cs.simulate(cs.System([plate, thrust]), 0.1, 1e-2)


def _open_joint_in_orbit():
    """Two bodies 7000 km from the origin, their ball joint 50 µm open."""
    x = np.array([7.0e6, 0.0, 0.0])
    a, b = body("core", position=x), body("arm", position=x + [2.0, 5e-5, 0.0])
    return cs.System([a, b, cs.Spherical(a, b, at_a=(1, 0, 0), at_b=(-1, 0, 0), name="hinge")]).assemble()


def _unreadable_law():
    def system():
        b = _plate()
        return cs.System([b, cs.Torque(b, lambda t, s, log=iter(()): jnp.zeros(3), name="actuator")])

    path = _scratch("opaque") / "run"
    cs.simulate(system(), 0.02, 1e-2, checkpoint=path)
    return cs.resume(path, system())


def _coarse_spin():
    import warnings

    core = body("core", angular_velocity=(0.1, 0.0, 0.0))
    wheel = cs.Rotor("wheel", core, axis=(0, 0, 1), mass=1.0, axial_inertia=0.02, transverse_inertia=0.012,
                     spin_rate=300.0, model="body")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cs.CoarseStepWarning)
        return cs.simulate(cs.System([core, wheel]), 0.1, 0.05)


def _redundant_at_the_start_only():
    import warnings

    mass = cs.PointMass("m", mass=1.0, position=(1.0, 0.0, 0.0), velocity=(0.0, 1.0, 0.0))
    rods = [cs.Distance(cs.ground, mass, points=(anchor, (1.0, 0.0, 0.0)), name=name)  # collinear at t0
            for anchor, name in (((0.0, 0.0, 0.0), "rod1"), ((2.0, 0.0, 0.0), "rod2"))]
    with warnings.catch_warnings():
        warnings.simplefilter("error", cs.ConstraintWarning)
        return cs.simulate(cs.System([mass, *rods]), 0.5, 1e-2)


def _degrees():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return cs.set_joints(cs.problems.double_pendulum(), {"elbow": 90})


def _close_save_times():
    """Save times a unit in the last place and 1e-13 s apart."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return cs.simulate(one_body(), 1.0, "adaptive", saveat=[0.5, 0.5000000000000001, 0.5 + 1e-13])


def _swapped_times():
    """simulate(system, dt, t_end): one step of 10 s for the heavy top spinning at 141 rad/s (the
    warnings of the swap and of the coarse step are left out of the table)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cs.simulate(cs.problems.heavy_top(), 0.01, 10.0)


def _foreign_file():
    path = _scratch("file") / "run.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a conserve file")
    return cs.Solution.load(path)


#: (what, how it is tried, error type, text the message must contain)
CASES = [
    ("negative mass", lambda: cs.RigidBody("wheel", -1.0, (1, 1, 1)), cs.InvalidMass, "wheel"),
    ("inertia violating the triangle inequality", lambda: cs.RigidBody("wheel", 1.0, (1, 1, 3)),
     cs.InvalidInertia, "wheel"),
    ("NaN in an inertia", lambda: cs.RigidBody("wheel", 1.0, (1, np.nan, 1)), cs.InvalidInertia, "wheel"),
    ("non-orthonormal orientation", lambda: body("hub", orientation=np.diag([1, 1, 1.1])),
     cs.InvalidOrientation, "hub"),
    ("position of the wrong shape", lambda: body("hub", position=(1, 2)), cs.ModelError, "hub"),
    ("zero-length joint axis", lambda: cs.Revolute(cs.ground, body(), at=(0, 0, 0), axis=(0, 0, 0), name="hinge"),
     cs.ModelError, "hinge"),
    ("zero-length rotor axis", lambda: cs.Rotor("wheel", body(), axis=(0, 0, 0), axial_inertia=1.0),
     cs.ModelError, "wheel"),
    ("spring whose two points coincide", lambda: cs.SpringDamper(cs.ground, body(), points=((0, 0, 0), (0, 0, 0)),
                                                                  stiffness=1.0, name="spring"),
     cs.ModelError, "spring"),
    ("distance joint of length 0", lambda: cs.Distance(cs.ground, body(), at_a=(0, 0, 0), at_b=(0, 0, 0),
                                                       name="link"), cs.ModelError, "link"),
    ("negative damping", lambda: cs.SpringDamper(cs.ground, body(), points=((0, 0, 0), (1, 0, 0)), damping=-1.0,
                                                 name="damper"), cs.ModelError, "damper"),
    ("a joint between a body and itself", _self_joint, cs.ModelError, "revolute(b, b)"),
    ("two parts with the same name", lambda: cs.System([body("a"), body("a")]).assemble(), cs.ModelError, "'a'"),
    ("a body named 'ground'", lambda: cs.System([body("ground")]).assemble(), cs.ModelError, "cs.ground"),
    ("something that is no element", lambda: cs.System([body(), 3]).assemble(), cs.ModelError, "3"),
    ("a system without bodies", lambda: cs.System([]).assemble(), cs.ModelError, "RigidBody"),
    ("initial velocity violating a joint", _off_constraint, cs.InconsistentInitialState, "distance"),
    ("redundant constraints (redundant='raise')", _redundant, cs.ModelError, "pivot again"),
    ("negative dt", lambda: cs.simulate(one_body(), 1.0, -1e-3), cs.ModelError, "dt"),
    ("t_end ≤ t0", lambda: cs.simulate(one_body(), 0.0, 1e-3), cs.ModelError, "t_end"),
    ("dt that is not a number", lambda: cs.simulate(one_body(), 1.0, "1 ms"), cs.ModelError, "dt"),
    ("unknown backend", lambda: cs.simulate(one_body(), 1.0, 1e-3, backend="rk4"), cs.ModelError, "rk4"),
    ("Newton tolerance out of range", lambda: cs.Newton(tol=2.0), ValueError, "tol"),
    ("Newton failure in a step", _newton_failure, cs.ConvergenceError, "step 0"),
    ("resume without a checkpoint", lambda: cs.resume("no/such/dir"), cs.ModelError, "no/such/dir"),
    ("a checkpoint directory that holds a run", _existing_run, cs.ModelError, "overwrite=True"),
    ("a checkpoint directory in use", _directory_in_use, cs.ModelError, "in use"),
    ("resume with a changed motor or force law", _changed_law, cs.ModelError, "laws"),
    ("a swapped checkpoint piece", _swapped_piece, cs.FileError, "checksum"),
    ("a file that is not conserve's", _foreign_file, cs.FileError, "run.npz"),
    ("force law of the wrong shape", lambda: _force_law(lambda t, s: jnp.array([1.0])), cs.ModelError, "thrust"),
    ("numpy in a law", lambda: _force_law(lambda t, s: np.array([np.sin(t), 0, 0])), cs.ModelError, "thrust"),
    ("Python if on a traced value", lambda: _force_law(lambda t, s: jnp.ones(3) if t > 1 else jnp.zeros(3)),
     cs.ModelError, "thrust"),
    ("law with the wrong signature", lambda: _force_law(lambda t, s, gain: jnp.zeros(3)), cs.ModelError, "thrust"),
    ("law returning None", lambda: _force_law(lambda t, s: None), cs.ModelError, "thrust"),
    ("negative spring rest length", lambda: cs.SpringDamper(cs.ground, body(), points=((0, 0, 0), (1, 0, 0)),
                                                            rest_length=-1.0, name="spring"), cs.ModelError, "spring"),
    ("NaN rotor offset", lambda: cs.Rotor("wheel", body(), axis=(0, 0, 1), offset=(0, np.nan, 0), axial_inertia=0.02,
                                          transverse_inertia=0.012), cs.ModelError, "wheel"),
    ("infinite spin rate", lambda: cs.Rotor("wheel", body(), axis=(0, 0, 1), axial_inertia=0.02,
                                            transverse_inertia=0.012, spin_rate=np.inf), cs.ModelError, "wheel"),
    ("massless rotor as a full body", lambda: cs.Rotor("wheel", body(), axis=(0, 0, 1), axial_inertia=0.02,
                                                       transverse_inertia=0.012, model="body"),
     cs.InvalidMass, "wheel"),
    ("a potential of invariants that are not quadratic", lambda: cs.System([b := body(), cs.Potential(
        [b], invariants=lambda f: jnp.linalg.norm(f.position)[None], energy=lambda pi: pi[0], name="well")]).assemble(),
     cs.ModelError, "'well'"),
    ("more steps than a run can count", lambda: cs.simulate(one_body(), 1e12, 1e-3), cs.ModelError, "steps"),
    ("a pure step of zero length", lambda: cs.step(one_body().assemble(), cs.initial_state(one_body()), 0.0, 0.0),
     cs.ModelError, "h = 0"),
    ("a force law that jumps", _jumping_force, cs.ConvergenceError, "stalled"),
    ("a hinge's axis on a point mass (no orientation to fix)", _hinged_point_mass, cs.ModelError, "'hinge'"),
    ("a part where a potential is infinite", _at_the_centre_of_gravity, cs.ModelError, "'sat'"),
    ("a force law that returns NaN mid-run", _thrust_turning_nan, cs.ConvergenceError, "'thrust'"),
    ("a joint 50 µm open 7000 km from the origin", _open_joint_in_orbit, cs.InconsistentInitialState, "hinge"),
    ("resume with a law whose state cannot be read", _unreadable_law, cs.ModelError, "trust_laws"),
    ("a fast full-body rotor at a coarse step (a warning)", _coarse_spin, cs.CoarseStepWarning, "hybrid"),
    ("constraints dependent only at the start (a warning)", _redundant_at_the_start_only, cs.ConstraintWarning,
     "'rod2'"),
    ("a joint angle in degrees (a warning)", _degrees, UserWarning, "'elbow'"),
    ("t_end and dt swapped: a step far too large", _swapped_times, cs.ConvergenceError, "swapped"),
    ("a dt below the round-off of the times", lambda: cs.simulate(one_body(), 1e12 + 1e-3, 1e-5, t0=1e12),
     cs.ModelError, "round-off of the times"),
    ("saveat times closer than round-off (a warning)", _close_save_times, UserWarning, "one node"),
]


def _edited_file():
    path = _scratch("edited") / "run.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    cs.simulate(one_body(), 0.02, 1e-2).save(path)
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["q"] = arrays["q"] + 1e-3  # a number changed by hand
    np.savez(path, **arrays)
    return cs.Solution.load(path)


def _tilted_top(density):
    return cs.problems.HeavyTop(density=density, alpha0=np.pi / 4).system()


def _sweep_of_another_model():
    path = _scratch("study")
    cs.studies.sweep(cs.problems.heavy_top, {"density": [2700.0]}, 0.01, 1e-3, path)
    return cs.studies.sweep(_tilted_top, {"density": [2700.0]}, 0.01, 1e-3, path)


def _loading_a_checkpoint():
    path = _scratch("load") / "run"
    cs.simulate(one_body(), 0.02, 1e-2, checkpoint=path)
    return cs.Solution.load(path)


CASES += [
    ("a Solution file edited after it was saved", _edited_file, cs.FileError, "changed after it was written"),
    ("Solution.load of a checkpoint directory", _loading_a_checkpoint, cs.FileError, "cs.resume("),
    ("a sweep into a directory of another model's members", _sweep_of_another_model, cs.ModelError,
     "another model"),
]


def _traced_mass():
    """A body built inside jax.grad, its mass the variable."""
    import jax

    return jax.grad(lambda m: cs.RigidBody("hub", m, (1.0, 1.0, 1.0)).mass)(1.0)


def _two_drives():
    arm = body("arm", position=(1.0, 0.0, 0.0))
    hinge = cs.Revolute(cs.ground, arm, at=(0, 0, 0), axis="z", name="hinge")
    return cs.System([arm, hinge, cs.JointDrive(hinge, lambda t: 0.5 * t**2, name="servo"),
                      cs.JointDrive(hinge, lambda t: t**2, name="servo 2")]).assemble()


def _drive_off_its_law():
    """A hinge built at rest whose drive asks for 1 rad/s at t0."""
    arm = body("arm", position=(1.0, 0.0, 0.0))
    hinge = cs.Revolute(cs.ground, arm, at=(0, 0, 0), axis="z", name="hinge")
    return cs.simulate(cs.System([arm, hinge, cs.JointDrive(hinge, lambda t: t, name="servo")]), 0.1, 1e-2)


def _part_only_in_a_joint():
    import warnings

    arm = body("arm", position=(1.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return cs.System([cs.Revolute(cs.ground, arm, at=(0, 0, 0), axis="z", name="hinge")]).assemble()


#: joint drives, axis names, posing, parts built under jax, parts only referenced
CASES += [
    ("an axis given as a list of names", lambda: cs.Revolute(cs.ground, body(), at=(0, 0, 0), axis=["x", "y", "z"],
                                                              name="hinge"), cs.ModelError, "hinge"),
    ("a complex inertia", lambda: cs.RigidBody("wheel", 1.0, (1 + 1j, 1, 1)), cs.InvalidInertia, "wheel"),
    ("a body built inside jax.grad", _traced_mass, cs.ModelError, "cs.Parameter"),
    ("an array where set_joints expects one angle",
     lambda: cs.set_joints(cs.problems.double_pendulum(), {"elbow": np.array([0.1, 0.2])}), cs.ModelError, "'elbow'"),
    ("a JointDrive on a ball joint", lambda: cs.JointDrive(cs.Spherical(cs.ground, body(), at=(0, 0, 0), name="ball"),
                                                            lambda t: t), cs.ModelError, "'ball'"),
    ("two JointDrives on one joint angle", _two_drives, cs.ModelError, "'servo 2'"),
    ("a driven joint whose rate is not the law's at t0", _drive_off_its_law, cs.InconsistentInitialState,
     "set_joints"),
    ("a body only in a joint, not listed (a warning)", _part_only_in_a_joint, UserWarning, "'arm'"),
]


def table():
    """The Markdown table: input, error type, message."""
    rows = ["| bad input | error | message |", "|---|---|---|"]
    for what, attempt, _, _ in CASES:
        try:
            attempt()
            rows.append(f"| {what} | (none) | |")
        except Exception as err:  # noqa: BLE001 — the point is to show every message
            message = str(err).replace(f"{SCRATCH}/", "").replace("|", "\\|").replace("\n", " ")
            rows.append(f"| {what} | `{type(err).__name__}` | {message} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
