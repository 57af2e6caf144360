"""Bad input gets a clear error naming the part; a failed run keeps what it computed."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs


def body(name="plate", **kw):
    args = dict(mass=1.0, inertia=(1.0, 2.0, 2.5))
    args.update(kw)
    return cs.RigidBody(name, **args)


@pytest.mark.parametrize("inertia, words", [
    ((1.0, 1.0, 3.0), "triangle inequality"),
    ((1.0, -2.0, 2.0), "positive definite"),
    ((0.0, 1.0, 1.0), "positive definite"),
    ([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "not symmetric"),
    ((1.0, np.nan, 1.0), "finite"),
    ((1.0, 2.0), "3 principal moments"),
])
def test_impossible_inertia(inertia, words):
    with pytest.raises(cs.InvalidInertia, match=words) as err:
        body("wheel", inertia=inertia)
    assert "'wheel'" in str(err.value)


def test_complex_inertia_is_refused_by_name():
    """(before: numpy's TypeError "float() argument must be ... not 'complex'", no body named)"""
    with pytest.raises(cs.InvalidInertia, match="body 'wheel': inertia must be real numbers in kg m², got "
                                                "\\(\\(1\\+1j\\), 1.0, 1.0\\) \\(complex\\)"):
        body("wheel", inertia=(1 + 1j, 1.0, 1.0))
    with pytest.raises(cs.InvalidInertia, match="'wheel'.*complex"):  # a complex array: numpy would drop the 1j
        body("wheel", inertia=np.array([1.0 + 0j, 1.0, 1.0 + 1j]))


def test_a_part_built_inside_jax_transformations_says_what_to_differentiate():
    """RigidBody(mass=<tracer>) (before: "mass must be positive and finite, got GradTracer(...)")."""
    import jax

    with pytest.raises(cs.ModelError, match="body 'hub': mass is traced by jax .* cs.step or cs.trajectory .* "
                                            "cs.Parameter"):
        jax.grad(lambda m: cs.RigidBody("hub", m, (1.0, 1.0, 1.0)).mass)(1.0)
    with pytest.raises(cs.ModelError, match="point mass 'bob': position is traced by jax"):
        jax.vmap(lambda x: cs.PointMass("bob", 1.0, position=x).mass)(np.zeros((2, 3)))


def test_axes_by_name():
    """axis="z" (before: "could not convert string to float: 'z'") is e3 wherever a direction is
    given: the same joints and rotors as with vectors; a list of names for one axis says what fits."""
    b = body("plate")
    by_name = cs.Revolute(cs.ground, b, at=(0, 0, 0), axis="-Z", name="hinge")
    by_vector = cs.Revolute(cs.ground, b, at=(0, 0, 0), axis=(0, 0, -1), name="hinge")
    for k in by_name._geometry:
        np.testing.assert_array_equal(by_name._geometry[k], by_vector._geometry[k])
    cardan = cs.Universal(cs.ground, b, at=(0, 0, 0), axes=("x", "y"), name="cardan")
    np.testing.assert_array_equal((cardan.u, cardan.w), np.eye(3)[:2])
    wheel = cs.Rotor("wheel", b, axis="y", axial_inertia=0.02, transverse_inertia=0.012)
    np.testing.assert_array_equal(wheel.axis, (0.0, 1.0, 0.0))
    with pytest.raises(cs.ModelError, match="joint 'hinge': axis must be one direction, 3 finite numbers or an axis "
                                            "name \\('x', 'y', 'z', '-x', '-y', '-z'\\), got \\['x', 'y', 'z'\\]"):
        cs.Revolute(cs.ground, b, at=(0, 0, 0), axis=["x", "y", "z"], name="hinge")
    with pytest.raises(cs.ModelError, match="joint 'cardan': axes must be two directions"):
        cs.Universal(cs.ground, b, at=(0, 0, 0), axes="z", name="cardan")
    with pytest.raises(cs.ModelError, match="rotor 'wheel': axis must be a non-zero 3-vector or one axis name"):
        cs.Rotor("wheel", b, axis="up", axial_inertia=0.02, transverse_inertia=0.012)


def test_flat_plate_is_allowed():
    """J3 = J1 + J2 (a lamina) is the boundary of the triangle inequality, not beyond it."""
    body("lamina", inertia=(1.0, 2.0, 3.0))


@pytest.mark.parametrize("mass", [0.0, -1.0, np.inf, np.nan, "1", True])
def test_non_positive_mass(mass):
    """Not a positive finite number (a string or a flag too, which float() would have converted)."""
    with pytest.raises(cs.InvalidMass, match="'hub'"):
        body("hub", mass=mass)
    with pytest.raises(cs.InvalidMass, match="'bob'"):
        cs.PointMass("bob", mass=mass)


def test_non_orthonormal_orientation():
    R = np.eye(3)
    R[0, 1] = 1e-6
    with pytest.raises(cs.InvalidOrientation, match=r"'arm'.*not orthonormal.*Rotation.from_matrix"):
        body("arm", orientation=R)


def test_reflection_is_rejected():
    with pytest.raises(cs.InvalidOrientation, match=r"'arm'.*det\(R\) = −1"):
        body("arm", orientation=np.diag([1.0, 1.0, -1.0]))


def test_non_unit_quaternion():
    with pytest.raises(cs.InvalidOrientation, match=r"'arm'.*norm 2"):
        body("arm", quaternion=(2.0, 0.0, 0.0, 0.0))


@pytest.mark.parametrize("euler", [("ZXZ", (0.1, np.nan, 0.2)), ("ZX", (0.1, 0.2, 0.3)), (0.1, 0.2)])
def test_bad_euler_angles(euler):
    with pytest.raises(cs.InvalidOrientation, match=r"'arm'.*euler must be \(sequence, angles\)"):
        body("arm", euler=euler)


def test_two_orientations_at_once():
    with pytest.raises(cs.InvalidOrientation, match="only one"):
        body("arm", orientation=np.eye(3), quaternion=(1.0, 0.0, 0.0, 0.0))


def test_initial_position_off_the_joint_names_joint_and_amount():
    b = body(position=(0.0, 0.0, 1.0))
    joint = cs.Spherical(b, cs.ground, at_a=(0.0, 0.0, -1.0), at_b=(0.0, 0.0, 0.003), name="hinge")
    with pytest.raises(cs.InconsistentInitialState, match=r"'hinge'.*by 0\.003"):
        cs.System([b, joint]).assemble()


def test_initial_velocity_off_the_joint_names_joint_and_fix():
    b = body(position=(0.0, 0.0, 1.0), angular_velocity=(1.0, 0.0, 0.0))
    joint = cs.Spherical(b, cs.ground, at=(0.0, 0.0, 0.0), name="pivot")
    with pytest.raises(cs.InconsistentInitialState, match=r"'pivot'.*velocit.*ω × \(x_c − r0\)"):
        cs.System([b, joint]).assemble()
    # the suggested fix makes it consistent
    omega, x_c = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    ok = body(position=x_c, angular_velocity=omega, velocity=np.cross(omega, x_c))
    cs.System([ok, cs.Spherical(ok, cs.ground, at=(0.0, 0.0, 0.0), name="pivot")]).assemble()


def test_redundant_constraints_are_detected_and_named():
    b = body(position=(0.0, 0.0, 1.0))
    joints = [cs.Spherical(b, cs.ground, at=(0.0, 0.0, 0.0), name="first"),
              cs.Spherical(b, cs.ground, at=(0.0, 0.0, 0.0), name="second")]
    with pytest.raises(cs.ModelError, match=r"redundant constraints: 3 of 12.*second \(x\)"):
        cs.System([b, *joints]).assemble(redundant="raise")
    assembly = cs.System([b, *joints]).assemble()  # default: drop the later joint's rows, say so
    assert assembly.layout.dropped_rows and assembly.degrees_of_freedom == 3
    assert "3 redundant equations dropped: second (x), second (y), second (z)" in assembly.report()


def test_a_part_only_in_a_joint_is_added_with_a_warning_and_reported():
    """(before: added silently) A body left out of the System but referenced by a joint is added,
    named in a UserWarning and in assembly.report(); listed, it is neither."""
    import warnings

    arm = body("arm", position=(1.0, 0.0, 0.0))
    hinge = cs.Revolute(cs.ground, arm, at=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="hinge")
    with pytest.warns(UserWarning, match="System: 'arm' \\(in 'hinge'\\) not listed in the System, added because "
                                         "it appears in other elements; list it in System"):
        assembly = cs.System([hinge]).assemble()
    assert "added (not listed in the System): 'arm' (in 'hinge')" in assembly.report()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        listed = cs.System([arm, hinge]).assemble()
    assert "added" not in listed.report()
    # printed, an assembly is one line (before: every array of the model)
    assert repr(listed) == str(listed) == "Assembly(1 part, 12 coordinates, 11 constraint equations, 1 DOF)"
    wheels = cs.problems.spacecraft().assemble()
    assert repr(wheels) == "Assembly(1 part, 3 hybrid rotors, 12 coordinates, 6 constraint equations, 9 DOF)"


def test_point_mass_cannot_be_attached_off_its_position():
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, -1.0))
    with pytest.raises(cs.ModelError, match="point mass 'bob'.*own position"):
        cs.Spherical(bob, cs.ground, at=(0.0, 0.0, 0.0))


