"""Solution: the trajectory, Newton statistics and conservation diagnostics as numpy arrays.

A Solution needs no model to be read back: it stores the coordinate layout of its parts, so
``sol["top"].rotation`` works on a loaded file too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..backends.base import map_steps
from ..compilation.modes import jit_quick
from ..kinematics.rotations import angular_velocity, rotation_to_quaternion
from ..model.assembled import Energy, Model, State
from ..model.beams import rod_strains
from ..model.parameters import bound
from ..model.system import as_assembly
from . import export
from .dense import Interpolant, check_degree, evaluation_times
from .sensors import Frames, JointView, PointHistory, joint_view, point_history, unwrapped


#: the keys of :func:`node_diagnostics` (what a model computes at a node; :meth:`Solution.evaluate`
#: recomputes them at its times)
NODE_DIAGNOSTICS = ("kinetic_energy", "angular_momentum_scale", "linear_momentum_scale", "potential_energy",
                    "linear_momentum", "angular_momentum", "constraint_residual", "rotor_rate")


def node_diagnostics(model: Model, state: State, t=0.0):
    """Energies (J), linear momentum (kg m/s), angular momentum about the origin (kg m²/s), the
    size of the terms of both (``Model.momentum_scales``) and the max-norm residual of *all*
    constraint rows (dropped redundant ones included) at one node at time t (s; prescribed motions
    read it; user laws that read :class:`~conserve.model.parameters.Parameter` s see the model's
    values)."""
    with bound(model.parameters):
        g = model.all_constraints(state.q, state.theta, state.s, t=t)
        potential = model.potential_energy(state.q, state.s)
    J_scale, L_scale = model.momentum_scales(state.q, state.v, state.p)
    return {"kinetic_energy": model.kinetic_energy(state.v, state.p),
            "angular_momentum_scale": J_scale, "linear_momentum_scale": L_scale,
            "potential_energy": potential,
            "linear_momentum": model.linear_momentum(state.v),
            "angular_momentum": model.angular_momentum(state.q, state.v, state.p),
            "constraint_residual": jnp.max(jnp.abs(g)) if g.size else jnp.zeros((), state.q.dtype),
            "rotor_rate": model.rotor_relative_rates(state.q, state.v, state.p)}


def nodes_diagnostics(model: Model, nodes: State, t):
    """:func:`node_diagnostics` of nodes stacked along a leading axis k at their times t (k,)."""
    return jax.vmap(node_diagnostics, in_axes=(None, 0, 0))(model, nodes, t)


#: How :func:`diagnostics` evaluates nodes, by the code generation of the run that made them: in
#: blocks of one of a few lengths (the shortest that holds them all, else the longest), by XLA
#: code. Runs compiled "unoptimized" (short ones) take short blocks of unoptimized code, whose
#: compilation is cheapest and which pad a run's first node and a short run little; runs compiled
#: for speed take a chunk's worth (:data:`conserve.run.chunks.CHUNK`) of quick code, several times
#: cheaper per node for a little more compilation once per model structure, and their first node
#: and short runs a block of 16, which they do not pad to a chunk (measurements:
#: benchmarks/results/defaults.md, section ``DIAGNOSTIC_BLOCKS``).
DIAGNOSTIC_BLOCKS = {"unoptimized": ((128,), jit_quick(nodes_diagnostics, mode="unoptimized")),
                     "fast": ((16, 1024), jit_quick(nodes_diagnostics, mode="quick"))}


def diagnostics(model: Model, nodes: State, t, mode="unoptimized") -> dict:
    """:func:`node_diagnostics` of many nodes (States stacked along a leading axis of k, at times t
    (k,) in s), as numpy arrays with leading axis k: evaluated after the time loop, vectorised over
    the nodes in blocks (one compilation per model structure), so the compiled step does not carry
    them. ``mode``: the code generation of the run that made the nodes ("unoptimized", "quick" or
    "optimized"; ``DIAGNOSTIC_BLOCKS``)."""
    blocks, fn = DIAGNOSTIC_BLOCKS["unoptimized" if mode == "unoptimized" else "fast"]
    t = np.asarray(t, np.float64)
    block = next((b for b in blocks if b >= len(t)), blocks[-1])
    return map_steps(partial(fn, model), nodes, t, block=block)


def layout_record(layout):
    """The plain-data part of a Layout that a Solution keeps (and saves)."""
    return {"parts": layout.describe(), "constraint_rows": [list(r) for r in layout.constraint_rows],
            "dropped_rows": list(layout.dropped_rows), "coordinate_names": list(layout.coordinate_names),
            "work_names": list(layout.work_names), "dissipation_names": list(layout.dissipation_names),
            "rotors": [r.name for r in layout.rotors],
            "body_rotors": {r.name: (r.master.name, r.axis.tolist()) for r in layout.body_rotors},
            "body_rotor_axial_inertia": {r.name: r.axial_inertia for r in layout.body_rotors},
            "degrees_of_freedom": layout.degrees_of_freedom, "sketch": layout.sketch, "joints": layout.joints,
            "beams": layout.beams}


class PartView:
    """Time histories of one part, computed from the director coordinates; arrays over the N + 1
    nodes:

    position : (N+1, 3) centre of mass in m;  velocity : (N+1, 3) in m/s
    rotation : (N+1, 3, 3) R = [d1 d2 d3];  quaternion : (N+1, 4) (w, x, y, z), sign continuous
    angular_velocity : (N+1, 3) inertial, rad/s;  angular_velocity_body : (N+1, 3) = Rᵀ ω
    point(X) : a body point's position, velocity and acceleration (:mod:`conserve.results.sensors`)
    euler(sequence, degrees) : Euler angles (N+1, 3)
    """

    def __init__(self, name, kind, q, v, t=None):
        self.name, self.kind = name, kind
        self.position, self.velocity = q[:, 0], v[:, 0]
        self._d, self._d_rate = q[:, 1:], v[:, 1:]
        self._t = t

    @property
    def rigid(self):
        """True for a rigid body (it has an orientation), False for a point mass."""
        return self._d.shape[1] == 3

    def _rigid(self):
        if not self.rigid:
            raise AttributeError(f"part '{self.name}' is a {self.kind}: it has no orientation.")

    @property
    def rotation(self):
        """(N+1, 3, 3) R = [d1 d2 d3]: the body axes in inertial axes."""
        self._rigid()
        return np.swapaxes(self._d, 1, 2)

    @property
    def quaternion(self):
        """(N+1, 4) unit quaternions (w, x, y, z), w ≥ 0 at the first node and the sign then kept
        continuous in time (q and −q are the same rotation)."""
        q = rotation_to_quaternion(self.rotation)
        flips = np.sum(q[1:] * q[:-1], axis=1) < 0
        return q * np.concatenate([[1.0], np.cumprod(np.where(flips, -1.0, 1.0))])[:, None]

    @property
    def angular_velocity(self):
        """(N+1, 3) ω = ½ Σ d_i × ḋ_i in inertial axes, rad/s."""
        self._rigid()
        return np.asarray(angular_velocity(self._d, self._d_rate))

    @property
    def angular_velocity_body(self):
        """(N+1, 3) Rᵀ ω in body axes, rad/s."""
        return np.einsum("nji,nj->ni", self.rotation, self.angular_velocity)

    def euler(self, sequence="ZYX", degrees=False):
        """(N+1, 3) Euler angles of the part's rotation in ``sequence`` (scipy's convention: upper
        case intrinsic, lower case extrinsic), in rad or, with ``degrees=True``, degrees."""
        from scipy.spatial.transform import Rotation  # imported here: scipy.spatial costs 0.2 s

        return Rotation.from_matrix(self.rotation).as_euler(sequence, degrees=degrees)

    def point(self, X=(0.0, 0.0, 0.0)) -> PointHistory:
        """The body point X (3,) (m, in the part's body axes; a point mass: its only point, 0):
        position x = φ + X_i d_i, velocity and acceleration (central differences), (N+1, 3) each."""
        X = np.asarray(X, float)
        if X.shape != (3,):
            raise ValueError(f"part '{self.name}': point(X) takes one body point X of 3 coordinates (m), got shape "
                             f"{X.shape}.")
        if not self.rigid:
            if np.any(X != 0):
                raise ValueError(f"part '{self.name}' is a {self.kind}: its only point is (0, 0, 0), got {X.tolist()}.")
            D = np.broadcast_to(np.eye(3), (len(self.position), 3, 3))
            return point_history(self._t, Frames(self.position, D, self.velocity, np.zeros_like(D)), X)
        return point_history(self._t, Frames(self.position, self._d, self.velocity, self._d_rate), X)


class BeamView:
    """Time histories of one beam (:class:`~conserve.Beam`) over the Solution's T nodes:

    centreline : (T, N+1, 3) the nodes' positions in m;  velocity : (T, N+1, 3) in m/s
    rotation : (T, N+1, 3, 3) the nodes' frames [d1 d2 d3] (d3 normal to the section)
    strains : (T, N, 6) each element's strains (:data:`~conserve.model.beams.STRAINS`)
    resultants : (T, N, 6) stress resultants C (ε − ε⁰), section axes (:data:`~conserve.model.beams.RESULTANTS`)
    nodes : the nodes' :class:`PartView` s
    """

    def __init__(self, name, record, nodes):
        self.name, self.nodes = name, nodes
        self._lengths, self._C = np.asarray(record["lengths"]), np.asarray(record["stiffness"])
        self._reference = np.asarray(record["reference"])

    @property
    def centreline(self):
        return np.stack([n.position for n in self.nodes], axis=1)

    @property
    def velocity(self):
        return np.stack([n.velocity for n in self.nodes], axis=1)

    @property
    def rotation(self):
        return np.stack([n.rotation for n in self.nodes], axis=1)

    @property
    def strains(self):
        x, d = self.centreline, np.swapaxes(self.rotation, -1, -2)
        return np.asarray(rod_strains(x[:, :-1], d[:, :-1], x[:, 1:], d[:, 1:], self._lengths))

    @property
    def resultants(self):
        return self._C * (self.strains - self._reference)


class ControllerView(NamedTuple):
    """The samples of one controller (:class:`conserve.Controller`) in a run, K of them: their
    times ``t`` (K,) in s, the ``commands`` (K, n_u) each sample set (held until the next), the
    leaves of the law's ``state`` after each ([(K, …)]) and the ``readings`` each used ({sensor
    name: (K, …)}, noise and delay included). Read from the carry at the nodes, so a step that
    took several samples (a sample period shorter than the step) reports its last one."""

    t: np.ndarray
    commands: np.ndarray
    state: list
    readings: dict


class RotorView(NamedTuple):
    """Histories of one rotor (N+1,): spin ``angle`` and ``rate`` relative to its master (rad,
    rad/s) and axial angular ``momentum`` J_a (ω·a) (kg m²/s)."""

    angle: np.ndarray
    rate: np.ndarray
    momentum: np.ndarray


@dataclass
class Solution:
    """Result of :func:`conserve.simulate`.

    Attributes
    ----------
    t : (N+1,) s
    q, v : (N+1, n_q) coordinates and velocities (director layout, see ``parts``)
    s : (N+1, n_s) joint coordinates of spring-damper-motor elements (``coordinates``)
    p, theta : (N+1, n_r) axial angular momenta (kg m²/s) and spin angles (rad) of hybrid rotors
    multipliers : (N, n_rows) Lagrange multipliers λ_{n+½} of each step (N for a spherical joint:
        the force on its second part; 0 for dropped redundant rows), rows named by ``constraint_rows``;
        those a backend eliminated (the reduced one's tree rows) are recovered from the nodes on
        first access (:meth:`deferred`), so a run whose multipliers nobody reads does not pay for them
    newton_iterations : (N,) iterations per step
    work : (N, n_w) discrete work of each motor and applied load per step, J
    dissipation : (N, n_s) energy removed by each joint damper per step, J (≥ 0)
    substeps : (N,) sub-steps each step took (1; 2^k after a recovery, ``on_failure="subdivide"``)
    layout : parts, constraint rows (and dropped ones), coordinate and work names, degrees of freedom
    diagnostics : energies, momenta, constraint residual per node (see properties)
    stats : backend, steps, compile (the code generation, :mod:`conserve.compilation`; None for a
        reference integrator) and unknown_steps (the run's measure for compile="auto"; None for
        adaptive steps), compile_time (s), run_time (s, after compilation), time_per_step (s),
        unknowns, newton_matrix (the Newton matrix's linear algebra: "dense", "coloured", "tree" or
        "bordered tree", :mod:`conserve.discrete.linear`; step backends only); with adaptive steps also attempts,
        accepted_steps, rejected_steps, error_estimate, rtol, atol (each rejected attempt in
        ``rejected_attempts``)
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    s: np.ndarray
    p: np.ndarray
    theta: np.ndarray
    multipliers: np.ndarray
    newton_iterations: np.ndarray
    work: np.ndarray
    dissipation: np.ndarray
    substeps: np.ndarray
    layout: dict
    diagnostics: dict
    stats: dict = field(default_factory=dict)
    #: the Assembly that made this Solution (in memory only; not saved), for :attr:`symmetries`
    assembly: object = field(default=None, repr=False, compare=False)
    #: of an adaptive run (:mod:`conserve.run.adaptive`): (k, 3) time t (s), size h (s) and error estimate
    #: (weighted RMS, > 1; inf for a failed Newton solve) of each rejected attempt; None otherwise
    #: (in memory only; not saved: ``stats["rejected_steps"]`` counts them)
    rejected_attempts: np.ndarray = field(default=None, repr=False, compare=False)

    def __len__(self):
        return self.t.shape[0]

    @classmethod
    def deferred(cls, multipliers, **fields) -> Solution:
        """A Solution whose ``multipliers`` are ``multipliers()`` (an (N, n_rows) array), computed
        on first access (the reduced backend's recovery after a run: a least-squares solve per step,
        as costly as a third of the P5 crane's run) and then kept; ``multipliers`` reads the run's
        nodes, the arrays ``q``, ``v``, … of the Solution, as they are then (change them in place
        before and the multipliers follow)."""
        solution = cls(multipliers=None, **fields)
        del solution.multipliers
        solution._deferred = multipliers
        return solution

    def __getattr__(self, name):  # only for attributes not set: the deferred multipliers
        if name == "multipliers" and "_deferred" in self.__dict__:
            try:
                value = self.__dict__["_deferred"]()  # an error leaves them deferred
            except AttributeError as err:  # not "no attribute multipliers" (hasattr would say False)
                raise RuntimeError(f"recovering the multipliers failed: {err}") from err
            del self.__dict__["_deferred"]
            self.multipliers = value
            return value
        return object.__getattribute__(self, name)  # the error of a property that failed, as it was

    def __getstate__(self):  # pickled (a worker's result, an error's partial solution) with its multipliers
        state = dict(self.__dict__)
        if "_deferred" in state:
            state["multipliers"] = state.pop("_deferred")()
        return state

    @property
    def parts(self):
        """{name: (kind, first block, number of blocks)}"""
        return self.layout["parts"]

    @property
    def constraint_rows(self):
        """[(owner, equation)] for every row of g(q)."""
        return [tuple(r) for r in self.layout["constraint_rows"]]

    @property
    def coordinates(self):
        """{element name: (N+1,) joint coordinate} (rad or m; angles count turns)."""
        return dict(zip(self.layout["coordinate_names"], self.s.T))

    @property
    def work_per_step(self):
        """{name: (N,) discrete work of each step t_n → t_{n+1}} of motors and applied loads, J (a
        rotor's motor under the rotor's name, for either rotor model); summed from t0:
        :attr:`cumulative_work`."""
        return self._by_element(self.layout["work_names"], self.work)

    @property
    def work_by_element(self):
        """The same as :attr:`work_per_step`: {name: (N,) work of each step}, J (not summed)."""
        return self.work_per_step

    @property
    def cumulative_work(self):
        """{name: (N+1,) work done from t0 to each node t_n} of motors and applied loads, J (0 at
        t0; the sum of :attr:`work_per_step`; the CSV's ``"<name>.cumulative_work [J]"``)."""
        return {name: _from_t0(w) for name, w in self.work_per_step.items()}

    @property
    def dissipation_per_step(self):
        """{name: (N,) energy removed in each step t_n → t_{n+1}} by joint dampers and rotor
        bearings, J (≥ 0; a rotor's bearing under the rotor's name, for either rotor model);
        summed from t0: :attr:`cumulative_dissipation`."""
        return self._by_element(self.layout["dissipation_names"], self.dissipation)

    @property
    def dissipation_by_element(self):
        """The same as :attr:`dissipation_per_step`: {name: (N,) energy removed in each step}, J."""
        return self.dissipation_per_step

    @property
    def cumulative_dissipation(self):
        """{name: (N+1,) energy removed from t0 to each node t_n} by joint dampers and rotor
        bearings, J (0 at t0; the CSV's ``"<name>.cumulative_dissipation [J]"``)."""
        return {name: _from_t0(d) for name, d in self.dissipation_per_step.items()}

    def _by_element(self, names, per_step):
        """{name: column of per_step (N, len(names))}, a full-body rotor's motor and bearing (elements
        "<rotor> motor", "<rotor> bearing") under the rotor's name, as a hybrid rotor's are."""
        rotor_of = {f"{r} {what}": r for r in self.layout.get("body_rotors", {}) for what in ("motor", "bearing")}
        return {rotor_of.get(name, name): column for name, column in zip(names, per_step.T)}

    def controller(self, name) -> ControllerView:
        """The samples of the controller ``name`` (:class:`ControllerView`): times, commands, states
        and readings."""
        base = f"control.{name}."
        if base + "k" not in self.diagnostics:
            names = sorted({k.split(".")[1] for k in self.diagnostics if k.startswith("control.")})
            raise KeyError(f"no controller '{name}' in this Solution (controllers: {', '.join(names) or 'none'}).")
        k = self.diagnostics[base + "k"]
        new = np.flatnonzero(np.diff(k) > 0) + 1  # the nodes after a step that took a sample
        column = lambda key: self.diagnostics[key][new]  # noqa: E731
        state = [column(key) for key in sorted((key for key in self.diagnostics if key.startswith(base + "state.")),
                                               key=lambda key: int(key.rsplit(".", 1)[1]))]
        readings = {key[len(base) + 8:]: column(key) for key in self.diagnostics if key.startswith(base + "reading.")}
        return ControllerView(column(base + "time"), column(base + "commands"), state, readings)

    def rotor(self, name) -> RotorView:
        """Spin angle, relative rate and axial momentum of a rotor, for either rotor model."""
        rotors, bodies = self.layout["rotors"], self.layout["body_rotors"]
        if name in rotors:
            i = rotors.index(name)
            return RotorView(self.theta[:, i], self.diagnostics["rotor_rate"][:, i], self.p[:, i])
        if name in bodies:
            master_name, axis = bodies[name]
            body, master = self[name], self[master_name]
            axis = np.asarray(axis)
            a = body.rotation @ axis  # the spin axis, fixed in both (revolute)
            w_body = np.einsum("ni,ni->n", body.angular_velocity, a)
            J_axial = self.layout["body_rotor_axial_inertia"][name]
            # spin angle: rotation of the rotor's axes relative to the master's about the axis (the
            # rotor's axes equal the master's at t0), counting turns by the relative rate
            e1 = np.cross(axis, np.eye(3)[np.argmin(np.abs(axis))])
            e1 /= np.linalg.norm(e1)
            u, w = master.rotation @ e1, body.rotation @ e1
            rate = w_body - np.einsum("ni,ni->n", master.angular_velocity, a)
            angle = unwrapped(np.arctan2(np.einsum("ni,ni->n", a, np.cross(u, w)), np.einsum("ni,ni->n", u, w)),
                              rate, self.t)
            return RotorView(angle - angle[0], rate, J_axial * w_body)
        raise KeyError(f"no rotor named {name!r}; rotors: {sorted(list(rotors) + list(bodies))}.")

    @property
    def energy_balance_error(self):
        """(N+1,) E_n − E_0 − Σ_{k<n}(W_k − D_k): zero to round-off for the EM scheme, in J."""
        net = np.concatenate([[0.0], np.cumsum(self.work.sum(axis=1) - self.dissipation.sum(axis=1))])
        E = self.energy.total
        return E - E[0] - net

    def __getitem__(self, name) -> PartView:
        """The :class:`PartView` of a part, or the :class:`BeamView` of a beam (by name or object)."""
        name = getattr(name, "name", name)
        if name in self.layout.get("beams", {}):
            return BeamView(name, self.layout["beams"][name], [self[n] for n in self.layout["beams"][name]["nodes"]])
        if name not in self.parts:
            raise KeyError(f"no part named {name!r}; parts: {sorted(self.parts)}.")
        kind, first, n = self.parts[name]
        sl = slice(3 * first, 3 * (first + n))
        shape = (len(self), n, 3)
        return PartView(name, kind, self.q[:, sl].reshape(shape), self.v[:, sl].reshape(shape), self.t)

    @property
    def joints(self):
        """The names of the joints (every one has sensors: :meth:`joint`)."""
        return list(self.layout.get("joints", {}))

    def joint(self, name) -> JointView:
        """Sensors of the joint ``name`` at every node: angle and slide with their rates (for the
        joint kinds that have them, springs or not), the relative rotation, angular velocity,
        position and velocity of b in a's axes, and ``reaction(frame)`` (:mod:`conserve.results.sensors`)."""
        joints = self.layout.get("joints")
        if joints is None:
            raise KeyError("this Solution was saved without joint records (an older file): rerun it for joint sensors.")
        if name not in joints:
            raise KeyError(f"no joint named {name!r}; joints: {sorted(joints)}.")
        return joint_view(name, joints[name], self)

    @property
    def energy(self) -> Energy:
        """Kinetic, potential and total energy at every node (N+1,) each, J."""
        T, V = self.diagnostics["kinetic_energy"], self.diagnostics["potential_energy"]
        return Energy(T, V, T + V)

    @property
    def linear_momentum(self):
        """(N+1, 3) total linear momentum, kg m/s."""
        return self.diagnostics["linear_momentum"]

    @property
    def angular_momentum(self):
        """(N+1, 3) total angular momentum about the origin (hybrid rotors' spin included), kg m²/s."""
        return self.diagnostics["angular_momentum"]

    @property
    def constraint_residual(self):
        """(N+1,) max ``|g|`` over every constraint row at each node (m or 1: rows mix lengths and
        director products)."""
        return self.diagnostics["constraint_residual"]

    @property
    def energy_scale(self) -> float:
        """The size of the terms that make up the energy, J: the largest kinetic energy or
        magnitude of the potential energy at any node (0 for a system at rest in no field).
        :meth:`summary` states energy errors relative to it, not to ``|E0|``, which is no scale
        when the terms cancel (E0 = 0 for a chain released at its pivot's height)."""
        T, V = self.energy.kinetic, self.energy.potential
        return float(max(np.max(np.abs(T)), np.max(np.abs(V)))) if len(self) else 0.0

    def momentum_scale(self, name="angular_momentum") -> float:
        """The size of the terms that make up the ``"angular_momentum"`` (kg m²/s) or
        ``"linear_momentum"`` (kg m/s): their largest sum of magnitudes at any node
        (``Model.momentum_scales``; for a file saved without them, the momentum's largest
        magnitude)."""
        values = self.diagnostics[name]
        return float(np.max(self.diagnostics.get(f"{name}_scale", np.linalg.norm(values, axis=1))))

    @property
    def symmetries(self) -> dict:
        """{"angular_momentum": basis, "linear_momentum": basis}: the directions e (orthonormal
        lists of 3 numbers, possibly none) along which the model conserves J·e (about the origin)
        and L·e (:mod:`conserve.model.symmetry`); computed once from the model that made this
        Solution and kept in ``layout`` (saved with it). None for a file saved without them."""
        if "symmetries" not in self.layout and self.assembly is not None:
            from ..model.symmetry import conserved_directions

            state = self.assembly.initial_state
            self.layout["symmetries"] = conserved_directions(self.assembly.model, state.q, state.theta)
        return self.layout.get("symmetries")

    def summary(self) -> str:
        """A few lines on conservation and cost. The energy's largest change (and, with work or
        dissipation, the energy-balance error) is reported in J and relative to
        :attr:`energy_scale`, the size of the energies that make it up. Momenta are reported only
        along the directions the model's symmetry conserves (:attr:`symmetries`), as the largest
        change of J·e (L·e) in absolute terms and relative to the size of the terms that make up
        the momentum (:meth:`momentum_scale`). Both scales are where round-off lives: a chain
        released at its pivot's height (E0 = 0) or a satellite whose J0 is itself round-off is not
        judged against E0 or J0."""
        E = self.energy.total
        s = self.stats
        scale_E = self.energy_scale
        dt = np.diff(self.t) if len(self) > 1 else np.full(1, np.nan)
        size = f"{dt[0]:.3g} s" if np.ptp(dt) <= 1e-9 * np.max(np.abs(self.t)) else f"{dt.min():.3g} … {dt.max():.3g} s"
        if "accepted_steps" in s:  # adaptive (conserve.run.adaptive): steps of 2 per accepted attempt, nodes kept
            size = (f"{np.min(dt):.3g} … {np.max(dt):.3g} s" if s["steps"] == len(self) - 1 else
                    f"h, {len(self) - 1} intervals kept") + (
                f" (adaptive, rtol {s['rtol']:.0e}, atol {s['atol']:.0e}: {s['accepted_steps']} attempts accepted, "
                f"{s['rejected_steps']} rejected)")
        iters = self.newton_iterations if self.newton_iterations.size else np.zeros(1)
        lines = [
            f"{s.get('steps', len(self) - 1)} steps of {size} to t = {self.t[-1]:.6g} s "
            f"(backend {s.get('backend', '?')}, {self.layout['degrees_of_freedom']} degrees of freedom)",
            "  energy              max |E - E0| = "
            + _relative(np.max(np.abs(E - E[0])), scale_E, "J",
                        f"its scale {scale_E:.3g} J (the largest kinetic or |potential| energy reached)")
            + ("; balance E - E0 - (W - D) = "
               + _relative(np.max(np.abs(self.energy_balance_error)), scale_E, "J", "it")
               if self.work.size or self.dissipation.size else "")]
        symmetries = self.symmetries
        for name, what, unit, motion in (
                ("angular_momentum", "angular momentum", "kg m²/s", "rotation about the origin"),
                ("linear_momentum", "linear momentum", "kg m/s", "translation")):
            values = self.diagnostics[name]
            size = self.momentum_scale(name)
            label = f"  {what:<20}"
            if symmetries is not None and not symmetries[name]:
                lines.append(f"{label}not conserved: the model has no symmetry under {motion} (gravity, ground "
                             "joints or applied loads)")
                continue
            basis = np.eye(3) if symmetries is None else np.asarray(symmetries[name])
            change = np.max(np.abs((values - values[0]) @ basis.T))
            lines.append(f"{label}" + ("max |Δ|" if symmetries is None else
                                         f"conserved along {_directions(basis)} (symmetry under {motion}): max |Δ|")
                         + f" = {_relative(change, size, unit, f'its scale {size:.3g} {unit}')}"
                         + (" (the model's symmetries are not known for this file)" if symmetries is None else ""))
        lines += [
            f"  constraint residual max |g| = {np.max(self.constraint_residual):.2e}",
            f"  Newton iterations   mean {np.mean(iters):.2f}, max {np.max(iters)}",
            f"  compile {s.get('compile_time', float('nan')):.2f} s, run {s.get('run_time', float('nan')):.3f} s "
            f"= {1e6 * s.get('time_per_step', float('nan')):.1f} µs/step"]
        return "\n".join(lines)

    # --- dense output (``conserve.results.dense``) ------------------------------------------------
    def evaluate(self, t, degree="auto", assembly=None) -> Solution:
        """The Solution at the times ``t``: the run interpolated between its nodes (dense output),
        as a Solution whose nodes are those times, so that ``sol.evaluate(ts)["top"].position``,
        ``.joint(name)``, ``.rotor(name)``, ``.energy`` and ``.constraint_residual`` work as on
        the run. It is also saveat after the fact: ``sol.evaluate(np.linspace(sol.t[0],
        sol.t[-1], 201))`` resamples a finished run, adaptive or fixed, on any grid.

        Its error: with node values of the run's order p (errors O(h^p)) the interpolated q and v
        differ from the exact motion by O(h^p) — the "auto" degree does not lower the run's order
        — plus the interpolant's own O(h^(degree+1)) in q. h is the spacing of the Solution's
        nodes: with ``saveat`` the kept nodes', not the steps'. Formula and error orders:
        ``conserve.results.dense``.

        Parameters
        ----------
        t : a time in s, or a 1-D array of strictly increasing times, within [t0, t_end] (the
            first and last node; there is no extrapolation; times beyond an end by less than 1e-9
            of the span, the round-off of t0 + n dt, are that end). NaN, times outside the span
            and unsorted or repeated times are a ValueError that names the span.
        degree : "auto" (default), 3 or 7: the piecewise Hermite interpolant of the coordinates q
            with their rates v. 3: cubic on each interval's two nodes, local error O(h⁴) in q and
            O(h³) in v; 7: degree 7 on the interval's two nodes and one more on each side, O(h⁸)
            and O(h⁷) (h the spacing of the nodes). "auto": 3 for a run of order 2, 7 for orders 4
            and 6 and when ``stats`` records no order (a reference integrator).
        assembly : the System or Assembly the run was made with, for a Solution that has none (one
            read by :meth:`load`): the diagnostics at the new times are computed with it. Default:
            the Solution's own.

        Returns
        -------
        Solution
            M = len(t) nodes at the times t (one for a single time):

            * ``q``, ``v``: the Hermite interpolant P of the nodes' (q, v) and its derivative P';
              ``theta`` with its rate (the nodes' ``rotor_rate``) likewise; ``s``, ``p`` by the
              Lagrange polynomial through the degree + 1 nearest nodes (their rates are not kept).
              A time equal to a node time gives that node's values exactly.
            * ``diagnostics`` (energies, momenta, constraint residual, rotor rates) computed at the
              new nodes from the interpolated states when the model is known (a run's Solution, or
              ``assembly=``): between the nodes they show the interpolation's error — the
              constraints and the directors' orthonormality hold only to the interpolant's
              accuracy, not to round-off as at the nodes. Without a model they are NaN,
              ``rotor_rate`` excepted (the interpolant's). The controllers' columns are held from
              the node at or before each time.
            * per interval (M − 1 rows): ``work`` and ``dissipation`` are the differences of the
              cumulative work and dissipation, interpolated like s (at node times the run's sums,
              so ``energy_balance_error`` between nodes measures the interpolation's error too);
              ``multipliers`` are NaN (an interpolant has no constraint forces: joint reactions and
              drive loads read NaN); ``newton_iterations`` and ``substeps`` are 0 (no step of the
              run made the interval).
            * ``stats``: the run's, with ``"interpolation": {"degree": 3 or 7, "nodes": N+1}``
              (the run's number of nodes).
        """
        who = "Solution.evaluate"
        times = evaluation_times(t, self.t, who)
        degree = check_degree(degree, self.stats.get("order"), who)
        if assembly is None:
            assembly = self.assembly
        else:
            assembly = as_assembly(assembly, who)
            state = assembly.initial_state
            if (np.shape(state.q), np.shape(state.s), np.shape(state.p), sorted(assembly.layout.describe())) != (
                    self.q.shape[1:], self.s.shape[1:], self.p.shape[1:], sorted(self.parts)):
                raise ValueError(f"{who}: assembly= is not the model of this Solution (its parts or coordinates "
                                 "differ); give the System or Assembly the run was made with.")
        interpolant = Interpolant(self.t, times, degree)
        q, v = interpolant.hermite(self.q, self.v)
        rate = self.diagnostics.get("rotor_rate")
        if rate is not None and np.shape(rate) == self.theta.shape:
            theta, rate = interpolant.hermite(self.theta, rate)
        else:
            theta, rate = interpolant.lagrange(self.theta), None
        s, p = interpolant.lagrange(self.s), interpolant.lagrange(self.p)
        if assembly is not None:
            nodes = State(q, v, s, p, theta, np.zeros_like(q))
            diag = diagnostics(assembly.model, nodes, times, self.stats.get("compile") or "unoptimized")
        else:
            diag = {k: np.full((len(times), *np.shape(a)[1:]), np.nan) for k, a in self.diagnostics.items()
                    if k in NODE_DIAGNOSTICS}
            if rate is not None:
                diag["rotor_rate"] = rate
        diag.update({k: interpolant.hold(a) for k, a in self.diagnostics.items() if k not in diag})
        cumulative = lambda per_step: np.diff(  # noqa: E731  (per new interval, from the interpolated sums)
            interpolant.lagrange(np.concatenate([np.zeros((1, *per_step.shape[1:])), np.cumsum(per_step, axis=0)])),
            axis=0)
        m = len(times) - 1
        return Solution(t=times, q=q, v=v, s=s, p=p, theta=theta,
                        multipliers=np.full((m, len(self.layout["constraint_rows"])), np.nan),
                        newton_iterations=np.zeros(m, np.int32), work=cumulative(np.asarray(self.work, np.float64)),
                        dissipation=cumulative(np.asarray(self.dissipation, np.float64)),
                        substeps=np.zeros(m, np.int32), layout=dict(self.layout), diagnostics=diag,
                        stats={**self.stats, "interpolation": {"degree": degree, "nodes": len(self)}},
                        assembly=assembly)

    # --- export (:mod:`conserve.results.export`) ------------------------------------------------
    def save(self, path):
        """Write all arrays and metadata to an .npz file (:func:`conserve.results.export.save`), with the
        model's :attr:`symmetries` (found now if not yet, while the model is at hand), so that the
        loaded file's :meth:`summary` reports the conserved momenta as this one does."""
        _ = self.symmetries
        export.save(self, path)

    @classmethod
    def load(cls, path) -> Solution:
        """Read a file written by :meth:`save` (:func:`conserve.results.export.read`); anything else raises
        :class:`~conserve.errors.FileError`, and nothing in the file is executed."""
        return cls(**export.read(path))

    def to_xarray(self):
        """The Solution as an ``xarray.Dataset`` with named dimensions and units
        (:func:`conserve.results.export.to_xarray`)."""
        return export.to_xarray(self)

    def to_netcdf(self, path):
        """Write :meth:`to_xarray` to a netCDF file (:func:`conserve.results.export.to_netcdf`)."""
        export.to_netcdf(self, path)

    def to_csv(self, path):
        """Time series of energies, momenta, positions and quaternions (:func:`conserve.results.export.to_csv`)."""
        export.to_csv(self, path)

    def animate(self, path, **options):
        """Write a 3-D animation (.gif, or .mp4 with ffmpeg): body frames, joints, ropes, rotors
        with spin markers, trails. Options of :func:`conserve.results.animation.animate`."""
        from .animation import animate

        return animate(self, path, **options)

    def to_html(self, path, **options):
        """Write an interactive 3-D viewer of the run: one self-contained HTML file (three.js inside,
        nothing fetched) with the bodies, joints, traces, play/pause/scrub and the energy balance
        error beside the scene. Options of :func:`conserve.results.viewer.write_html`; returns the path."""
        from .viewer import write_html

        return write_html(self, path, **options)


def _relative(value, scale, unit, of):
    """"1.2e-15 J = 3.4e-16 of <of>", or the value alone for a scale of 0."""
    return f"{value:.2e} {unit}" + (f" = {value / scale:.2e} of {of}" if scale > 0 else "")


def _from_t0(per_step):
    """(N+1,) sums from t0 to each node of (N,) per-step values (0 at t0)."""
    return np.concatenate([[0.0], np.cumsum(per_step)])


def _directions(basis):
    """'all components', 'e3' or '(0.6, 0.8, 0)' … for an orthonormal basis of directions."""
    if len(basis) == 3:
        return "all components"
    names = []
    for v in basis:
        k = int(np.argmax(np.abs(v)))
        names.append(f"e{k + 1}" if np.isclose(abs(v[k]), 1.0) else "(" + ", ".join(f"{x:.3g}" for x in v) + ")")
    return " and ".join(names)
