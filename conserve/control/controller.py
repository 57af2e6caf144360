"""Controllers in the loop: one law computing the commands of many actuators from named sensor
readings and a state of its own, sampled at a rate with zero-order hold.

A :class:`Controller` with a ``rate`` is evaluated at its sample instants t_k = k / rate on the
node there — the run's steps are cut at the sample instants (:mod:`conserve.backends.sampled`) —,
and its commands are held until the next sample. Each actuator's law is its held command, a
constant over every step, so the discrete work of a motor is exactly τ Δθ (a force's F·Δx̄) and
the energy balance stays exact with the controller in the loop; between samples the step is the
plain energy-momentum step. Without a rate (``rate=None``) the law is evaluated inside every
step at its midpoint t_{n+½} on the readings of q_{n+½}, v̄ = Δq/h, p_{n+½}, as element laws
are (:func:`~conserve.control.controller.midpoint_commands`): the continuous-time controller,
second order in the step, its commands again constant over the step; such a law has no state and
reads ideal sensors.

The held commands are entries of ``model.parameters`` (:mod:`conserve.model.parameters`), named
``"<controller>.u[i]"``: the actuators read them the way any law reads a Parameter, and the run
overwrites them at each sample. The law's own gains may be :class:`~conserve.Parameter` s too, so
ensembles vary them and ``jax.grad`` differentiates a run with respect to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..model.coordinates import SLIP_RATE
from ..model.forces import Force, JointMotor, JointSpringDamper
from ..model.joints import Joint
from ..model.laws import Law, check, law_name
from ..model.parameters import Parameter
from ..model.rotors import Rotor
from ..model.terms import BodyState
from .sensors import Reading, Sensor


@dataclass(frozen=True)
class Actuator:
    """What a controller drives: a rotor's or joint's motor (one command: N m, or N along a
    slide) or a torque or force on a part (three: N m or N in ``frame`` axes); ``limit`` saturates
    each command to [−limit, limit]; ``max_speed`` (rad/s, rotors and angle joints) sets a command
    that would spin the rotor faster than it to zero; ``damping`` c (N m s/rad or N s/m) is the
    motor's speed-proportional loss (back-EMF k_t k_e / R, viscous friction), a torque −c θ̇, and
    ``dry_friction`` τ_c its dry (Coulomb) friction −τ_c tanh(θ̇/ω_s) (regularised below
    ``slip_rate`` ω_s); the run reports their dissipation (as the rotor's bearing's, or as the
    joint damper's ``"<controller> → <joint> losses"``)."""

    kind: str
    target: object
    limit: float | None = None
    max_speed: float | None = None
    damping: float = 0.0
    dry_friction: float = 0.0
    slip_rate: float = SLIP_RATE
    frame: str = "body"
    at_body: tuple | None = None
    coordinate: str | None = None

    @property
    def size(self):
        return 1 if self.kind == "motor" else 3


def motor(target, *, limit=None, max_speed=None, damping=0.0, dry_friction=0.0, slip_rate=SLIP_RATE,
          coordinate=None) -> Actuator:
    """The motor of a :class:`~conserve.Rotor` (torque N m about its axis on the rotor, reaction on
    the master) or of a Revolute, Prismatic or Cylindrical joint (torque N m or force N on part b,
    reaction on a; ``coordinate`` "angle" or "slide" for a cylindrical joint); ``limit``,
    ``max_speed``, ``damping``, ``dry_friction``, ``slip_rate``: :class:`Actuator`."""
    if not isinstance(target, (Rotor, Joint)):
        raise ModelError(f"motor: drives a Rotor or a joint, got {target!r}.")
    for what, x in (("damping", damping), ("dry_friction", dry_friction)):
        if not (isinstance(x, (int, float)) and x >= 0 and math.isfinite(x)):
            raise ModelError(f"motor: {what} must be a number ≥ 0, got {x!r}.")
    return Actuator("motor", target, _limit(limit, "limit"), _limit(max_speed, "max_speed"), float(damping),
                    float(dry_friction), _limit(slip_rate, "slip_rate"), coordinate=coordinate)


def torque(part, *, frame="body", limit=None) -> Actuator:
    """A pure torque (3,) N m on a rigid body, in its ``frame`` ("body" or "inertial") axes
    (thrusters' couple, magnetorquers)."""
    return Actuator("torque", part, _limit(limit, "limit"), frame=frame)


def force(part, *, at_body=None, frame="body", limit=None) -> Actuator:
    """A force (3,) N at the body point ``at_body`` (default: the centre of mass) of a part, in its
    ``frame`` axes (a thruster)."""
    at = None if at_body is None else tuple(np.asarray(at_body, float).tolist())
    return Actuator("force", part, _limit(limit, "limit"), frame=frame, at_body=at)


def _limit(x, what):
    if x is None:
        return None
    if not (isinstance(x, (int, float)) and x > 0 and math.isfinite(x)):
        raise ModelError(f"actuator: {what} must be a positive number, got {x!r}.")
    return float(x)


class ControlState(NamedTuple):
    """One controller's part of a run's carry: the held ``commands`` (n_u,), the law's ``state``
    (its own pytree; () for a law without), the index ``k`` of the next sample (int32), the
    ``time`` of the last sample (s; NaN before the first), the ``readings`` it used ({name:
    array}), the real sensors' last ``measured`` readings (what a one-sample delay hands to
    the next sample) and the ``reactions`` of its reaction sensors in the last two steps ({name:
    (2, 6)}, newest first; zeros before the first steps)."""

    commands: jax.Array
    state: object
    k: jax.Array
    time: jax.Array
    readings: dict
    measured: dict
    reactions: dict = {}


@dataclass(frozen=True)
class Sampler:
    """A controller as the run sees it (static, hashable: part of the model's structure): its
    ``name``, ``law``, ``rate`` (Hz or None), resolved sensor ``readings`` ((name, Reading) pairs),
    the held commands' parameter names ``commands``, each command's saturation ``limits`` (None:
    none) and rotor-speed guard ``speed`` ((command, Reading, max speed) triples), whether the law
    has a state ``stateful``, the parameter holding its noise's ``seed``, and the structure
    ``state_tree`` and leaf shapes ``state_shapes`` of the law's state. The initial commands and
    state are model parameters (``"<name>.u[i]"``, ``"<name>.state0[j]"``, the state's leaves
    flattened), so the members of an ensemble may start from other ones."""

    name: str
    law: object
    rate: float | None
    readings: tuple
    commands: tuple
    limits: tuple
    speed: tuple
    stateful: bool
    seed: str
    state_tree: object = jax.tree.structure(())
    state_shapes: tuple = ()

    def start(self, model, q, v, p) -> ControlState:
        """The carry before the first sample: the initial commands and state (the model's
        parameters); the readings of the initial node (what a delayed sensor hands to the first
        sample)."""
        reactions = {name: jnp.zeros((2, 6)) for name, r in self.readings if r.kind == "reaction"}
        measured = {name: r.measure(self.ideal(model, q, v, p, reactions, name, r), self.key(model, -1, i))
                    for i, (name, r) in enumerate(self.readings)}
        commands = jnp.stack([jnp.asarray(model.parameters[c], jnp.float64) for c in self.commands])
        flat = jnp.asarray([model.parameters[f"{self.name}.state0[{j}]"] for j in range(self.state_size)],
                           jnp.float64)
        ends = np.cumsum([int(np.prod(shape)) for shape in self.state_shapes])[:-1]
        state = jax.tree.unflatten(self.state_tree, [jnp.reshape(a, shape) for a, shape in
                                                     zip(jnp.split(flat, ends), self.state_shapes)])
        return ControlState(commands, state, jnp.int32(-1), jnp.float64(jnp.nan), measured, measured, reactions)

    @staticmethod
    def ideal(model, q, v, p, reactions, name, reading):
        """The ideal reading ``name`` of the node: :meth:`conserve.control.sensors.Reading.read`, or
        a reaction's mean over the last two steps."""
        return jnp.mean(reactions[name], axis=0) if reading.kind == "reaction" else reading.read(model, q, v, p)

    @property
    def state_size(self):
        """The number of entries of the law's state."""
        return sum(int(np.prod(shape)) for shape in self.state_shapes)

    def key(self, model, k, i):
        """The normal numbers of reading i at sample k (−1: the initial node): a key folded with the
        seed (a model parameter, so that an ensemble's members may differ in it), k + 1 and i."""
        seed = jnp.asarray(model.parameters[self.seed]).astype(jnp.uint32)
        return jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(jax.random.key(0), seed),
                                                     jnp.asarray(k) + 1), i)

    def sample(self, model, q, v, p, t, control: ControlState) -> ControlState:
        """The controller evaluated at the node (q, v, p) at its sample instant t: new commands
        (saturated, speed-guarded), state, readings; k advanced."""
        ideal = {name: self.ideal(model, q, v, p, control.reactions, name, r) for name, r in self.readings}
        measured = {name: r.measure(ideal[name], self.key(model, control.k, i)) for i, (name, r) in
                    enumerate(self.readings)}
        used = {name: control.measured[name] if r.delay else measured[name] for name, r in self.readings}
        out = self.law(t, used, control.state) if self.stateful else (self.law(t, used), ())
        state = jax.tree.map(lambda new, old: jnp.asarray(new, old.dtype).reshape(old.shape), out[1], control.state)
        commands = self.actuated(model, q, v, p, flat_commands(out[0]))
        return ControlState(commands, state, control.k + 1, jnp.asarray(t, jnp.float64), used, measured,
                            control.reactions)

    def midpoint(self, model, q, v, p, t) -> tuple:
        """(commands, ideal readings) of a controller without a rate (stateless, ideal sensors) in
        the step at t_{n+½}: its law on the readings of q_{n+½}, v̄ = Δq/h and p_{n+½}."""
        ideal = {name: r.read(model, q, v, p) for name, r in self.readings}
        return self.actuated(model, q, v, p, flat_commands(self.law(t, ideal))), ideal

    def actuated(self, model, q, v, p, commands):
        """The law's ``commands`` as the actuators take them: saturated, speed-guarded."""
        limits = np.array([np.inf if b is None else b for b in self.limits])
        commands = jnp.clip(commands, -limits, limits)
        for i, reading, top in self.speed:
            rate = reading.read(model, q, v, p)
            commands = commands.at[i].set(jnp.where((jnp.abs(rate) >= top) & (rate * commands[i] > 0), 0.0,
                                                    commands[i]))
        return commands


