"""Initial conditions in joint coordinates: ``cs.set_joints(system, coordinates, rates)``.

The parts are built as usual (the *build configuration*: their given positions, orientations
and velocities, which the joints must admit); ``set_joints`` then moves the kinematic tree
(:mod:`conserve.model.tree`) to the given joint angles and slides and gives the joints the given
rates, and returns an Assembly whose initial state is consistent by construction:

* positions: the joints' minimal increments u (Cayley parameters 2 tan(Δθ/2) about the joint
  axis for an angle, the change of a slide) applied down the tree by
  :func:`conserve.backends.null_space.configure`, in pieces of less than a right angle (a joint
  may be turned by several turns); what is downstream of a joint moves with it. The tracked
  coordinates of springs and motors follow by their exact increments, so an angle set to
  7 rad is 7 rad, not 7 − 2π;
* velocities: the minimal velocities ν of the build configuration (ν = H⁺v, exact for a consistent
  state), the given joints' rates put in, and v = H(q) ν at the new configuration
  (:func:`conserve.backends.null_space.velocities`): joints not named keep their relative rates,
  free parts (the tree's roots) their velocities; hybrid rotors keep their spin rates relative to
  their masters.

Values are what the joint's sensor reads (:meth:`conserve.Solution.joint`): ``angle`` in rad
(0 at the build configuration when the axis was given in world axes), ``slide`` in m, their
rates in rad/s and m/s. Joints of kinematic loops and other constraints outside the tree are
refused (the state would have to solve the loop's closure).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from .backends import null_space
from .compilation import jit_quick
from .discrete.forces import coordinate_increments
from .errors import InconsistentInitialState, ModelError
from .model.assembled import Model, State
from .model.system import Assembly, System, as_assembly, initial_gaps, refuse_gaps
from .sensors import joint_view

#: joint coordinate -> its group of slots in the tree's link (rot_a, rot_b, slide)
_SLOTS = {"angle": 0, "slide": 2}


def set_joints(system, coordinates=None, rates=None, *, project_velocities=False) -> Assembly:
    """An Assembly of ``system`` whose initial state has the given joint coordinates and rates.

    Parameters
    ----------
    system : System (assembled here, with ``project_velocities``) or Assembly
    coordinates : {joint name: value} for a joint with one coordinate (Revolute: angle in rad,
        Prismatic: slide in m), or {joint name: {"angle": rad, "slide": m}} (Cylindrical, or to
        be explicit); an angle of more than two turns warns (likely meant in degrees)
    rates : the same for their rates (rad/s, m/s)
    project_velocities : for a System: assemble it with ``project_velocities=True`` (its given
        velocities projected onto the constraints first, :func:`conserve.model.system.projected_velocities`)

    Returns
    -------
    Assembly with the new initial state (checked against every constraint as at assembly).
    """
    for name, given in (("coordinates", coordinates), ("rates", rates)):
        if given is not None and not isinstance(given, Mapping):
            raise ModelError(f"set_joints: {name} must be a dict {{joint name: value}}, got {given!r}.")
    if isinstance(system, System):
        assembly = system.assemble(project_velocities=project_velocities)
    else:
        assembly = as_assembly(system, "set_joints")
        if project_velocities:
            raise ModelError("set_joints: project_velocities applies when a System is assembled; pass the System.")
    model, layout, state = assembly.model, assembly.layout, assembly.initial_state
    positions = _by_slot(model, layout, coordinates or {}, "coordinate")
    speeds = _by_slot(model, layout, rates or {}, "rate")
    tree = model.tree
    H0 = np.asarray(_null_space(tree, model.blocks(state.q)))
    nu = np.linalg.lstsq(H0, np.asarray(state.v), rcond=None)[0]
    # positions: the increments from the build configuration's values, in pieces below a right angle
    current = _read(layout, state, positions)
    du = np.zeros(tree.n_dof)
    for slot, (_, target, _) in positions.items():
        du[slot] = target - current[slot]
    angle_slots = [s for s, (kind, _, _) in positions.items() if kind == "angle"]
    for kind, target, name in positions.values():  # 90 meant as 90°: a start 14 turns away, silently
        if kind == "angle" and abs(target) > 4.0 * np.pi:
            warnings.warn(f"set_joints: joint '{name}' angle {target:g} rad is more than two turns "
                          f"({target / 2 / np.pi:.3g} turns); angles are in radians (np.radians({target:g}) for "
                          f"{target:g}°).", UserWarning, stacklevel=2)
    pieces = max([1] + [math.ceil(abs(du[s]) / (0.49 * np.pi)) for s in angle_slots])
    u = du / pieces
    u[angle_slots] = 2.0 * np.tan(u[angle_slots] / 2.0)
    q, s = state.q, state.s
    for _ in range(pieces):
        q, s = _moved(model, q, s, u)
    # velocities: the build configuration's minimal velocities with the given rates put in
    for slot, (_, value, _) in speeds.items():
        nu[slot] = value
    new, spin = _posed(model, state, q, s, nu)
    _check(model, layout, new, spin, positions, speeds)
    return Assembly(model, layout, new)


_null_space = jit_quick(null_space.null_space, mode="unoptimized")


@jit_quick(mode="unoptimized")
def _moved(model: Model, q, s, u):
    """(q, s) moved by the tree's minimal increments u: q_{n+1} = F(q, u), s by its exact increments."""
    q1 = null_space.configure(model.tree, model.blocks(q), u)
    return q1, s + coordinate_increments(model, q, q1)


