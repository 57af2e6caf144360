"""Every joint at random configurations: the constraint Jacobian has the expected rank and the
joint leaves exactly the expected relative motions free (they span the null space of G)."""

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import conserve as cs

unit_floats = st.floats(-1.0, 1.0)
vectors = st.lists(unit_floats, min_size=3, max_size=3).map(np.array)
directions = vectors.filter(lambda v: np.linalg.norm(v) > 0.2).map(lambda v: v / np.linalg.norm(v))
rotations = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(
    lambda q: np.linalg.norm(q) > 0.2).map(lambda q: Rotation.from_quat(q).as_matrix())


def motion(part, omega, point, v_point):
    """Velocity blocks of a rigid motion: angular velocity ω about ``point`` moving at v_point."""
    phi, d = part.position, part.rotation.T
    return np.vstack([v_point + np.cross(omega, phi - point), np.cross(omega, d)]).ravel()


def rigid_motions(parts, x):
    """The 6 rigid motions of all parts together (3 translations, 3 rotations about x)."""
    e = np.eye(3)
    out = [np.concatenate([motion(p, 0 * e[k], x, e[k]) for p in parts]) for k in range(3)]
    out += [np.concatenate([motion(p, e[k], x, 0 * e[k]) for p in parts]) for k in range(3)]
    return out


def relative(a, b, omega, point, v_point):
    """b moves relative to a (a at rest)."""
    return np.concatenate([np.zeros(12), motion(b, omega, point, v_point)])


def free_motions(kind, a, b, x, n, u, w):
    """The relative freedoms each joint must leave (b moving, a at rest)."""
    e, z = np.eye(3), np.zeros(3)
    m1, m2 = cs.model.joints.perpendicular_basis(n)
    rot = lambda om, p=x: relative(a, b, om, p, z)  # noqa: E731
    trans = lambda v: relative(a, b, z, x, v)  # noqa: E731
    return {
        "Spherical": [rot(e[k]) for k in range(3)],
        "Revolute": [rot(n)],
        "Universal": [rot(u), rot(w)],
        "Cylindrical": [rot(n), trans(n)],
        "Prismatic": [trans(n)],
        "Planar": [trans(m1), trans(m2), rot(n)],
        "Fixed": [],
        "Distance": [rot(e[k], b.world_point(DIST_B)) for k in range(3)]
        + [trans(m) for m in perpendicular_pair(a.world_point(DIST_A) - b.world_point(DIST_B))],
        "Perpendicular": [rot(u), rot(w)] + [trans(e[k]) for k in range(3)],
        "Parallel": [rot(n)] + [trans(e[k]) for k in range(3)],
    }[kind]


DIST_A, DIST_B = np.array([0.3, 0.0, 0.1]), np.array([-0.2, 0.4, 0.0])


def perpendicular_pair(r):
    return cs.model.joints.perpendicular_basis(r / np.linalg.norm(r))


def make_joint(kind, a, b, x, n, u, w):
    J = getattr(cs, kind)
    if kind in ("Spherical", "Fixed"):
        return J(a, b, at=x, name="j")
    if kind in ("Revolute", "Cylindrical", "Prismatic"):
        return J(a, b, at=x, axis=n, name="j")
    if kind == "Planar":
        return J(a, b, at=x, normal=n, name="j")
    if kind == "Universal":
        return J(a, b, at=x, axes=(u, w), name="j")
    if kind == "Perpendicular":
        return J(a, b, axes=(u, w), name="j")
    if kind == "Parallel":
        return J(a, b, axis=n, name="j")
    return J(a, b, at_a=DIST_A, at_b=DIST_B, name="j")