def test_joint_to_itself_and_duplicate_names():
    b = body()
    with pytest.raises(cs.ModelError, match="itself"):
        cs.Spherical(b, b, at=(0.0, 0.0, 0.0))
    with pytest.raises(cs.ModelError, match="'plate'.*unique"):
        cs.System([b, body()]).assemble()


@pytest.mark.parametrize("kw, words", [({"dt": -1e-3}, "dt must be positive"),
                                       ({"dt": 1e-3, "t_end": 0.0}, "t_end"),
                                       ({"dt": 1e-3, "backend": "rk4"}, "unknown backend"),
                                       ({"dt": 1e-3, "chunk": 0}, "chunk must be an integer"),
                                       ({"dt": 1e-3, "progress": True}, "progress must be a callable"),
                                       ({"dt": 1e-3, "newton": {"tol": 1e-10}}, "newton must be a cs.Newton"),
                                       ({"dt": 1e-3, "ode": {"method": "Radau"}}, "apply to backend='ode'"),
                                       # steps below the times' round-off (floats near 1e12 s are 1.2e-4 s apart)
                                       ({"dt": 1e-5, "t0": 1e12, "t_end": 1e12 + 1e-3}, "round-off of the times"),
                                       ({"dt": "adaptive", "t0": 1e12, "t_end": 1e12 + 1e-3},
                                        "round-off of the times")])
