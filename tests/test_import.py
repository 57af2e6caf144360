"""MJCF/URDF import (conserve.importers.mjcf): what MuJoCo's model has — masses, inertias, degrees
of freedom — arrives, what cannot be mapped is named in a warning, and a run of the imported
model follows MuJoCo's own RK4 run of the same model to ≤ 1e-6 in every joint coordinate."""

import os
import warnings

import numpy as np
import pytest

import conserve as cs
from conserve.importers.mjcf import like_conserve

mujoco = pytest.importorskip("mujoco", reason="the import extra: pip install -e '.[import]'")

#: every mapped kind at once: a welded child (merged), hinge + slide on one axis (cylindrical),
#: two hinges (universal), a ball, three hinges (spherical), a free body, a slide pair, a
#: connect loop, springs/dampers/friction, a motor and a position servo, a joint limit
KINDS = """
<mujoco model="kinds">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="3" springref="0.2" damping="0.1"
             limited="true" range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" density="800"/>
      <body name="hand" pos="0.5 0 0"><geom type="box" size="0.05 0.03 0.02" density="500"/></body>
      <body name="fore" pos="0.5 0 0">
        <joint name="spin" type="hinge" axis="1 0 0" damping="0.05" frictionloss="0.01"/>
        <joint name="reach" type="slide" axis="1 0 0" stiffness="20"/>
        <geom type="cylinder" fromto="0 0 0 0.4 0 0" size="0.03" density="700"/>
      </body>
    </body>
    <body name="gimbal" pos="1 1 1">
      <joint name="gx" type="hinge" axis="1 0 0"/><joint name="gy" type="hinge" axis="0 1 0"/>
      <geom type="ellipsoid" size="0.1 0.2 0.3" pos="0 0 -0.2"/>
      <body name="ball" pos="0 0 -0.5">
        <joint name="socket" type="ball"/>
        <geom type="sphere" size="0.08" pos="0 0 -0.2"/>
      </body>
    </body>
    <body name="wrist" pos="-1 0 1">
      <joint name="rx" type="hinge" axis="1 0 0"/><joint name="ry" type="hinge" axis="0 1 0"/>
      <joint name="rz" type="hinge" axis="0 0 1"/>
      <geom type="box" size="0.1 0.05 0.2" pos="0 0 -0.25"/>
    </body>
    <body name="puck" pos="0 -1 0.1">
      <joint name="px" type="slide" axis="1 0 0" ref="0.3"/><joint name="py" type="slide" axis="0 1 0"/>
      <geom type="cylinder" size="0.1 0.02"/>
    </body>
    <body name="drone" pos="0 2 2"><freejoint name="drone"/><geom type="box" size="0.2 0.2 0.05"/></body>
    <body name="link1" pos="2 0 1">
      <joint name="l1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
      <body name="link2" pos="0.5 0 0">
        <joint name="l2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>
      </body>
    </body>
    <body name="link3" pos="3 0 1">
      <joint name="link3" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 -0.5 0 -0.5" size="0.03"/>
    </body>
  </worldbody>
  <equality>
    <connect name="loop" body1="link2" body2="link3" anchor="0 0 -0.5"/>
    <weld name="dock" body1="drone"/>
  </equality>
  <actuator>
    <motor name="lift" joint="shoulder" gear="2" ctrlrange="-1 1" ctrllimited="true"/>
    <position name="servo" joint="spin" kp="0.05" kv="0.002"/>
  </actuator>
</mujoco>
"""


