"""Bad input gets a clear error naming the part; a failed run keeps what it computed."""

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


def test_flat_plate_is_allowed():
    """J3 = J1 + J2 (a lamina) is the boundary of the triangle inequality, not beyond it."""
    body("lamina", inertia=(1.0, 2.0, 3.0))


@pytest.mark.parametrize("mass", [0.0, -1.0, np.inf, np.nan])
def test_non_positive_mass(mass):
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
                                       ({"dt": 1e-3, "chunk": 0}, "chunk must be an integer")])
def test_bad_simulation_arguments(kw, words):
    args = {"t_end": 1.0, **kw}
    with pytest.raises(cs.ModelError, match=words):
        cs.simulate(cs.problems.free_body(), **args)


def test_nan_mid_run_raises_with_the_partial_solution():
    """A falling point mass reaches z < 0 at t ≈ 0.45 s where the potential is NaN."""
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, 1.0))
    well = cs.Potential([bob], invariants=lambda f: f.position[2], energy=lambda pi: 1e-3 * jnp.sqrt(pi[0]),
                        name="sqrt-well")  # NaN once the bob falls below z = 0
    system = cs.System([bob, cs.Gravity(), well])
    with pytest.raises(cs.ConvergenceError, match=r"step \d+ \(t = .*NaN") as err:
        cs.simulate(system, t_end=1.0, dt=1e-3, chunk=64)
    e = err.value
    partial = e.partial_solution
    assert 0.3 < e.time < 0.5
    assert len(partial) == e.step + 1 and partial.t[-1] == pytest.approx(e.time)
    assert np.all(np.isfinite(partial.q))
    assert partial["bob"].position[-1, 2] >= 0.0
    E = partial.energy.total
    assert np.max(np.abs(E - E[0])) <= 1e-10 * abs(E[0])  # everything kept is still exact
    assert len(e.residual_history) >= 1
    assert "energy drift" in partial.summary()


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