def test_bad_simulation_arguments(kw, words):
    args = {"t_end": 1.0, **kw}
    with pytest.raises(cs.ModelError, match=words):
        cs.simulate(cs.problems.free_body(), **args)


def test_arguments_of_the_wrong_kind_are_refused_by_name():
    body = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5))
    with pytest.raises(cs.ModelError, match="as a list"):
        cs.System(body)
    with pytest.raises(cs.ModelError, match="coordinates must be a dict"):
        cs.set_joints(cs.problems.double_pendulum(), [("elbow", 0.5)])
    with pytest.raises(ValueError, match="tol must lie in"):
        cs.Newton(tol="1e-10")
    with pytest.raises(ValueError, match="members must name a vmapped axis"):
        cs.Newton(members=0)
    assert cs.Newton(max_iterations=np.int64(10)).max_iterations == 10  # a numpy integer is an integer


def test_names_instead_of_parts_and_words_instead_of_vectors_are_refused_by_name():
    """(before: AttributeError 'str' object has no attribute 'name', a float conversion error)"""
    bar = cs.RigidBody("bar", mass=1.0, inertia=(0.1, 0.1, 0.02), position=(0.0, 0.0, -0.5))
    hinge = cs.Revolute(cs.ground, bar, at=(0, 0, 0), axis=(1, 0, 0), name="hinge")
    with pytest.raises(cs.ModelError, match="got 'bar'; pass the part objects"):
        cs.SpringDamper(cs.ground, "bar", points=((0, 1, 0), (0, 0, -0.5)), stiffness=1.0)
    with pytest.raises(cs.ModelError, match="acts on a joint .* got 'hinge'"):
        cs.JointSpringDamper("hinge", stiffness=1.0)
    with pytest.raises(cs.ModelError, match="'gravity': g must be 3 finite numbers, got 'down'"):
        cs.Gravity("down")
    cs.System([bar, hinge, cs.JointSpringDamper(hinge, stiffness=1.0)]).assemble()  # the objects themselves: fine
    with pytest.raises(cs.ModelError, match="'push': give a force=, a torque= or both"):
        cs.Force(bar, name="push")  # (before: accepted, a load of nothing)


