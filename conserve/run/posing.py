"""Initial conditions in joint coordinates: ``cs.set_joints(system, coordinates, rates)`` (an
Assembly, from numbers) and ``cs.pose(assembly, coordinates, rates)`` (a State, a pure jax
function of the values: joint angles as design variables under ``jax.grad`` and ``jax.vmap``).

The parts are built as usual (the *build configuration*: their given positions, orientations
and velocities, which the joints must admit); posing then moves the kinematic tree
(:mod:`conserve.model.tree`) to the given joint angles and slides and gives the joints the given
rates, so the state is consistent by construction:

* positions: the joints' minimal increments u (Cayley parameters 2 tan(Δθ/2) about the joint
  axis for an angle, the change of a slide) applied down the tree by
  :func:`conserve.backends.null_space.configure`, in equal pieces of less than a right angle (a
  joint may be turned by several turns); what is downstream of a joint moves with it. The tracked
  coordinates of springs and motors follow by their exact increments, so an angle set to
  7 rad is 7 rad, not 7 − 2π;
* velocities: the minimal velocities ν of the build configuration (ν = H⁺v, exact for a consistent
  state), the given joints' rates put in, and v = H(q) ν at the new configuration
  (:func:`conserve.backends.null_space.velocities`): joints not named keep their relative rates,
  free parts (the tree's roots) their velocities; hybrid rotors keep their spin rates relative to
  their masters;
* prescribed motions (:class:`conserve.JointDrive`): a driven coordinate is posed at its law's
  value law(t0) and rate law'(t0), so the state is the one a run from t0 needs; giving it
  another value is refused.

Values are what the joint's sensor reads (:meth:`conserve.Solution.joint`): ``angle`` in rad
(0 at the build configuration when the axis was given in world axes), ``slide`` in m, their
rates in rad/s and m/s. Joints of kinematic loops and other constraints outside the tree are
refused (the state would have to solve the loop's closure).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import null_space
from ..compilation.modes import jit_quick
from ..discrete.forces import coordinate_increments
from ..errors import InconsistentInitialState, ModelError
from ..model.assembled import Model, State
from ..model.parameters import bound
from ..model.system import Assembly, System, as_assembly, initial_gaps, refuse_gaps
from ..results.sensors import joint_view

#: joint coordinate -> its group of slots in the tree's link (rot_a, rot_b, slide)
_SLOTS = {"angle": 0, "slide": 2}
#: The largest turn of one piece of the posing (rad): Cayley parameters 2 tan(Δθ/2) stay small.
PIECE = 0.49 * np.pi
#: Pieces of a pose whose values are traced (their size is not known): angles up to
#: TRACED_PIECES × PIECE (≈ 1.96 turns) from the build configuration; farther, the
#: traced state is NaN (``pose(..., pieces=...)`` allows more).
TRACED_PIECES = 8


def set_joints(system, coordinates=None, rates=None, *, t0=0.0, project_velocities=False) -> Assembly:
    """An Assembly of ``system`` whose initial state has the given joint coordinates and rates.

    Parameters
    ----------
    system : System (assembled here, with ``project_velocities``) or Assembly
    coordinates : {joint name: value} for a joint with one coordinate (Revolute: angle in rad,
        Prismatic: slide in m), or {joint name: {"angle": rad, "slide": m}} (Cylindrical, or to
        be explicit); each value one number; an angle of more than two turns warns (likely meant
        in degrees)
    rates : the same for their rates (rad/s, m/s)
    t0 : s, the time the run starts: driven joints (:class:`conserve.JointDrive`) are posed at
        their law's value and rate there (a driven coordinate given another value is refused)
    project_velocities : for a System: assemble it with ``project_velocities=True`` (its given
        velocities projected onto the constraints first, :func:`conserve.model.system.projected_velocities`)

    Returns
    -------
    Assembly with the new initial state (checked against every constraint as at assembly, and
    the drives' at t0). For joint angles inside ``jax.grad`` or ``jax.vmap`` use :func:`conserve.pose`.
    """
    if isinstance(system, System):
        assembly = system.assemble(project_velocities=project_velocities)
    else:
        assembly = as_assembly(system, "set_joints")
        if project_velocities:
            raise ModelError("set_joints: project_velocities applies when a System is assembled; pass the System.")
    state = _pose(assembly, coordinates, rates, t0, None, "set_joints")
    return Assembly(assembly.model, assembly.layout, state)


def pose(assembly, coordinates=None, rates=None, *, t0=0.0, pieces=None) -> State:
    """The initial State of ``assembly`` with the given joint coordinates and rates: a pure jax
    function of the values, for ``jax.grad``, ``jax.jacfwd``, ``jax.vmap`` and ``jax.jit``, whose
    result :func:`conserve.step` and :func:`conserve.trajectory` take::

        def tip_height(angles):                 # initial joint angles as design variables
            state = cs.pose(assembly, {"shoulder": angles[0], "elbow": angles[1]})
            return cs.trajectory(assembly.model, state, 0.0, 1e-3, 200)[0].q[-1, 2]
        jax.grad(tip_height)(jnp.array([0.3, -0.2]))

    Parameters
    ----------
    assembly : an Assembly (``system.assemble()``) or a System (assembled here, once per call:
        assemble outside the traced function)
    coordinates, rates : as in :func:`conserve.set_joints` (joint names static; values scalars, numbers
        or traced)
    t0 : s (may be traced): driven joints are posed at law(t0), law'(t0)
    pieces : the number of equal pieces the joints are turned in (static); default: enough for
        pieces below a right angle when the values are numbers, ``conserve.run.posing.TRACED_PIECES`` when they
        are traced (``TRACED_PIECES``: angles up to ≈ 1.96 turns from the build configuration;
        beyond ≈ 3.6 turns the state is NaN)

    Returns
    -------
    State : q, v on every constraint (by construction), s the tracked joint coordinates (an angle
    set to 7 rad is 7 rad), p the rotors' momenta for their relative spin rates, θ as built.
    With numbers the state is checked as :func:`conserve.set_joints` checks it; with traced values it is not
    (their derivatives are those of the exact map from joint coordinates to director
    coordinates).
    """
    assembly = as_assembly(assembly, "pose")
    if pieces is not None and not (isinstance(pieces, int) and not isinstance(pieces, bool) and pieces >= 1):
        raise ModelError(f"pose: pieces must be an integer ≥ 1, got {pieces!r}.")
    return _pose(assembly, coordinates, rates, t0, pieces, "pose")


def _traced(x):
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def _close(x, target):
    """Two numbers equal to the posing's accuracy (1e-9 relative to 1 + |target|)."""
    return abs(float(x) - float(target)) <= 1e-9 * (1.0 + abs(float(target)))


def _pose(assembly, coordinates, rates, t0, pieces, who) -> State:
    """The posed State (see :func:`conserve.pose`); ``who`` names the caller in messages."""
    for name, given in (("coordinates", coordinates), ("rates", rates)):
        if given is not None and not isinstance(given, Mapping):
            raise ModelError(f"{who}: {name} must be a dict {{joint name: value}}, got {given!r}.")
    model, layout, state = assembly.model, assembly.layout, assembly.initial_state
    positions = _by_slot(model, layout, coordinates or {}, "coordinate", who)
    speeds = _by_slot(model, layout, rates or {}, "rate", who)
    for slot, (kind, joint, drive) in _driven(model, layout).items():  # posed at law(t0), law'(t0)
        with bound(model.parameters), jax.ensure_compile_time_eval():  # numbers for a t0 given as a number
            value, rate = jax.jvp(drive._step_law, (jnp.asarray(t0, jnp.float64),), (jnp.ones((), jnp.float64),))
        for given, target, suffix in ((positions, value, ""), (speeds, rate, "_rate")):
            if slot in given:
                x = given[slot][1]
                if _traced((x, target)) or not _close(x, target):
                    shown = "a traced value" if _traced(x) else f"{float(x):.12g}"
                    at = "law(t0)" if _traced(target) else f"{float(target):.12g}"
                    raise ModelError(f"{who}: joint '{joint}' {kind}{suffix.replace('_', ' ')} is prescribed by the "
                                     f"drive '{drive.name}' ({at} at t0 = {t0}, asked {shown}); leave it out (it is "
                                     "posed at the law's value and rate at t0) or give t0= the run's start.")
            built = _read(layout, state, {slot: (kind, None, joint)}, suffix)[slot]
            if _traced(target) or not _close(built, target):  # already there: nothing to move (a loop may stay)
                given[slot] = (kind, target, joint)
    _refuse_closures(model, layout, bool(positions or speeds), who)
    if not _traced((coordinates, rates)):
        for kind, target, name in positions.values():  # 90 meant as 90°: a start 14 turns away, silently
            if kind == "angle" and not _traced(target) and abs(float(target)) > 4.0 * np.pi:
                warnings.warn(f"{who}: joint '{name}' angle {float(target):g} rad is more than two turns "
                              f"({float(target) / 2 / np.pi:.3g} turns); angles are in radians "
                              f"(np.radians({float(target):g}) for {float(target):g}°).", UserWarning, stacklevel=3)
    tree = model.tree
    with jax.ensure_compile_time_eval():  # of the build configuration: numbers, also inside jit
        H0 = np.asarray(_null_space(tree, model.blocks(state.q)))
    nu0 = np.linalg.lstsq(H0, np.asarray(state.v), rcond=None)[0]
    # positions: the increments from the build configuration's values, in equal pieces
    current = _read(layout, state, positions)
    slots = np.array(sorted(positions), dtype=np.int64)
    angles = np.zeros(tree.n_dof, bool)
    angles[[s for s, (kind, _, _) in positions.items() if kind == "angle"]] = True
    du = jnp.zeros(tree.n_dof)
    if slots.size:
        du = du.at[slots].set(jnp.stack([jnp.asarray(positions[s][1], jnp.float64) - current[s] for s in slots]))
    if pieces is None:
        if _traced(du):
            pieces = TRACED_PIECES
        else:
            pieces = max([1] + [math.ceil(abs(float(du[s])) / PIECE) for s in np.flatnonzero(angles)])
    elif not _traced(du) and np.any(np.abs(np.asarray(du)[angles]) >= 0.9 * np.pi * pieces):
        raise ModelError(f"{who}: {pieces} pieces turn a joint by π or more each; give more pieces (at least "
                         f"{math.ceil(np.max(np.abs(np.asarray(du)[angles])) / PIECE)}) or pieces=None.")
    u = du / pieces
    turn = jnp.where(jnp.abs(u) < 0.9 * np.pi, u, jnp.nan)  # a piece near π: tan explodes (traced values only)
    u = jnp.where(angles, 2.0 * jnp.tan(jnp.where(angles, turn, 0.0) / 2.0), u)
    q, s = _moved(model, state.q, state.s, u, pieces)
    # velocities: the build configuration's minimal velocities with the given rates put in
    nu = jnp.asarray(nu0)
    rate_slots = np.array(sorted(speeds), dtype=np.int64)
    if rate_slots.size:
        nu = nu.at[rate_slots].set(jnp.stack([jnp.asarray(speeds[r][1], jnp.float64) for r in rate_slots]))
    new, spin = _posed(model, state, q, s, nu)
    if not _traced((new, t0)):
        _check(model, layout, new, spin, positions, speeds, float(t0), who)
    return new


_null_space = jit_quick(null_space.null_space, mode="unoptimized")


@jit_quick(mode="unoptimized", static_argnames="pieces")
def _moved(model: Model, q, s, u, pieces):
    """(q, s) moved by the tree's minimal increments u, ``pieces`` times: q_{k+1} = F(q_k, u), s by
    its exact increments."""
    def piece(_, qs):
        q0, s0 = qs
        q1 = null_space.configure(model.tree, model.blocks(q0), u)
        return q1, s0 + coordinate_increments(model, q0, q1)

    return jax.lax.fori_loop(0, pieces, piece, (q, s))


@jit_quick(mode="unoptimized")
def _posed(model: Model, state: State, q, s, nu):
    """(the state at the posed q, s with minimal velocities ν, the rotors' spin rates relative to
    their masters as in ``state``)."""
    v = null_space.velocities(model.tree, model.blocks(q), nu)
    spin = model.rotor_relative_rates(state.q, state.v, state.p)
    return state._replace(q=q, v=v, s=s, p=model.rotor_momenta(q, v, spin), q_low=jnp.zeros_like(q)), spin


def _slot_offsets(tree):
    """(first slot of every link, {joint name: (link index, link)}) of the tree's joint links."""
    offsets = np.cumsum([0] + [link.n_dof for link in tree.links])
    return offsets, {link.name: (k, link) for k, link in enumerate(tree.links) if link.kind == "joint"}


def _driven(model: Model, layout):
    """{tree slot: (coordinate kind, joint name, JointDrive)} of the prescribed motions on tree joints."""
    offsets, links = _slot_offsets(model.tree)
    out = {}
    for drive in layout.drives.values():
        k, link = links.get(drive.joint.name, (None, None))
        if link is not None:
            out[int(offsets[k] + sum(link.dof[:_SLOTS[drive.coordinate]]))] = (drive.coordinate, drive.joint.name,
                                                                               drive)
    return out


def _refuse_closures(model: Model, layout, posing, who):
    """Refuse posing a system with constraints outside its tree (loops, ropes, user constraints):
    the posed state would have to solve them. The rows of drives on tree joints are satisfied by
    posing (their coordinate is set to the law)."""
    tree = model.tree
    if not posing or not (tree.loop_rows or tree.cut_rows):
        return
    tree_joints = {link.name for link in tree.links if link.kind == "joint"}
    posed = {name for name, drive in layout.drives.items() if drive.joint.name in tree_joints}
    closing = sorted({layout.constraint_rows[model.constraint_keep[i]][0] for i in tree.closure_rows} - posed)
    if closing:
        raise ModelError(f"{who}: the system has constraints outside its kinematic tree ({', '.join(closing)}: "
                         "kinematic loops, ropes or other constraints); joint coordinates are set for trees only. "
                         "Give the parts' positions and velocities instead.")


def _by_slot(model: Model, layout, given, what, who):
    """{tree slot: (coordinate kind, value, joint name)} of the given joint coordinates or rates
    (values as given: numbers or traced scalars)."""
    offsets, links = _slot_offsets(model.tree)
    out = {}
    for name, value in given.items():
        record = layout.joints.get(name)
        if record is None:
            raise ModelError(f"{who}: no joint named {name!r}; joints: {sorted(layout.joints)}.")
        kinds = [k for k in _SLOTS if k in record]
        if not kinds:
            raise ModelError(f"{who}: joint '{name}' ({record['kind']}) has no angle or slide to set; joint "
                             "coordinates are the angles and slides of Revolute, Prismatic and Cylindrical joints.")
        if not isinstance(value, Mapping):
            if len(kinds) > 1:
                raise ModelError(f"{who}: joint '{name}' ({record['kind']}) has {' and '.join(kinds)}; give "
                                 f"its {what}s as {{{', '.join(repr(k) + ': …' for k in kinds)}}}.")
            value = {kinds[0]: value}
        k, link = links.get(name, (None, None))
        if link is None:
            raise ModelError(f"{who}: joint '{name}' is not a joint of the kinematic tree.")
        for kind, x in value.items():
            if kind not in kinds:
                raise ModelError(f"{who}: joint '{name}' ({record['kind']}) has no {kind}; it has "
                                 f"{' and '.join(kinds)}.")
            unit = ("rad" if kind == "angle" else "m") + ("/s" if what == "rate" else "")
            x = _scalar(x, f"{who}: the {kind} {what} of joint '{name}'", unit, who)
            group = _SLOTS[kind]
            out[int(offsets[k] + sum(link.dof[:group]))] = (kind, x, name)
    return out


def _scalar(x, what, unit, who):
    """x as one float (a number) or a traced scalar, else a ModelError saying what fits."""
    if _traced(x):
        if who == "set_joints":
            raise ModelError(f"{what} is traced by jax (set_joints inside jax.grad, jit or vmap); set_joints builds an "
                             "Assembly from numbers: for traced joint coordinates use cs.pose(assembly, coordinates, "
                             "rates), a pure function returning the State for cs.step and cs.trajectory.")
        if jnp.shape(x) != ():
            raise ModelError(f"{what} must be one number ({unit}), got a traced array of shape {jnp.shape(x)}; give "
                             "each joint its own entry.")
        return x
    try:
        array = None if isinstance(x, (str, bytes, bool, np.bool_)) else np.asarray(x)
    except (TypeError, ValueError):
        array = None
    if array is None or array.shape != () or not np.isrealobj(array) or not np.issubdtype(array.dtype, np.number):
        shape = f" (shape {array.shape})" if array is not None and array.shape != () else ""
        raise ModelError(f"{what} must be one number ({unit}), got {x!r}{shape}; give each joint its own entry, "
                         "e.g. {'shoulder': 0.1, 'elbow': 0.2}, and a Cylindrical's two coordinates as "
                         "{'angle': …, 'slide': …}.")
    value = float(array)
    if not math.isfinite(value):
        raise ModelError(f"{what} must be finite, got {value}.")
    return value


class _Node:
    """One state as the single node of what a joint's sensor reads (:func:`conserve.results.sensors.joint_view`)."""

    def __init__(self, state):
        self.q, self.v = np.asarray(state.q)[None], np.asarray(state.v)[None]


def _read(layout, state, slots, suffix=""):
    """{slot: the joint's value of its coordinate (``suffix`` "_rate": its rate)} at a state
    (numbers: evaluated at once, also while a caller is traced)."""
    with jax.ensure_compile_time_eval():
        return {slot: getattr(joint_view(name, layout.joints[name], _Node(state)), kind + suffix)[0]
                for slot, (kind, _, name) in slots.items()}


def _check(model, layout, state, spin, positions, speeds, t0, who):
    """The posed state on every constraint, the drives' at t0 included (refused as at assembly),
    and at its targets."""
    refuse_gaps(layout, *(np.asarray(a) for a in initial_gaps(model, state, spin, t0)[:4]), t0)
    reached, rate_reached = _read(layout, state, positions), _read(layout, state, speeds, "_rate")
    miss = lambda kind, d: abs(np.angle(np.exp(1j * d)) if kind == "angle" else d)  # the sensor reads angles mod 2π  # noqa: E731
    off = [f"{name} {kind} {reached[s]:.12g} (asked {float(x):.12g})" for s, (kind, x, name) in positions.items()
           if not miss(kind, reached[s] - float(x)) <= 1e-9 * (1 + abs(float(x)))]
    off += [f"{name} {kind} rate {rate_reached[s]:.12g} (asked {float(x):.12g})"
            for s, (kind, x, name) in speeds.items() if not abs(rate_reached[s] - float(x)) <= 1e-9 * (1 + abs(float(x)))]
    if off:
        raise InconsistentInitialState(f"{who}: the posed state misses its targets ({'; '.join(off)}); "
                                       "please report this model.")