def _import(source, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        system = cs.from_mjcf(source, **options)
    return system, [str(w.message) for w in caught if issubclass(w.category, cs.ModelImportWarning)]


def _world_inertia(parts):
    """Total mass, centre of mass and inertia tensor about it, (mass, x (3,), R (3, 3), J (3, 3)) per part."""
    M = sum(m for m, *_ in parts)
    c = sum(m * x for m, x, *_ in parts) / M
    J = sum(R @ Jb @ R.T + m * ((x - c) @ (x - c) * np.eye(3) - np.outer(x - c, x - c)) for m, x, R, Jb in parts)
    return M, c, J


def test_round_trip_keeps_masses_inertias_and_freedoms():
    system, messages = _import(KINDS)
    m = system.imported.model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    bodies = [e for e in system.elements if isinstance(e, cs.RigidBody)]
    mine = _world_inertia([(b.mass, b.position, b.rotation, b.inertia) for b in bodies])
    theirs = _world_inertia([(m.body_mass[i], d.xipos[i], d.ximat[i].reshape(3, 3), np.diag(m.body_inertia[i]))
                             for i in range(1, m.nbody)])
    assert mine[0] == pytest.approx(theirs[0], rel=1e-12)
    np.testing.assert_allclose(mine[1], theirs[1], atol=1e-12)
    np.testing.assert_allclose(mine[2], theirs[2], atol=1e-12 * np.abs(theirs[2]).max())
    # one conserve body per MuJoCo body with joints; "hand" (no joint) merged into "arm"; the
    # limit is reported, never dropped silently
    assert sorted(b.name for b in bodies) == sorted(
        m.body(i).name for i in range(1, m.nbody) if m.body_jntnum[i])
    assert system.imported.bodies["hand"] == "arm"
    # the geoms are the bodies' visual shapes, where MuJoCo has them (the hand's box on the arm)
    arm = next(b for b in bodies if b.name == "arm")
    assert [s["kind"] for s in arm.shapes] == ["capsule", "box"]
    for s, g in zip(arm.shapes, (m.geom(0), m.geom(1))):
        np.testing.assert_allclose(arm.position + arm.rotation @ s["pos"], d.geom_xpos[g.id], atol=1e-12)
        np.testing.assert_allclose(arm.rotation @ s["rotation"], d.geom_xmat[g.id].reshape(3, 3), atol=1e-12)
    with pytest.raises(cs.ModelError, match="body 'b': shape 0: a box needs 3 positive size"):
        cs.RigidBody("b", 1.0, (1.0, 1.0, 1.0), shapes=[{"kind": "box", "size": [1.0, 1.0]}])
    kinds = {type(e).__name__ for e in system.elements}
    assert {"Revolute", "Cylindrical", "Universal", "Spherical", "Translational", "Gravity", "Controller"} <= kinds \
        | {type(c).__name__ for c in system.controllers}
    # the same freedoms: MuJoCo's nv less the planar four-bar loop's two independent rows (the
    # third, normal to its plane, is redundant and dropped) and the drone's six, welded to the world
    assert system.assemble().layout.degrees_of_freedom == m.nv - 2 - 6
    # names carry over (a joint named as a body, as MuJoCo allows, gets " joint" appended)
    assert {"shoulder", "spin+reach", "gx+gy", "socket", "rx+ry+rz", "px+py", "loop", "dock", "link3 joint"} <= {
        e.name for e in system.elements}
    assert len(messages) == 1 and "joint 'shoulder': limits" in messages[0] and "contacts" in messages[0]


def test_unmappable_models_are_refused_with_the_body_named(tmp_path):
    odd = KINDS.replace('<joint name="reach" type="slide" axis="1 0 0" stiffness="20"/>',
                        '<joint name="reach" type="slide" axis="0 1 0" stiffness="20"/>')
    with pytest.raises(cs.ModelError, match="body 'fore' has the joints spin \\(hinge\\), reach \\(slide\\)"):
        cs.from_mjcf(odd)
    with pytest.raises(cs.ModelError, match="no file"):
        cs.from_mjcf(tmp_path / "missing.xml")
    with pytest.raises(cs.ModelError, match="MuJoCo could not read"):
        cs.from_mjcf("<mujoco><worldbody><body><joint type='hinge'/></body></worldbody>")


def _mujoco_run(m, qpos, qvel, t_end, h, every, ctrl=None):
    """MuJoCo RK4 nodes (qpos (K, nq), energies (K,)) every ``every`` seconds."""
    m = like_conserve(m)
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, h
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    n, stride = int(round(t_end / h)), int(round(every / h))
    q, energy = [d.qpos.copy()], [d.energy.sum()]
    for k in range(n):
        if ctrl is not None:  # held over the step at its midpoint value: second order in h
            d.ctrl[:] = ctrl(d.time + 0.5 * h)
        mujoco.mj_step(m, d)
        if (k + 1) % stride == 0:
            q.append(d.qpos.copy())
            energy.append(d.energy.sum())
    return np.array(q), np.array(energy)


def _pusher():
    """Gymnasium's 7-axis pusher arm (from the package index) under gravity, without its puck."""
    gymnasium = pytest.importorskip("gymnasium", reason="the dev extra: pip install -e '.[dev]'")
    spec = mujoco.MjSpec.from_file(os.path.join(os.path.dirname(gymnasium.__file__),
                                                "envs/mujoco/assets/pusher_v5.xml"))
    for body in ("object", "goal"):
        spec.delete(spec.body(body))
    spec.option.gravity = [0.0, 0.0, -9.81]
    return like_conserve(spec)


def test_a_seven_axis_arm_follows_mujoco_rk4_and_conserves_energy_exactly():
    m = _pusher()
    qvel = np.array([0.5, -0.3, 0.8, 0.4, -0.6, 0.7, 1.0])  # rad/s
    system, messages = _import(m, qvel=qvel)
    assert messages == []  # contacts, limits and armature are switched off in the MuJoCo model
    assert not system.controllers  # its plain motors without controls exert no force: left out
    sol = cs.simulate(system, t_end=1.0, dt=2e-3, order=4)
    q_ref, _ = _mujoco_run(m, m.qpos0, qvel, 1.0, 1e-4, 2e-3)
    q = system.imported.qpos(sol)
    assert np.abs(q - q_ref).max() <= 1e-6
    assert abs(q - q_ref).max(0)[-1] > 0  # the wrist roll moved (qvel) and is compared
    # the joint dampers dissipate: the balance is exact, to round-off
    assert abs(sol.energy_balance_error).max() <= 1e-12 * sol.energy_scale


def test_every_joint_kind_with_actuators_and_springs_follows_mujoco():
    """The KINDS model driven by a control law, every joint combination's MuJoCo coordinates
    recovered by ``qpos``; without the loop and the dry friction, which MuJoCo makes soft
    (solref, solimp) where conserve's are exact."""
    tree = KINDS.split("<equality>")[0] + KINDS.split("</equality>")[1]
    tree = tree.replace('frictionloss="0.01"', "")

    def control(t, q, qdot):
        import jax.numpy as jnp
        return jnp.array([0.8 * jnp.sin(3.0 * t), 0.5])  # motor (clamped to ±1), servo target 0.5 rad

    rng = np.random.default_rng(5)
    m = like_conserve(tree)
    qvel = rng.normal(scale=0.5, size=m.nv)
    system, messages = _import(m, qvel=qvel, control=control)
    assert messages == []
    sol = cs.simulate(system, t_end=1.0, dt=2e-3, order=4)
    q_ref, _ = _mujoco_run(m, m.qpos0, qvel, 1.0, 1e-4, 2e-3,
                           ctrl=lambda t: np.array([0.8 * np.sin(3.0 * t), 0.5]))
    q = system.imported.qpos(sol)
    for j in range(m.njnt):  # quaternions up to sign
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] in (0, 1):
            k = a + (3 if m.jnt_type[j] == 0 else 0)
            flip = np.sign(np.sum(q[:, k:k + 4] * q_ref[:, k:k + 4], axis=1))
            q[:, k:k + 4] *= flip[:, None]
    assert not np.isnan(q).any()
    assert np.abs(q - q_ref).max() <= 1e-6, np.abs(q - q_ref).max(0)
    assert abs(sol.energy_balance_error).max() <= 1e-12 * sol.energy_scale


def test_urdf(tmp_path):
    """A two-link URDF arm: the same masses and freedoms as MuJoCo reads them."""
    link = """<link name="{n}"><inertial><origin xyz="0 0 -0.25"/><mass value="{m}"/>
      <inertia ixx="0.02" iyy="0.02" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>"""
    urdf = f"""<robot name="arm"><link name="base"/>{link.format(n="l1", m=1.5)}{link.format(n="l2", m=0.7)}
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
        <limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
      <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/><origin xyz="0 0 -0.5"/>
        <axis xyz="1 0 0"/></joint></robot>"""
    path = tmp_path / "arm.urdf"
    path.write_text(urdf)
    with pytest.warns(cs.ModelImportWarning, match="joint 'j1': limits"):
        system = cs.from_urdf(path)
    assert sorted(e.name for e in system.elements if isinstance(e, cs.RigidBody)) == ["l1", "l2"]
    assert sum(e.mass for e in system.elements if isinstance(e, cs.RigidBody)) == pytest.approx(2.2)
    assert system.assemble().layout.degrees_of_freedom == 2