def test_a_drive_or_a_potential_force_that_turns_nan_is_named():
    """A step's NaN from a prescribed motion's law or from a potential whose energy is finite but
    its gradient not (√ at 0) names the element (before: "Newton produced NaN/inf", no culprit)."""
    def pendulum(*elements):
        bar = cs.RigidBody("bar", mass=1.0, inertia=(0.1, 0.1, 0.02), position=(0.0, 0.0, -0.5))
        hinge = cs.Revolute(cs.ground, bar, at=(0, 0, 0), axis=(1, 0, 0), name="hinge")
        return cs.System([bar, hinge, cs.Gravity(), *[e(bar, hinge) for e in elements]])

    drive = lambda bar, hinge: cs.JointDrive(hinge, lambda t: jnp.where(t > 0.005, jnp.nan, 0.0), name="servo")  # noqa: E731
    with pytest.raises(cs.ConvergenceError, match="not finite: the constraint 'servo'") as err:
        cs.simulate(pendulum(drive), 0.02, 1e-3)
    assert err.value.partial_solution.t[-1] == pytest.approx(0.005)  # the steps before are kept
    root = lambda bar, hinge: cs.Potential([bar], lambda f: f.position, lambda pi: jnp.sqrt(-pi[1]), name="well")  # noqa: E731
    with pytest.raises(cs.ConvergenceError, match="not finite: the force of 'well'"):
        cs.simulate(pendulum(root), 0.02, 1e-3)


def test_misused_arguments_of_the_api_say_what_fits(tmp_path):
    """(before: a scipy ValueError without the body, FileExistsError, a numpy broadcast error, "mul got
    incompatible shapes" from inside the step)"""
    with pytest.raises(cs.InvalidOrientation, match="body 'b': euler sequence 'XQ'"):
        cs.RigidBody("b", mass=1.0, inertia=(1.0, 1.0, 1.0), euler=("XQ", (0.1, 0.2)))
    top = cs.problems.heavy_top()
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(cs.ModelError, match="is a file, not a directory"):
        cs.simulate(top, 0.01, 1e-3, checkpoint=tmp_path / "file")
    sol = cs.simulate(top, 0.01, 1e-3)
    with pytest.raises(ValueError, match="one body point X of 3 coordinates"):
        sol["top"].point([0.0, 0.0])
    a = top.assemble()
    batch = a.initial_state._replace(q=np.stack([a.initial_state.q] * 2))
    with pytest.raises(cs.ModelError, match="q has shape \\(2, 12\\), the model's \\(12,\\)"):
        cs.step(a.model, batch, 0.0, 1e-3)


def test_numpy_integers_count_steps_and_chunks_and_bools_do_not():
    """Counts given as numpy integers (an index from np.argmax, a grid from np.arange) are integers
    (before: refused as "not an integer"); the run is the one with Python integers, bit for bit."""
    body = cs.problems.free_body()
    plain = cs.simulate(body, 0.01, 1e-3, chunk=4, max_subdivisions=3, on_failure="subdivide")
    numpy = cs.simulate(body, 0.01, 1e-3, chunk=np.int64(4), max_subdivisions=np.int32(3), on_failure="subdivide")
    np.testing.assert_array_equal(numpy.q, plain.q)
    a = body.assemble()
    states, _ = cs.trajectory(a.model, a.initial_state, 0.0, 1e-3, np.int64(3))
    assert states.q.shape[0] == 4
    with pytest.raises(cs.ModelError, match="chunk must be an integer"):
        cs.simulate(body, 0.01, 1e-3, chunk=True)


