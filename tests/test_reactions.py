"""Joint reactions from the multipliers obey the balance laws: a hanging body's pivot carries its
weight, every body's discrete momentum balance closes with the reactions and gravity, a joint's
two sides are action and reaction, a hinge transmits no torque about its axis, and both backends
give the same reactions."""

import numpy as np
import pytest

import conserve as cs
from conserve import problems
from conserve.model.joints import Joint
from conserve.results.reactions import joint_reactions

G = np.array([0.0, 0.0, -9.81])


def test_hanging_bar_carries_its_weight():
    bar = cs.RigidBody("bar", 2.0, (0.1, 0.1, 0.01), position=(0.0, 0.0, -0.5))
    pivot = cs.Revolute(cs.ground, bar, at=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0))
    system = cs.System([bar, pivot, cs.Gravity()]).assemble()
    sol = cs.simulate(system, 0.1, 0.01)
    r = joint_reactions(system, sol, pivot)
    np.testing.assert_allclose(r.force_b, np.broadcast_to(-2.0 * G, r.force_b.shape), atol=1e-9)
    np.testing.assert_allclose(r.torque_b, 0.0, atol=1e-9)
    np.testing.assert_allclose(r.force_a, -r.force_b, atol=1e-12)
    local = joint_reactions(system, sol, pivot, frame="b")  # the bar's axes = world axes here
    np.testing.assert_allclose(local.force_b, r.force_b, atol=1e-9)


def double_pendulum():
    """The assembled double pendulum and its joints by name."""
    system = problems.double_pendulum()
    return system.assemble(), {e.name: e for e in system.elements if isinstance(e, Joint)}


@pytest.mark.parametrize("backend", ["director", "reduced"])
def test_double_pendulum_reactions_balance(backend):
    system, joints = double_pendulum()
    sol = cs.simulate(system, 0.5, 2e-3, backend=backend)
    h = sol.t[1] - sol.t[0]
    rs, re = joint_reactions(system, sol, joints["shoulder"]), joint_reactions(system, sol, joints["elbow"])
    # Newton's third law at the elbow, computed from each bar's own rows of G
    np.testing.assert_allclose(re.force_a, -re.force_b, atol=1e-9 * np.max(np.abs(re.force_b)))
    # linear momentum balance of each bar over each step: m Δv/h = Σ reactions + m g
    for name, forces in (("upper", rs.force_b + re.force_a), ("lower", re.force_b)):
        m = next(p.mass for p in system.layout.parts if p.name == name)
        np.testing.assert_allclose(m * np.diff(sol[name].velocity, axis=0) / h, forces + m * G,
                                   atol=1e-8 * np.max(np.abs(forces)))
    # a frictionless hinge transmits no torque about its axis (at the step midpoint, where Ḡ acts),
    # but bending torques across it
    d_mid = 0.5 * (sol["lower"].rotation[1:] + sol["lower"].rotation[:-1])
    axis = d_mid @ joints["elbow"]._geometry["n_b"]
    about_axis = np.einsum("ni,ni->n", re.torque_b, axis) / np.linalg.norm(axis, axis=1)
    assert np.max(np.abs(about_axis)) <= 1e-9 * np.max(np.abs(re.torque_b))
    assert np.max(np.abs(re.torque_b)) > 1e-2


def test_backends_give_the_same_reactions():
    system, joints = double_pendulum()
    a, b = (cs.simulate(system, 0.3, 2e-3, backend=k) for k in ("director", "reduced"))
    for joint in joints.values():
        ra, rb = joint_reactions(system, a, joint), joint_reactions(system, b, joint)
        scale = np.max(np.abs(ra.force_b)) * 1.0  # N × the bars' length scale, 1 m
        for x, y in zip(ra[1:], rb[1:]):
            np.testing.assert_allclose(y, x, rtol=0, atol=1e-7 * scale)


def test_unknown_joint_or_frame_is_refused():
    system, joints = double_pendulum()
    sol = cs.simulate(system, 0.01, 1e-2)
    stranger = cs.Spherical(cs.ground, cs.RigidBody("x", 1.0, (1, 1, 1)), at=(0, 0, 0))
    with pytest.raises(cs.ModelError, match="not a joint of this system"):
        joint_reactions(system, sol, stranger)
    with pytest.raises(cs.ModelError, match="unknown frame"):
        joint_reactions(system, sol, joints["elbow"], frame="nowhere")
