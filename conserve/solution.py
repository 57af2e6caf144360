"""Solution: the trajectory, Newton statistics and conservation diagnostics as numpy arrays.

A Solution needs no model to be read back: it stores the coordinate layout of its parts, so
``sol["top"].rotation`` works on a loaded file too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .kinematics.rotations import rotation_to_quaternion
from .model.assembled import Energy, Model

#: Version of the npz layout written by :meth:`Solution.save`.
FORMAT_VERSION = 1


@jax.jit
def _diagnostics(model: Model, q, v):
    def one(q, v):
        T = model.kinetic_energy(v)
        V = model.potential_energy(q)
        g = model.constraints(q)
        res = jnp.max(jnp.abs(g)) if g.size else jnp.zeros(())
        return T, V, model.linear_momentum(v), model.angular_momentum(q, v), res

    return jax.vmap(one)(q, v)


def diagnostics(model: Model, q, v):
    """Energies (J), linear momentum (kg m/s), angular momentum about the origin (kg m²/s) and
    max-norm constraint residual at every node; q, v of shape (N + 1, n_q)."""
    T, V, L, J, res = (np.asarray(a) for a in _diagnostics(model, jnp.asarray(q), jnp.asarray(v)))
    return {"kinetic_energy": T, "potential_energy": V, "linear_momentum": L,
            "angular_momentum": J, "constraint_residual": res}


class PartView:
    """Time histories of one part, computed from the director coordinates.

    Attributes (arrays over the N + 1 nodes)
    ----------
    position : (N+1, 3) centre of mass in m;  velocity : (N+1, 3) in m/s
    rotation : (N+1, 3, 3) R = [d1 d2 d3];  quaternion : (N+1, 4) (w, x, y, z), w ≥ 0
    angular_velocity : (N+1, 3) inertial, rad/s;  angular_velocity_body : (N+1, 3) = Rᵀ ω
    """

    def __init__(self, name, kind, q, v):
        self.name, self.kind = name, kind
        self.position, self.velocity = q[:, 0], v[:, 0]
        self._d, self._d_rate = q[:, 1:], v[:, 1:]

    def _rigid(self):
        if self._d.shape[1] != 3:
            raise AttributeError(f"part '{self.name}' is a {self.kind}: it has no orientation.")

    @property
    def rotation(self):
        self._rigid()
        return np.swapaxes(self._d, 1, 2)

    @property
    def quaternion(self):
        return rotation_to_quaternion(self.rotation)

    @property
    def angular_velocity(self):
        self._rigid()
        return 0.5 * np.sum(np.cross(self._d, self._d_rate), axis=1)

    @property
    def angular_velocity_body(self):
        return np.einsum("nji,nj->ni", self.rotation, self.angular_velocity)


@dataclass
class Solution:
    """Result of :func:`conserve.simulate`.

    Attributes
    ----------
    t : (N+1,) s
    q, v : (N+1, n_q) coordinates and velocities (director layout, see ``parts``)
    multipliers : (N, n_c) Lagrange multipliers λ_{n+½} of each step (N for a spherical joint:
        the force on its second part), rows named by ``constraint_rows``
    newton_iterations : (N,) iterations per step
    parts : {name: (kind, first block, number of blocks)}
    constraint_rows : [(owner, equation)] for the rows of g(q)
    diagnostics : energies, momenta, constraint residual per node (see properties)
    stats : backend, steps, compile_time (s), run_time (s, after compilation), time_per_step (s)
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    multipliers: np.ndarray
    newton_iterations: np.ndarray
    parts: dict
    constraint_rows: list
    diagnostics: dict
    stats: dict = field(default_factory=dict)

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, name) -> PartView:
        if name not in self.parts:
            raise KeyError(f"no part named {name!r}; parts: {sorted(self.parts)}.")
        kind, first, n = self.parts[name]
        sl = slice(3 * first, 3 * (first + n))
        shape = (len(self), n, 3)
        return PartView(name, kind, self.q[:, sl].reshape(shape), self.v[:, sl].reshape(shape))

    @property
    def energy(self) -> Energy:
        T, V = self.diagnostics["kinetic_energy"], self.diagnostics["potential_energy"]
        return Energy(T, V, T + V)

    @property
    def linear_momentum(self):
        return self.diagnostics["linear_momentum"]

    @property
    def angular_momentum(self):
        return self.diagnostics["angular_momentum"]

    @property
    def constraint_residual(self):
        return self.diagnostics["constraint_residual"]

    def summary(self) -> str:
        """A few lines on conservation and cost."""
        E = self.energy.total
        J, L = self.angular_momentum, self.linear_momentum
        scale = lambda a: max(np.max(np.abs(a[0])), 1e-300)  # noqa: E731
        s = self.stats
        return "\n".join([
            f"{s.get('steps', len(self) - 1)} steps of {self.t[1] - self.t[0]:.3g} s to t = {self.t[-1]:.6g} s "
            f"(backend {s.get('backend', '?')})",
            f"  energy drift        max |E - E0|/|E0| = {np.max(np.abs(E - E[0])) / scale(E):.2e}",
            f"  angular momentum    max |J - J0|/|J0| = {np.max(np.abs(J - J[0])) / scale(J):.2e}"
            "  (a drift only where no external moment acts)",
            f"  linear momentum     max |L - L0|      = {np.max(np.abs(L - L[0])):.2e} kg m/s"
            "  (a drift only where no external force acts)",
            f"  constraint residual max |g|           = {np.max(self.constraint_residual):.2e}",
            f"  Newton iterations   mean {np.mean(self.newton_iterations):.2f}, max {np.max(self.newton_iterations)}",
            f"  compile {s.get('compile_time', float('nan')):.2f} s, run {s.get('run_time', float('nan')):.3f} s "
            f"= {1e6 * s.get('time_per_step', float('nan')):.1f} µs/step",
        ])

    # --- export -------------------------------------------------------------------------
    def save(self, path):
        """Write all arrays and metadata to an .npz file (format version FORMAT_VERSION)."""
        meta = {"format_version": FORMAT_VERSION, "parts": self.parts,
                "constraint_rows": self.constraint_rows, "stats": self.stats}
        np.savez(path, t=self.t, q=self.q, v=self.v, multipliers=self.multipliers,
                 newton_iterations=self.newton_iterations, meta=json.dumps(meta),
                 **{f"diag_{k}": a for k, a in self.diagnostics.items()})

    @classmethod
    def load(cls, path) -> Solution:
        with np.load(path) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"{path}: format version {meta.get('format_version')}, expected {FORMAT_VERSION}.")
            diag = {k[5:]: f[k] for k in f.files if k.startswith("diag_")}
            return cls(t=f["t"], q=f["q"], v=f["v"], multipliers=f["multipliers"],
                       newton_iterations=f["newton_iterations"],
                       parts={k: tuple(v) for k, v in meta["parts"].items()},
                       constraint_rows=[tuple(r) for r in meta["constraint_rows"]],
                       diagnostics=diag, stats=meta["stats"])

    def to_csv(self, path):
        """Time series with a header: t, energies, momenta, constraint residual, and per part
        its position (and quaternion w, x, y, z for rigid bodies)."""
        cols = {"t": self.t, "kinetic_energy": self.energy.kinetic,
                "potential_energy": self.energy.potential, "total_energy": self.energy.total}
        for i, c in enumerate("xyz"):
            cols[f"linear_momentum_{c}"] = self.linear_momentum[:, i]
        for i, c in enumerate("xyz"):
            cols[f"angular_momentum_{c}"] = self.angular_momentum[:, i]
        cols["constraint_residual"] = self.constraint_residual
        for name in self.parts:
            part = self[name]
            for i, c in enumerate("xyz"):
                cols[f"{name}.x_{c}"] = part.position[:, i]
            if part._d.shape[1] == 3:
                quat = part.quaternion
                for i, c in enumerate("wxyz"):
                    cols[f"{name}.q_{c}"] = quat[:, i]
        np.savetxt(path, np.column_stack(list(cols.values())), delimiter=",",
                   header=",".join(cols), comments="", fmt="%.17g")