def test_a_step_longer_than_the_run_warns_of_swapped_arguments():
    """simulate(system, t_end, dt) called as (system, dt, t_end): one step to t0 + dt, with a warning."""
    with pytest.warns(UserWarning, match="longer than the span .* swapped"):
        sol = cs.simulate(cs.problems.free_body(), 1e-3, 0.5)
    assert sol.t[-1] == 0.5 and len(sol) == 2


def test_nan_mid_run_raises_with_the_partial_solution():
    """A falling point mass reaches z < 0 at t ≈ 0.45 s where the potential is NaN."""
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, 1.0))
    well = cs.Potential([bob], invariants=lambda f: f.position[2], energy=lambda pi: 1e-3 * jnp.sqrt(pi[0]),
                        name="sqrt-well")  # NaN once the bob falls below z = 0
    system = cs.System([bob, cs.Gravity(), well])
    with pytest.raises(cs.ConvergenceError, match=r"step \d+ \(t = .*NaN") as err:
        cs.simulate(system, t_end=1.0, dt=1e-3, chunk=64)
    e = err.value
    assert "not finite: the potential energy of 'sqrt-well' (nan J at its end predicted" in str(e)
    partial = e.partial_solution
    assert 0.3 < e.time < 0.5
    assert len(partial) == e.step + 1 and partial.t[-1] == pytest.approx(e.time)
    assert np.all(np.isfinite(partial.q))
    assert partial["bob"].position[-1, 2] >= 0.0
    E = partial.energy.total
    assert np.max(np.abs(E - E[0])) <= 1e-10 * abs(E[0])  # everything kept is still exact
    assert len(e.residual_history) >= 1
    assert "energy              max |E - E0|" in partial.summary()


def test_laws_that_are_not_finite_are_named():
    """A point mass at the centre of a central gravity field (its potential energy is −∞ there) is
    refused before the run; a thrust that turns NaN at t > 0.05 s stops the run there, naming it."""
    with pytest.raises(cs.ModelError, match="initial state's energy is not finite: the potential energy of 'sat'"):
        cs.simulate(cs.System([cs.PointMass("sat", 1.0), cs.CentralGravity(1.0)]), 0.1, 1e-2)
    plate = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5))
    thrust = cs.Force(plate, lambda t, state: jnp.where(t > 0.05, jnp.nan, 1.0) * jnp.array([1.0, 0.0, 0.0]),
                      name="thrust")
    with pytest.raises(cs.ConvergenceError, match="step 5 .*not finite: the power of 'thrust' .*its force or torque is "
                                             "not finite") as err:
        cs.simulate(cs.System([plate, thrust]), 0.1, 1e-2)
    assert len(err.value.partial_solution) == 6


def test_failure_on_the_first_step_still_summarises_and_saves(tmp_path):
    with pytest.raises(cs.ConvergenceError) as err:
        cs.simulate(cs.problems.heavy_top(), t_end=0.1, dt=2e-3, newton=cs.Newton(max_iterations=1))
    partial = err.value.partial_solution
    assert len(partial) == 1 and "0 steps" in partial.summary()
    partial.save(tmp_path / "partial.npz")
    assert len(cs.Solution.load(tmp_path / "partial.npz")) == 1


def test_newton_iteration_limit_raises_with_history():
    with pytest.raises(cs.ConvergenceError, match="did not converge in 2 iterations") as err:
        cs.simulate(cs.problems.heavy_top(), t_end=0.1, dt=2e-3, newton=cs.Newton(max_iterations=2))
    e = err.value
    assert e.step == 0 and len(e.partial_solution) == 1
    assert len(e.residual_history) == 2 and e.residual_history[1] < e.residual_history[0]