KINDS = ["Spherical", "Revolute", "Universal", "Cylindrical", "Prismatic", "Planar", "Fixed", "Distance",
         "Perpendicular", "Parallel"]


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=12, deadline=None)
@given(Ra=rotations, Rb=rotations, pa=vectors, pb=vectors, x=vectors, n=directions, r=directions)
def test_rank_and_free_motions(kind, Ra, Rb, pa, pb, x, n, r):
    if abs(r @ n) > 0.95:
        r = np.cross(n, [1.0, 0.0, 0.0]) + np.cross(n, [0.0, 1.0, 0.0])
    u, w = n, np.cross(n, r) / np.linalg.norm(np.cross(n, r))
    a = cs.RigidBody("a", 1.0, (1.0, 1.2, 1.5), position=pa, orientation=Ra)
    b = cs.RigidBody("b", 2.0, (0.5, 0.7, 0.9), position=pb, orientation=Rb)
    joint = make_joint(kind, a, b, x, n, u, w)
    assembly = cs.System([a, b, joint]).assemble()  # world geometry: closed by construction
    model, state = assembly.model, assembly.initial_state
    G = np.asarray(jax.jacfwd(model.initial_constraints)(state.q, state.theta))
    assert G.shape[0] == 12 + joint.n_constraints
    assert np.linalg.matrix_rank(G, tol=1e-9 * np.abs(G).max()) == G.shape[0]
    motions = np.array(rigid_motions([a, b], x) + free_motions(kind, a, b, x, n, u, w)).T
    np.testing.assert_allclose(G @ motions, 0.0, atol=1e-12)
    null_dim = 24 - G.shape[0]
    assert np.linalg.matrix_rank(motions, tol=1e-9) == null_dim  # they span the whole null space


@pytest.mark.parametrize("kind", ["Revolute", "Prismatic", "Planar", "Spherical"])
def test_joints_to_ground_leave_the_same_freedoms(kind):
    b = cs.RigidBody("b", 1.0, (1.0, 1.2, 1.5), position=(0.3, -0.2, 0.5), euler=("XYZ", (0.3, 0.2, -0.4)))
    x, n = np.array([0.1, 0.2, 0.3]), np.array([0.0, 0.6, 0.8])
    joint = make_joint(kind, cs.ground, b, x, n, None, None)
    assembly = cs.System([b, joint]).assemble()
    assert assembly.degrees_of_freedom == 6 - joint.n_constraints


def test_a_hinge_given_by_body_axes_is_the_hinge_given_by_world_axes():
    """Its angle starts at 0 either way (before: with axis_a/axis_b each part's reference direction
    was chosen alone, the angle started anywhere — here at −1.96 rad — and a torsion spring of
    default rest 0 started wound: 11.4 J instead of 1.8). A tilted, spinning body on a hinge with a
    torsion spring and gravity moves the same to round-off."""
    Q = Rotation.from_rotvec([0.1, 0.2, -0.4]).as_matrix()
    X_b, n_b, centre = np.array([0.1, 0.2, 0.3]), np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.0, 0.0])
    pin, axis = centre + Q @ X_b, Q @ n_b
    omega = 3.0 * axis

    def run(body_axes):
        b = cs.RigidBody("b", mass=1.0, inertia=(0.2, 0.3, 0.4), position=centre, orientation=Q,
                         angular_velocity=omega, velocity=np.cross(omega, centre - pin))
        hinge = (cs.Revolute(cs.ground, b, at_a=pin, at_b=X_b, axis_a=axis, axis_b=n_b, name="h") if body_axes
                 else cs.Revolute(cs.ground, b, at=pin, axis=axis, name="h"))
        spring = cs.JointSpringDamper(hinge, stiffness=5.0, damping=0.1, name="spring")
        return cs.simulate(cs.System([b, hinge, spring, cs.Gravity([0.0, -9.81, 0.0])]), 0.2, 1e-3)

    world, body = run(False), run(True)
    assert abs(body.joint("h").angle[0]) <= 1e-14
    np.testing.assert_allclose(body.q, world.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(body.energy.total, world.energy.total, rtol=1e-13)