@jit_quick(mode="unoptimized")
def _posed(model: Model, state: State, q, s, nu):
    """(the state at the posed q, s with minimal velocities ν, the rotors' spin rates relative to
    their masters as in ``state``)."""
    v = null_space.velocities(model.tree, model.blocks(q), nu)
    spin = model.rotor_relative_rates(state.q, state.v, state.p)
    return state._replace(q=q, v=v, s=s, p=model.rotor_momenta(q, v, spin), q_low=jnp.zeros_like(q)), spin


def _by_slot(model: Model, layout, given, what):
    """{tree slot: (coordinate kind, value, joint name)} of the given joint coordinates or rates."""
    tree = model.tree
    if given and (tree.loop_rows or tree.cut_rows):
        closing = sorted({layout.constraint_rows[model.constraint_keep[i]][0] for i in tree.closure_rows})
        raise ModelError(f"set_joints: the system has constraints outside its kinematic tree ({', '.join(closing)}: "
                         "kinematic loops, ropes or other constraints); joint coordinates are set for trees only. "
                         "Give the parts' positions and velocities instead.")
    offsets = np.cumsum([0] + [link.n_dof for link in tree.links])
    links = {link.name: (k, link) for k, link in enumerate(tree.links) if link.kind == "joint"}
    out = {}
    for name, value in given.items():
        record = layout.joints.get(name)
        if record is None:
            raise ModelError(f"set_joints: no joint named {name!r}; joints: {sorted(layout.joints)}.")
        kinds = [k for k in _SLOTS if k in record]
        if not kinds:
            raise ModelError(f"set_joints: joint '{name}' ({record['kind']}) has no angle or slide to set; joint "
                             "coordinates are the angles and slides of Revolute, Prismatic and Cylindrical joints.")
        if not isinstance(value, dict):
            if len(kinds) > 1:
                raise ModelError(f"set_joints: joint '{name}' ({record['kind']}) has {' and '.join(kinds)}; give "
                                 f"its {what}s as {{{', '.join(repr(k) + ': …' for k in kinds)}}}.")
            value = {kinds[0]: value}
        k, link = links.get(name, (None, None))
        if link is None:
            raise ModelError(f"set_joints: joint '{name}' is not a joint of the kinematic tree.")
        for kind, x in value.items():
            if kind not in kinds:
                raise ModelError(f"set_joints: joint '{name}' ({record['kind']}) has no {kind}; it has "
                                 f"{' and '.join(kinds)}.")
            x = float(x)
            if not math.isfinite(x):
                raise ModelError(f"set_joints: the {kind} {what} of joint '{name}' must be finite, got {x}.")
            group = _SLOTS[kind]
            out[int(offsets[k] + sum(link.dof[:group]))] = (kind, x, name)
    return out


class _Node:
    """One state as the single node of what a joint's sensor reads (:func:`conserve.sensors.joint_view`)."""

    def __init__(self, state):
        self.q, self.v = np.asarray(state.q)[None], np.asarray(state.v)[None]


def _read(layout, state, slots, suffix=""):
    """{slot: the joint's value of its coordinate (``suffix`` "_rate": its rate)} at a state."""
    return {slot: getattr(joint_view(name, layout.joints[name], _Node(state)), kind + suffix)[0]
            for slot, (kind, _, name) in slots.items()}


def _check(model, layout, state, spin, positions, speeds):
    """The posed state on every constraint (refused as at assembly) and at its targets."""
    refuse_gaps(layout, *(np.asarray(a) for a in initial_gaps(model, state, spin)[:4]))
    reached, rate_reached = _read(layout, state, positions), _read(layout, state, speeds, "_rate")
    miss = lambda kind, d: abs(np.angle(np.exp(1j * d)) if kind == "angle" else d)  # the sensor reads angles mod 2π  # noqa: E731
    off = [f"{name} {kind} {reached[s]:.12g} (asked {x:.12g})" for s, (kind, x, name) in positions.items()
           if not miss(kind, reached[s] - x) <= 1e-9 * (1 + abs(x))]
    off += [f"{name} {kind} rate {rate_reached[s]:.12g} (asked {x:.12g})" for s, (kind, x, name) in speeds.items()
            if not abs(rate_reached[s] - x) <= 1e-9 * (1 + abs(x))]
    if off:
        raise InconsistentInitialState(f"set_joints: the posed state misses its targets ({'; '.join(off)}); "
                                       "please report this model.")