def _bad_inputs():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "bad_inputs.py"
    spec = importlib.util.spec_from_file_location("bad_inputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


@pytest.mark.parametrize("what, attempt, error, culprit", _bad_inputs(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_bad_input_of_the_readme_table_is_refused_by_name(what, attempt, error, culprit):
    """The README's table of bad inputs (examples/bad_inputs.py): each is refused with its error
    type and a message naming the culprit."""
    with pytest.raises(error) as err:
        attempt()
    assert culprit in str(err.value)


# --- issue 14: laws checked at assembly, numbers checked at construction ---------------------------

def _plate():
    return cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0.1, 0.2, 0.3))


def _with_force(law):
    b = _plate()
    return cs.System([b, cs.Force(b, law, name="thrust")])


def _with_rotor_motor(law):
    b = _plate()
    return cs.System([b, cs.Rotor("wheel", on=b, axis=(0, 0, 1), axial_inertia=0.02, transverse_inertia=0.012,
                                  motor=law)])


def _with_joint_motor(law):
    b = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5))
    hinge = cs.Revolute(cs.ground, b, at=(0, 0, 0), axis=(0, 0, 1), name="hinge")
    return cs.System([b, hinge, cs.JointMotor(hinge, law, name="drive")])


def _with_potential(energy):
    b = _plate()
    return cs.System([b, cs.Potential([b], invariants=lambda f: f.position @ f.position, energy=energy, name="well")])


def _with_constraint(residual, rows=1):
    b = _plate()
    return cs.System([b, cs.Constraint([b, cs.ground], residual, rows=rows, name="rail")])


@pytest.mark.parametrize("build, words", [
    (lambda: _with_force(lambda t, s: jnp.array([1.0])), r"'thrust'.*returns shape \(1,\), expected \(3,\)"),
    (lambda: _with_force(lambda t, s: None), r"'thrust'.*returns None"),
    (lambda: _with_force(lambda t, s: np.array([np.sin(t), 0.0, 0.0])), r"'thrust'.*use jax\.numpy"),
    (lambda: _with_force(lambda t, s: jnp.zeros(3) if t > 1 else jnp.ones(3)), r"'thrust'.*jnp\.where"),
    (lambda: _with_force(lambda t, s, gain: jnp.zeros(3)), r"'thrust'.*wrong signature.*force\(t, state\)"),
    (lambda: _with_force(lambda t, s: jnp.zeros(3, jnp.float32)), r"'thrust'.*float32.*float64"),
    (lambda: _with_force(lambda t, s: s.positon), r"'thrust'.*AttributeError.*positon"),
    (lambda: _with_rotor_motor(lambda t, r: jnp.array([0.1])), r"'wheel'.*shape \(1,\), expected \(\).*torque"),
    (lambda: _with_rotor_motor(lambda t: 0.1), r"'wheel'.*wrong signature.*motor\(t, rotor\)"),
    (lambda: _with_joint_motor(lambda t, joint: jnp.ones(2)), r"'drive'.*shape \(2,\), expected \(\)"),
    (lambda: _with_potential(lambda pi: pi), r"'well'.*energy.*shape \(1,\), expected \(\)"),
    (lambda: _with_constraint(lambda f, g: f.position[:2]), r"'rail'.*residual.*shape \(2,\), expected \(1,\)"),
], ids=["shape", "none", "numpy", "python-if", "signature", "float32", "typo", "rotor", "rotor-signature",
        "joint-motor", "energy", "constraint-rows"])
def test_every_user_law_is_checked_at_assembly(build, words):
    """Every law is evaluated once, abstractly (jax.eval_shape), when the system is assembled; a
    law that cannot run in the step, or returns the wrong shape (which jax would broadcast:
    before, a force of shape (1,) acted as (F, F, F)), is named with the element, the expected
    signature and result, and the fix."""
    with pytest.raises(cs.ModelError, match=words) as err:
        build().assemble()
    assert "Expected:" in str(err.value)