def midpoint_commands(model, t, h, q0, q1, p0, p1) -> dict:
    """{held command name: value} of the model's controllers without a rate, evaluated in the step
    t -> t + h at its midpoint (:meth:`Sampler.midpoint`), as element laws are: functions of the
    step's unknowns q_{n+1}, p_{n+1}. Empty if there are none."""
    values = {}
    for s in model.controllers:
        if s.rate is None:
            commands, _ = s.midpoint(model, 0.5 * (q0 + q1), (q1 - q0) / h, 0.5 * (p0 + p1), t + 0.5 * h)
            values.update(zip(s.commands, commands))
    return values


def reported(control):
    """What a run keeps of its controllers' carry at a node (None without controllers): the
    ControlStates without the sensors' pending measurements and reactions."""
    return None if control is None else tuple(c._replace(measured=None, reactions={}) for c in control)


def flat_commands(out):
    """A law's commands as one float64 vector: an array, or a list/tuple of one entry per actuator
    (scalars or (3,)) concatenated."""
    if isinstance(out, (list, tuple)):
        return jnp.concatenate([jnp.ravel(jnp.asarray(c, jnp.float64)) for c in out])
    return jnp.ravel(jnp.asarray(out, jnp.float64))


class Controller:
    """One control law for many actuators, sampled with zero-order hold (see the module docstring).

    Parameters
    ----------
    name : str, unique in the system (it names the held commands ``"<name>.u[i]"``)
    law : ``law(t, readings) -> commands`` or, with ``state``,
        ``law(t, readings, state) -> (commands, new_state)``; ``readings`` a dict {sensor name: reading} (see
        :mod:`conserve.control.sensors`), ``commands`` an array of all actuators' commands in
        their order (1 per motor, 3 per torque or force), or a list with one entry per actuator.
        jax-traceable (it runs in the compiled run); gains it reads as :class:`~conserve.Parameter`
        values vary in ensembles and have derivatives
    sensors : {name: Sensor} (``cs.sensors.attitude(bus)``, …)
    actuators : list of Rotors, joints (their motors) or :func:`~conserve.control.controller.motor`,
        :func:`~conserve.control.controller.torque`, :func:`~conserve.control.controller.force` specs;
        each actuator's law becomes the held command (a rotor or joint with a motor law of its own
        is refused)
    rate : sample rate in Hz (samples at t_k = k / rate; the steps are cut there), or None:
        evaluated inside every step at its midpoint (continuous time; no state, ideal sensors)
    state : the law's initial state (a pytree of arrays), or None for a law without state
    commands : the commands held before the first sample (default zeros)
    seed : int, the key of the sensors' noise (another seed, other noise)
    """

    def __init__(self, name, law, *, sensors, actuators, rate=None, state=None, commands=None, seed=0):
        if not (isinstance(name, str) and name):
            raise ModelError(f"Controller: name must be a non-empty string, got {name!r}.")
        self.name = name
        if not callable(law):
            raise ModelError(f"controller '{name}': law must be a function law(t, readings[, state]).")
        if not isinstance(sensors, dict) or not all(isinstance(s, Sensor) for s in sensors.values()):
            raise ModelError(f"controller '{name}': sensors must be a dict {{name: sensor}} of cs.sensors.… objects, "
                             f"got {sensors!r}.")
        if rate is not None and not (isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate)):
            raise ModelError(f"controller '{name}': rate must be a positive number (Hz) or None, got {rate!r}.")
        if not (isinstance(seed, (int, np.integer)) and 0 <= seed < 2**32):
            raise ModelError(f"controller '{name}': seed must be an integer in [0, 2³²), got {seed!r}.")
        real = [n for n, s in sensors.items() if s.noise or s.quantum or s.delay or np.any(s.bias)
                or s.kind == "reaction"]
        if rate is None and (state is not None or real):
            raise ModelError(f"controller '{name}': without a rate the law is evaluated inside each step, on the step's"
                             " unknowns, so it can have no state and read no sensor models or reactions (noise, bias, "
                             f"quantum, delay{': ' + ', '.join(real) if real else ''}); give the controller a rate "
                             "(Hz).")
        self.law, self.sensors, self.rate, self.seed = law, dict(sensors), rate, int(seed)
        self.state = None if state is None else jax.tree.map(lambda a: np.asarray(a, float), state)
        self.actuators = [a if isinstance(a, Actuator) else motor(a) for a in actuators]
        if not self.actuators:
            raise ModelError(f"controller '{name}': give it at least one actuator.")
        n = sum(a.size for a in self.actuators)
        c0 = np.zeros(n) if commands is None else np.asarray(commands, float).ravel()
        if c0.shape != (n,) or not np.all(np.isfinite(c0)):
            raise ModelError(f"controller '{name}': commands (held before the first sample) must be {n} finite "
                             f"numbers, got {commands!r}.")
        self.held = [Parameter(f"{name}.u[{i}]", c) for i, c in enumerate(c0)]
        self.seed_parameter = Parameter(f"{name}.seed", seed)
        self.state0 = [Parameter(f"{name}.state0[{j}]", x) for j, x in
                       enumerate(np.concatenate([np.ravel(a) for a in jax.tree.leaves(self.state)] or [np.zeros(0)]))]
        self.elements = []  # the motors and loads the controller adds to the system
        i = 0
        for a in self.actuators:
            self._drive(a, self.held[i:i + a.size])
            i += a.size

    def __repr__(self):
        return f"Controller({self.name!r}, rate={self.rate})"

    def _drive(self, a: Actuator, held):
        """Make actuator ``a``'s law the held commands ``held``."""
        who = f"controller '{self.name}'"
        if a.kind == "motor" and isinstance(a.target, Rotor):
            rotor = a.target
            if rotor.model == "hybrid":
                try:
                    rotor.set_motor(_held_scalar(held[0]))
                except ModelError as err:
                    raise ModelError(f"{who}: {err}") from None
                if a.dry_friction and rotor.dry_friction:
                    raise ModelError(f"{who}: rotor '{rotor.name}' has dry friction already; give it once.")
                rotor.friction += a.damping  # the motor's losses act as the bearing's
                if a.dry_friction:
                    rotor.dry_friction, rotor.slip_rate = a.dry_friction, a.slip_rate
                return
            if rotor.motor is not None:
                raise ModelError(f"{who}: rotor '{rotor.name}' has a motor law already; a rotor has one motor.")
            rotor.expand()  # its body and bearing joint, which the motor drives
            a = replace(a, target=rotor.joint, coordinate="angle")
        if a.kind == "motor":
            self.elements.append(JointMotor(a.target, _held_scalar(held[0]), coordinate=a.coordinate,
                                            name=f"{self.name} → {a.target.name}"))
            if a.damping or a.dry_friction:
                self.elements.append(JointSpringDamper(a.target, damping=a.damping, dry_friction=a.dry_friction,
                                                       slip_rate=a.slip_rate, coordinate=a.coordinate,
                                                       name=f"{self.name} → {a.target.name} losses"))
        else:
            kwargs = {"frame": "body" if a.frame == "body" else "inertial", "name": f"{self.name} → {a.target.name}"}
            if a.kind == "torque":
                self.elements.append(Force(a.target, torque=_held_vector(held), **kwargs))
            else:
                self.elements.append(Force(a.target, force=_held_vector(held), at_body=a.at_body, **kwargs))

    def sampler(self, layout) -> Sampler:
        """The :class:`Sampler` of this controller in an assembled layout; its law checked by an
        abstract evaluation on the sensors' shapes (a ModelError naming the controller if it cannot
        run in the step or returns the wrong number of commands)."""
        readings = tuple((name, s.resolve(layout)) for name, s in self.sensors.items())
        limits, speed, i = [], [], 0
        for a in self.actuators:
            limits += [a.limit] * a.size
            if a.max_speed is not None:
                speed.append((i, _speed_reading(a, layout), a.max_speed))
            i += a.size
        sampler = Sampler(self.name, self.law, None if self.rate is None else float(self.rate), readings,
                          tuple(p.name for p in self.held), tuple(limits), tuple(speed), self.state is not None,
                          self.seed_parameter.name, *_structure(() if self.state is None else self.state))
        for p in (self.seed_parameter, *self.state0):
            _ = p.value  # read inside assembly's recording: they are model parameters
        self._check(sampler)
        return sampler

    def _check(self, sampler: Sampler):
        readings = {name: jax.ShapeDtypeStruct(r.shape, jnp.float64) for name, r in sampler.readings}
        n = len(self.held)
        if self.state is None:
            law = Law("control law", self.law, "law(t, readings) with readings a dict {sensor name: array}",
                      (jax.ShapeDtypeStruct((), jnp.float64), readings), None, f"the {n} commands")
            shape = check(f"controller {self.name}", _flattened(law))
        else:
            state = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), jnp.float64), self.state)
            law = Law("control law", self.law, "law(t, readings, state) -> (commands, new_state)",
                      (jax.ShapeDtypeStruct((), jnp.float64), readings, state), None,
                      f"(the {n} commands, the new state)")
            shape = check(f"controller {self.name}", _flattened(law, stateful=True))
            out = jax.eval_shape(self.law, jnp.float64(0.0), readings, self.state)
            new = jax.tree.map(lambda a: (np.shape(a), np.dtype(a.dtype)), out[1])
            old = jax.tree.map(lambda a: (np.shape(a), np.dtype(a.dtype)), self.state)
            if jax.tree.structure(new) != jax.tree.structure(old) or jax.tree.leaves(new) != jax.tree.leaves(old):
                raise ModelError(f"controller '{self.name}': its law {law_name(self.law)} returns a new state of "
                                 f"another structure, shape or dtype than its initial state ({new} vs {old}); the "
                                 "state is carried from sample to sample: return it as it came in, float64.")
        if shape != (n,):
            raise ModelError(f"controller '{self.name}': its law {law_name(self.law)} returns "
                             f"{shape[0] if shape else 1} commands, its actuators take {n} (1 per motor, 3 per torque "
                             "or force, in the order of actuators=).")


