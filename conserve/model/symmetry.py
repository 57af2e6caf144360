"""Which momenta a model conserves: the directions of its rigid-motion symmetries (Noether).

A component J·e of the angular momentum about the origin is a first integral when rotating the
whole system about e (through the origin) changes neither its potential energy, nor its
constraints, nor the joint coordinates its springs, dampers and motors act on, and no applied
load acts; likewise L·e for translations along e. Hybrid rotors (motors and bearings included)
are internal and keep both. The energy-momentum schemes conserve exactly these
components, so :meth:`conserve.Solution.summary` reports the drift of those and says which.

The test is numerical, on the model's own functions: the infinitesimal motion δq_e (e × x for
every block of a rotation, e on every position for a translation) must leave g, s and V
unchanged, G δq_e = 0, ∇s δq_e = 0 and ∇V·δq_e = 0, at the initial configuration and at two generic rigid
rotations of it (so that an accidental alignment cannot fake a symmetry: with one rotation, a single
force along the position left x × Rx as a translation symmetry). The conserved directions are
the null space of that linear map of e, a subspace: along g for uniform gravity, all of R³ for a
free system, none with a ground joint off the origin.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..kinematics.rotations import rotation_vector_to_rotation

#: A direction is a symmetry when its motion changes each constraint and the potential by less
#: than this relative to the size of the terms of the change.
SYMMETRY_TOL = 1e-9


def conserved_directions(model, q0, theta0) -> dict:
    """{"angular_momentum": [[e…]], "linear_momentum": [[e…]]}: orthonormal bases (lists of
    3-lists, possibly empty) of the directions e along which J·e (about the origin) and L·e are
    conserved."""
    if model.load_kinds:  # applied loads are external forces and moments
        return {"angular_momentum": [], "linear_momentum": []}
    n = q0.shape[0] // 3
    position = np.asarray(model.translational, bool)
    # three configurations: one force along the position (central gravity, a spring to a ground
    # anchor) forbids the translations normal to it at each, and two leave x × Rx as a false symmetry
    rotations = [np.eye(3), *(rotation_vector_to_rotation(r) for r in ([0.3, -0.7, 0.5], [-0.6, 0.2, 0.9]))]

    configurations = [np.asarray(q0).reshape(n, 3) @ R.T for R in rotations]
    jacobians = [np.asarray(_invariance_jacobian(model, Q.ravel(), theta0)) for Q in configurations]
    out = {}
    for key in ("angular_momentum", "linear_momentum"):
        rows, sizes = [], []
        for Q, G in zip(configurations, jacobians):
            motions = np.stack([(np.cross(e, Q) if key == "angular_momentum" else
                                 np.where(position[:, None], e, 0.0)).ravel() for e in np.eye(3)], axis=1)
            rows.append(G @ motions)  # [G δq_e; ∇s δq_e; ∇V·δq_e] for e = e1, e2, e3
            sizes.append(np.abs(G) @ np.max(np.abs(motions), axis=1) + 1e-300)  # the size of their terms
        A = np.concatenate(rows) / np.concatenate(sizes)[:, None]  # each row relative to its terms
        _, sigma, Vt = np.linalg.svd(A)
        rank = int(np.sum(sigma > SYMMETRY_TOL))
        basis = np.eye(3) if rank == 0 else Vt[rank:]
        out[key] = [[float(x) for x in np.round(v * np.sign(v[np.argmax(np.abs(v))]), 15) + 0.0] for v in basis]
    return out


@jit_quick(mode="unoptimized")
def _invariance_jacobian(model, q, theta):
    """∂(g, s, V)/∂q at q (every constraint row, every joint coordinate — motors and dampers act on
    them — and the potential), compiled once per model structure."""
    def functions(x):
        s = model.coordinate_values(x)
        return jnp.concatenate([model.all_constraints(x, theta, s), s, model.potential_energy(x, s)[None]])

    return jax.jacfwd(functions)(q)