def test_old_law_forms_warn_and_run_the_same_steps():
    """The laws' unified form is law(t, state); the old ones (a joint motor's (t, s, s_dot) and
    (t, s, s_dot, a_state), a force's (t)) still run, with a DeprecationWarning naming the element."""
    new = cs.simulate(_with_joint_motor(lambda t, joint: 0.3 * jnp.sin(t) - 0.1 * joint.rate), 0.05, 1e-2)
    with pytest.warns(DeprecationWarning, match=r"'drive'.*law\(t, s, s_dot\) is deprecated.*law\(t, joint\)"):
        old = _with_joint_motor(lambda t, s, s_dot: 0.3 * jnp.sin(t) - 0.1 * s_dot)
    with pytest.warns(DeprecationWarning, match=r"'drive'.*law\(t, s, s_dot, a_state\) is deprecated"):
        old_with_state = _with_joint_motor(lambda t, s, s_dot, a: 0.3 * jnp.sin(t) - 0.1 * s_dot + 0 * a.position[0])
    for system in (old, old_with_state):
        np.testing.assert_array_equal(cs.simulate(system, 0.05, 1e-2).q, new.q)
    with pytest.warns(DeprecationWarning, match=r"'thrust'.*force\(t\) is deprecated.*force\(t, state\)"):
        old = _with_force(lambda t: jnp.array([0.0, 0.0, jnp.sin(t)]))
    new = _with_force(lambda t, state: jnp.array([0.0, 0.0, jnp.sin(t)]))
    np.testing.assert_array_equal(cs.simulate(old, 0.05, 1e-2).q, cs.simulate(new, 0.05, 1e-2).q)


def test_a_law_may_return_a_list():
    """[0, 0, f] is read as the array it spells: the same run as jnp.array([0, 0, f])."""
    as_list = cs.simulate(_with_force(lambda t, s: [0.0, 0.0, jnp.sin(t)]), 0.05, 1e-2)
    as_array = cs.simulate(_with_force(lambda t, s: jnp.array([0.0, 0.0, jnp.sin(t)])), 0.05, 1e-2)
    np.testing.assert_array_equal(as_list.q, as_array.q)
    assert np.ptp(as_list["plate"].position[:, 2]) > 0


@pytest.mark.parametrize("attempt, error, words", [
    (lambda: cs.SpringDamper(cs.ground, _plate(), points=((0, 0, 0), (1, 0, 0)), stiffness=1.0, rest_length=-1.0,
                             name="spring"), cs.ModelError, r"'spring'.*rest_length must be ≥ 0"),
    (lambda: cs.SpringDamper(cs.ground, _plate(), points=((0, 0, 0), (1, 0, 0)), rest_length=np.nan, name="spring"),
     cs.ModelError, r"'spring'.*rest_length"),
    (lambda: cs.JointSpringDamper(cs.Revolute(cs.ground, _plate(), at=(0, 0, 0), axis=(0, 0, 1)), 1.0,
                                  rest=np.inf, name="torsion"), cs.ModelError, r"'torsion'.*rest.*finite"),
    (lambda: cs.Rotor("wheel", on=_plate(), axis=(0, 0, 1), offset=(0, np.nan, 0), axial_inertia=0.02,
                      transverse_inertia=0.012), cs.ModelError, r"'wheel'.*offset"),
    (lambda: cs.Rotor("wheel", on=_plate(), axis=(0, 0, 1), axial_inertia=0.02, transverse_inertia=0.012,
                      spin_rate=np.inf), cs.ModelError, r"'wheel'.*spin_rate must be a finite"),
    (lambda: cs.Rotor("wheel", on=_plate(), axis=(0, 0, 1), axial_inertia=np.inf, transverse_inertia=0.012),
     cs.InvalidInertia, r"'wheel'.*positive and finite"),
    (lambda: cs.Rotor("wheel", on=_plate(), axis=(0, 0, 1), axial_inertia=0.02, transverse_inertia=0.012,
                      model="body"), cs.InvalidMass, r"'wheel'.*model='body'.*positive mass"),
    (lambda: cs.simulate(cs.problems.free_body(), 1e12, 1e-3), cs.ModelError, r"at most 2147483646 steps"),
    (lambda: cs.Constraint([_plate()], lambda f: f.position[0], rows="one", name="rail"), cs.ModelError,
     r"'rail'.*rows must be"),
], ids=["negative-rest-length", "nan-rest-length", "inf-rest-angle", "nan-rotor-offset", "inf-spin-rate",
        "inf-rotor-inertia", "massless-body-rotor", "too-many-steps", "rows-not-int"])