def _structure(state):
    """(treedef, leaf shapes) of a state pytree."""
    leaves, treedef = jax.tree.flatten(state)
    return treedef, tuple(tuple(np.shape(a)) for a in leaves)


def _flattened(law: Law, stateful=False) -> Law:
    """``law`` with its commands flattened (a list of per-actuator values read as one vector)."""
    def fn(*args):
        out = law.fn(*args)
        if stateful and not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("a law with a state returns (commands, new_state)")
        return flat_commands(out[0] if stateful else out)

    fn.__wrapped__ = law.fn  # its signature and its name in messages (law_name) are the user's
    return Law(law.what, fn, law.signature, law.args, None, law.returns)


def _held_scalar(p: Parameter):
    def held(t, state):
        return p.value

    held.__qualname__ = f"held command {p.name}"
    return held


def _held_vector(ps):
    def held(t, state: BodyState):
        return jnp.stack([p.value for p in ps])

    held.__qualname__ = f"held commands {ps[0].name}…"
    return held


def _speed_reading(a: Actuator, layout) -> Reading:
    from .sensors import joint_rate, rotor_rate  # noqa: PLC0415

    if isinstance(a.target, Rotor):
        return (rotor_rate(a.target) if a.target.model == "hybrid" else joint_rate(a.target.joint)).resolve(layout)
    if a.coordinate == "slide":
        raise ModelError(f"actuator on '{a.target.name}': max_speed is for rotors and joint angles (rad/s).")
    return joint_rate(a.target).resolve(layout)