def test_impossible_numbers_are_refused_with_the_element_name(attempt, error, words):
    with pytest.raises(error, match=words):
        attempt()


def test_float32_times_give_the_steps_they_print():
    """np.float32(0.3) / np.float32(0.1) is 3.0000001 in float64: read as the decimals 0.3 and 0.1
    (before: 4 steps)."""
    system = cs.problems.free_body(angular_velocity=(1.0, 2.0, 2.0))
    assert len(cs.simulate(system, np.float32(0.3), np.float32(0.1))) == 4
    assert len(cs.simulate(system, 0.3, 0.1)) == 4


def test_a_massless_hybrid_rotor_is_allowed():
    """Rotor(mass=0.0), the signature's default: a balanced wheel whose mass the master carries."""
    b = _plate()
    wheel = cs.Rotor("wheel", on=b, axis=(0, 0, 1), axial_inertia=0.02, transverse_inertia=0.012, spin_rate=50.0)
    sol = cs.simulate(cs.System([b, wheel]), 0.5, 1e-2)
    J = sol.angular_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-13 * np.linalg.norm(J[0])


def test_coarse_steps_on_a_fast_full_body_rotor_warn_and_point_to_the_hybrid_model():
    """A 300 rad/s full-body wheel at Δt = 0.05 (15 rad per step) conserves, but its precession is
    ~20 % wrong: simulate says so and names the fix."""
    core = cs.RigidBody("core", mass=10.0, inertia=(1.0, 1.5, 2.0), angular_velocity=(0.1, 0.0, 0.0))
    wheel = cs.Rotor("wheel", on=core, axis=(0, 0, 1), mass=1.0, axial_inertia=0.02, transverse_inertia=0.012,
                     spin_rate=300.0, model="body")
    with pytest.warns(cs.CoarseStepWarning, match=r"'wheel' 15 rad.*Rotor\(\.\.\., model='hybrid'\)"):
        cs.simulate(cs.System([core, wheel]), 0.1, 0.05)


def test_a_step_plainly_too_large_says_so_first_and_how_much_smaller():
    """The heavy top (|ω| = 141 rad/s) at Δt = 0.5 s turns 70 rad per step: the ConvergenceError
    says the step is too large, names the part and the step that turns it a radian, before the
    residual history, and does not guess at a law that jumps or the Newton matrix. With t_end and
    dt swapped (a double pendulum, simulate(system, 0.01, 10.0)) it says that first."""
    with pytest.warns(cs.CoarseStepWarning), pytest.raises(cs.ConvergenceError) as err:
        cs.simulate(cs.problems.heavy_top(), 2.0, 0.5)
    message = str(err.value)
    assert message.index("the step is too large: 'top' turns") < message.index("Newton did not converge")
    rate = np.linalg.norm(err.value.partial_solution["top"].angular_velocity[-1])
    dt = float(re.search(r"take dt ≤ ([0-9.e+-]+) s", message).group(1))
    assert dt * rate == pytest.approx(1.0, rel=1e-2)  # the step that turns the top 1 rad
    factor = float(re.search(r"s, ([0-9.e+-]+)× smaller", message).group(1))
    assert factor == pytest.approx(0.5 / dt, rel=1e-2)
    assert "law that jumps" not in message and "linear='dense'" not in message
    with pytest.warns(UserWarning, match="swapped"), pytest.raises(cs.ConvergenceError) as err:
        cs.simulate(cs.problems.double_pendulum(), 0.01, 10.0)
    message = str(err.value)
    assert message.index("too large: dt = 10 s is longer than the run's span") < message.index("Newton")
    assert "swapped" in message and "law that jumps" not in message and "linear='dense'" not in message
