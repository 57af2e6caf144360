"""The Newton matrix's linear algebra: a dense LU, or a block elimination along a tree.

A Newton iteration needs J = ∂r/∂x (``jacobian``: in the solver's own storage), its
factorisation (``factorise``), solves with the factors (``solve``) and, for its round-off test,
``|J| w`` (``abs_times``). Interchangeable solvers provide them (:func:`conserve.discrete.newton.newton_solve`
takes either):

* :class:`Dense`: J from ``jax.jacfwd`` (n directional derivatives), dense LU with partial
  pivoting, O(n³) per factorisation. Right for small systems, and the oracle of the others.
* :class:`Coloured`: the dense LU, J from compressed directional derivatives (Curtis, Powell
  and Reid 1974): unknowns that share no row of J take one colour, one derivative probes all
  unknowns of a colour, and each entry is read back from its column's probe. For systems whose
  couplings are neither a tree of nodes nor a bordered one (an element joining three bodies in
  a cycle, a border of more than half the unknowns) or cannot be eliminated along it, and for
  trees too small to gain from the elimination: a double four-bar (119 unknowns) needs 21
  derivatives instead of 119, the P5 crane 32 instead of 53.
* :class:`BlockTree`: the unknowns grouped into *nodes* (a body with its internal and joint
  multipliers and its rotors; a kinematic loop's closing joint with the two bodies it joins),
  whose couplings form a forest (chains, trees, chains of loops closed through the ground: every
  nonzero J_ab joins a node to itself, its parent or a child). Its blocks are read from the same
  compressed directional derivatives as the coloured solver's, coloured unknown by unknown: a
  chain of any length needs ~24 (b = 21 unknowns per bar), where colouring whole nodes (nodes at
  tree distance ≥ 3 sharing a colour) would need 3·b = 63, and a star of k bodies round a hub
  (k + 1)·b (measurements: benchmarks/results/defaults.md, section ``BlockTree``). The blocks are
  eliminated leaves first (block Gaussian elimination without fill-in; George and Liu 1981), each
  diagonal block inverted after its children's elimination (LU with partial pivoting inside the
  block; in a one-kernel loop Gauss–Jordan with the same pivots, ``kernel=True``): O(N b³) for N
  nodes of width b, a ``lax.scan`` over the tree's levels (the nodes of one level at once) whose
  code does not grow with N.
* :class:`BorderedTree`: a :class:`BlockTree` bordered by the k multipliers that close the cycles
  of a node graph that no ground closes (a ring of free bodies: the rows of one joint per
  independent cycle; where a cycle is closed by a direct coupling of two bodies — a spring, a
  revolute joint's axis rows, bilinear in both bodies' coordinates — a body with the rows that
  touch it), J = [[A, B], [C, E]] with A the tree's part. The border is eliminated by the
  Schur complement of A (the block LU of a bordered system; Golub and Van Loan, Matrix
  Computations, block LU factorisation): Y = A⁻¹ B by k solves along the tree, S = E − C Y
  (k × k) and its LU; a solve is y = A⁻¹ r_t, x_c = S⁻¹ (r_c − C y), x_t = y − Y x_c.
  O(N b³ + N b² k + n k² + k³) per factorisation:
  linear in the bodies for a fixed number of loops, where the coloured dense LU of the same
  matrix is O(N³) (measurements: benchmarks/results/free_ring.md). All its blocks are read from
  the coloured solver's directional derivatives (the colouring of the full pattern).

:class:`Imaged` is :class:`Dense` for a residual that also returns an image of its unknowns (the
reduced dense step's increments), whose solution's image it forms from the last correction.

:func:`coloured` colours the unknowns from the Jacobian's sparsity pattern
(:func:`sampled_pattern`, :func:`column_colours`; once per model structure, outside jit), and
:func:`block_tree` finds the nodes and the tree, whose blocks it reads with those colours; it
returns None when the couplings are not a forest (a loop of free bodies, a spring between
distant bodies). :func:`bordered_tree` then sets aside the unknowns that close the cycles, or
returns None. All read the
pattern off J at a few random points: an entry that vanishes at all of them although the model
couples its unknowns (a force law switched off there) is read as zero, and Newton then converges
slowly or fails (the residual is exact, so a converged step is right); ``linear="dense"`` serves.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import lu_factor, lu_solve


@dataclass(frozen=True)
class Dense:
    """J by ``jax.jacfwd``, dense LU with partial pivoting. Blocks: J; factors: (lu, pivots).

    ``kernel``: factorise and solve by :func:`kernel_inverse` and :func:`kernel_inverse_solve`
    (Gauss–Jordan in XLA operations; factors: (J⁻¹ with rows in pivot order, perm)) instead of
    LAPACK's LU (a library call), so that a Newton loop holds no library call and XLA can compile
    it as one kernel (:mod:`conserve.compilation`); chosen per compilation by
    :meth:`~conserve.backends.base.StepBackend.as_kernels`. The same pivots: the solutions agree
    to round-off."""

    kernel: bool = field(default=False, kw_only=True)

    name = "dense"

    def jacobian(self, residual, x):
        """J (n, n) at x."""
        return jax.jacfwd(residual)(x)

    def factorise(self, J):
        return kernel_inverse(J) if self.kernel else lu_factor(J)

    def solve(self, factors, r):
        """x with J x = r (n,)."""
        return kernel_inverse_solve(factors, r) if self.kernel else lu_solve(factors, r)

    def abs_times(self, J, w):
        """``|J| w`` (n,)."""
        return jnp.abs(J) @ w

    def largest_inverse(self, n):
        """The order of the largest matrix this solver factorises for n unknowns (what decides
        whether :func:`kernel_inverse` may serve, :data:`~conserve.compilation.modes.KERNEL_SIZE`): n."""
        return n

    def dense(self, J):
        return J


@dataclass(frozen=True, eq=False)
class Imaged:
    """:class:`Dense` for a residual with an image (:func:`~conserve.discrete.newton.newton_solve`'s
    ``image``): the residual returns (r (n,), y (m,)), y = ``image``(x) an image of the unknowns
    (the reduced dense step's increments Δq = F(q_n, u) of its minimal ones). The solution's image
    is then y of the last evaluated iterate plus the image of the last correction by
    :meth:`image_tangent` at that iterate, y(x + δx) = y(x) + (∂y/∂x)(x) δx + O(δx²), not y of the
    unknowns rounded, whose rounding error is not random (:func:`conserve.backends.reduced.step`);
    it costs one Jacobian-vector product of the image per solve, after the iteration. J = ∂r/∂x
    and its factors are ``inner``'s."""

    inner: Dense
    image: object  # x (n,) -> y (m,)

    name = "dense"

    def jacobian(self, residual, x):
        """J (n, n) at x (of r alone; a residual without an image, as :func:`~conserve.discrete.newton.empty_memory`
        sizes factors with, is r)."""
        return self.inner.jacobian(lambda z: _without_image(residual(z)), x)

    def factorise(self, J):
        return self.inner.factorise(J)

    def solve(self, factors, r):
        return self.inner.solve(factors, r)

    def image_tangent(self, x, dx):
        """(∂y/∂x)(x) δx (m,)."""
        return jax.jvp(self.image, (x,), (dx,))[1]

    def abs_times(self, J, w):
        return self.inner.abs_times(J, w)

    def largest_inverse(self, n):
        return n

    def dense(self, J):
        return J


def _without_image(out):
    """r of a residual's (r, y), or r itself."""
    return out[0] if isinstance(out, tuple) else out


def kernel_inverse(J):
    """J⁻¹ (n, n) by Gauss–Jordan elimination with partial pivoting, in XLA operations (a library
    call, LAPACK's LU, cannot be part of a one-kernel loop, :mod:`conserve.compilation`). A
    ``fori_loop`` of exchange steps that moves no rows: column k's pivot is the largest entry among
    the rows not yet pivoted — the entry of the Schur complement LU's partial pivoting picks, so
    the same pivots as LAPACK's ``getrf`` — and one masked rank-one update of the whole matrix
    exchanges unknown k for equation p (Gauss–Jordan's exchange step, in statistics the "sweep"
    operator): after n of them the table is J⁻¹ with rows in pivot order and columns taken by the
    pivot rows. O(n³), meant for n ≲ 50 (:data:`~conserve.compilation.modes.KERNEL_SIZE`): fewer masks
    than a row-free LU, so a faster factorisation, and a solve is then one product instead of two
    substitution loops, which the chords of simplified Newton, several per step, repeat
    (measurements: benchmarks/results/defaults.md, section ``kernel_inverse``).
    Returns (B (n, n), perm (n,) int32) with J⁻¹ r = B r[perm] (:func:`kernel_inverse_solve`)."""
    n = J.shape[-1]
    index = jnp.arange(n, dtype=jnp.int32)

    def exchange(k, carry):
        A, perm, free = carry  # free: the rows not yet pivoted
        column = A[:, k]
        p = jnp.argmax(jnp.where(free, jnp.abs(column), -1.0)).astype(jnp.int32)
        at_k = index == k
        pivot_row = jnp.where(at_k, 1.0, A[p]) / A[p, k]  # row p of the exchanged table
        A = jnp.where(at_k[None, :], 0.0, A) - column[:, None] * pivot_row[None, :]
        A = jnp.where((index == p)[:, None], pivot_row[None, :], A)
        return A, jax.lax.dynamic_update_index_in_dim(perm, p, k, 0), free & (index != p)

    A, perm, _ = jax.lax.fori_loop(0, n, exchange, (J, index, jnp.ones(n, bool)))
    return A[perm], perm  # unknown k is row perm[k] of the table; its column k' reads r[perm[k']]


def kernel_inverse_solve(factors, r):
    """x = J⁻¹ r (n,) from :func:`kernel_inverse`'s (B, perm): ``B @ r[perm]``."""
    B, perm = factors
    return B @ r[perm]


class _Structure:
    """Equality and hash by the content of the numpy arrays a structured solver is made of
    (``_arrays()``): the solver is part of a compiled program's key, so two backends prepared for
    one model structure share the program."""

    def __post_init__(self):
        arrays = [np.ascontiguousarray(a) for a in self._arrays()]
        object.__setattr__(self, "_key", b"|".join(str((a.dtype, a.shape)).encode() + a.tobytes() for a in arrays))

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return type(other) is type(self) and self._key == other._key


@dataclass(frozen=True, eq=False)
class Coloured(_Structure, Dense):
    """The dense LU of :class:`Dense`, J from one directional derivative per colour (see the module
    docstring); built by :func:`coloured`. Blocks: J; factors: (lu, pivots).

    Attributes
    ----------
    colour : (n,) int numpy, the colour of each unknown: no row of ``pattern`` has two unknowns
        of one colour
    pattern : (n, n) bool numpy, the entries of J that may be nonzero
    """

    colour: np.ndarray
    pattern: np.ndarray
    _key: bytes = field(init=False, repr=False)

    name = "coloured"

    def _arrays(self):
        return self.colour, self.pattern, np.asarray(self.kernel)

    @property
    def n_colours(self):
        return _count(self.colour)

    def jacobian(self, residual, x):
        """J (n, n) at x: J_ij is the i-th entry of the derivative along all unknowns of j's colour."""
        return jnp.where(self.pattern, _compressed_jacobian(residual, x, self.colour).T[:, self.colour], 0.0)


def _compressed_jacobian(residual, x, colour):
    """(k, n) the derivatives of ``residual`` at x along all unknowns of each colour (``colour``
    (n,) int, k colours): entry (c, i) is Σ J_ij over the unknowns j of colour c, so J_ij itself
    when no other unknown of j's colour has a nonzero in row i (Curtis, Powell and Reid 1974)."""
    probes = jnp.asarray(np.arange(_count(colour))[:, None] == colour[None, :], x.dtype)  # (k, n)
    return jax.vmap(lambda e: jax.jvp(residual, (x,), (e,))[1])(probes)


def _count(colour):
    return int(colour.max()) + 1 if colour.size else 0


def coloured(jacobians, group):
    """The :class:`Coloured` solver of a Newton matrix: its pattern and colours by
    :func:`sampled_pattern` and :func:`column_colours`. An entry that is zero at every sample
    although the model couples its unknowns (a force law switched off there) would be read as
    another's: Newton then converges slowly or fails (the residual is exact, so a converged step
    is right), and ``linear="dense"`` serves.

    Parameters
    ----------
    jacobians : sequence of (n, n) arrays, J at a few random points
    group : (n,) int, the group of each unknown (its 3-block for a coordinate, its own for others)
    """
    pattern = sampled_pattern(jacobians, group)
    return Coloured(colour=column_colours(pattern), pattern=pattern.toarray())


def sampled_pattern(jacobians, group=None):
    """The entries of J that may be nonzero (scipy.sparse, (n, n) bool): the nonzeros of J at a
    few random points, made structurally symmetric (a multiplier's row and column touch the same
    unknowns) and widened to whole groups (a 3-block of coordinates: an entry that vanishes at
    the samples by the geometry, a coordinate along an axis, is not missed). ``group`` (n,) int:
    the group of each unknown (default: each its own)."""
    from scipy import sparse  # imported here: 0.08 s that a run without colouring need not pay

    pattern = sparse.csr_matrix(np.any([np.asarray(J) != 0 for J in jacobians], axis=0))
    pattern = (pattern + pattern.T).astype(bool)
    n = pattern.shape[0]
    group = np.arange(n) if group is None else np.asarray(group)
    members = sparse.csr_matrix((np.ones(n), (group, np.arange(n))), shape=(int(group.max()) + 1 if n else 0, n))
    return (members.T @ (members @ pattern.astype(float) @ members.T) @ members).astype(bool).tocsr()


def column_colours(pattern):
    """(n,) int colours of the columns of a symmetric sparse ``pattern`` such that no row has two
    nonzeros of one colour (then one directional derivative along all unknowns of a colour gives
    each of their columns: Curtis, Powell and Reid 1974); greedy, the columns with the most rows
    first (Coleman and Moré 1983). O(Σ_rows nnz²), not O(n³): a 64-link chain's 1344 in ~0.1 s."""
    from scipy import sparse

    pattern = sparse.csr_matrix(pattern)
    n = pattern.shape[0]
    rows = np.split(pattern.indices, pattern.indptr[1:-1])  # symmetric: column j's rows = row j's columns
    colour = np.full(n, -1)
    for j in np.argsort(-np.diff(pattern.indptr), kind="stable"):
        clash = np.concatenate([rows[i] for i in rows[j]]) if len(rows[j]) else np.zeros(0, int)
        taken = np.zeros(n + 1, bool)
        taken[colour[clash][colour[clash] >= 0]] = True
        colour[j] = int(np.argmin(taken))
    return colour


@dataclass(frozen=True, eq=False)
class BlockTree(_Structure):
    """The unknowns as a forest of nodes (see the module docstring); built by :func:`block_tree`.
    Its arrays are numpy (static), for N nodes plus one empty *dummy* node N, the parent of the roots.

    Attributes
    ----------
    slots : (N + 1, b) int, the unknowns of each node (indices into x; n marks an empty slot)
    parent : (N,) int, each node's parent (N for a root)
    levels : (n_levels, w) int, the elimination order: the nodes of a level are eliminated
        together, every node in a level below its parent's (padded with the dummy node)
    colour : (n,) int, the directional derivative (*probe*) that gives each unknown's column of J:
        unknowns of one colour share no row (:func:`column_colours`)
    reads : (3, N + 1, b, b) bool, the entries of the blocks D, U, L (see :meth:`jacobian`) that may
        be nonzero; the others are read as zero, not from a probe
    loops : whether nodes close kinematic loops (a loop-closing joint and the bodies it joins,
        ``_loop_nodes``): their bodies turn against each other
    kernel : invert the diagonal blocks by :func:`kernel_inverse` (Gauss–Jordan in XLA operations)
        instead of LAPACK (a library call), so that the Newton loop holds none and XLA compiles it
        as one kernel, as :class:`Dense`'s ``kernel``; the same pivots
    """

    slots: np.ndarray
    parent: np.ndarray
    levels: np.ndarray
    colour: np.ndarray
    reads: np.ndarray
    loops: bool = False
    kernel: bool = field(default=False, kw_only=True)
    _key: bytes = field(init=False, repr=False)

    name = "tree"

    def _arrays(self):
        return (self.slots, self.parent, self.levels, self.colour, self.reads, np.asarray(self.loops),
                np.asarray(self.kernel))

    @property
    def width(self):
        return self.slots.shape[1]

    def largest_inverse(self, n):
        """As :meth:`Dense.largest_inverse`: a diagonal block's order, whatever n."""
        return self.width

    @property
    def n_nodes(self):
        return self.parent.shape[0]

    @property
    def n_colours(self):
        """The directional derivatives per Jacobian (a chain's does not grow with its length)."""
        return _count(self.colour)

    def jacobian(self, residual, x):
        """The blocks of J at x: (D, U, L) with D (N + 1, b, b) the diagonal blocks, U (N + 1, b, b)
        = J[node, parent], L (N + 1, b, b) = J[parent, node] (the dummy node: D = I, U = L = 0),
        each entry read from the probe of its column's colour."""
        return self._blocks(_compressed_jacobian(residual, x, self.colour), x.dtype)

    def _blocks(self, compressed, dtype):
        """(D, U, L) of :meth:`jacobian` from the compressed Jacobian (k, n) (:func:`_compressed_jacobian`)."""
        n, b, k = compressed.shape[1], self.width, self.n_colours
        Jx = jnp.pad(compressed, ((0, 1), (0, 1)))  # empty slot: probe k, row n
        rows = self.slots  # row r of J sits in the slot of unknown r
        above = np.append(self.parent, self.n_nodes)  # each node's parent (the dummy's: itself)
        probe = np.append(self.colour, k)[rows]  # (N + 1, b) the probe of each slot's column
        empty = (rows == n)[:, :, None] * np.eye(b, dtype=bool)  # unit diagonal on empty slots
        D = jnp.where(self.reads[0], Jx[probe[:, None, :], rows[:, :, None]], 0.0) + jnp.asarray(empty, dtype)
        U = jnp.where(self.reads[1], Jx[probe[above][:, None, :], rows[:, :, None]], 0.0)
        L = jnp.where(self.reads[2], Jx[probe[:, None, :], rows[above][:, :, None]], 0.0)
        return D, U, L

    def factorise(self, blocks):
        """The elimination of the blocks, leaves first: (L, inverse, X), per level (n_levels, w, b, b)
        the inverses of its nodes' diagonal blocks D̃ after their children's elimination and
        X = D̃⁻¹ U; the same arrays with ``kernel`` (so a carry made for either serves both)."""
        D, U, L = blocks
        up = jnp.asarray(np.append(self.parent, self.n_nodes))

        def eliminate(Dm, level):  # the nodes of one level at once: their children are eliminated
            inverse = _kernel_inverses(Dm[level]) if self.kernel else jnp.linalg.inv(Dm[level])
            X = inverse @ U[level]
            return Dm.at[up[level]].add(-L[level] @ X), (inverse, X)

        _, (inverse, X) = jax.lax.scan(eliminate, D, self.levels)
        return L, inverse, X

    def solve(self, factors, r):
        """x with J x = r (n,)."""
        L, inverse, X = factors
        n, levels = r.shape[0], jnp.asarray(self.levels)
        up = jnp.asarray(np.append(self.parent, self.n_nodes))
        rb = jnp.concatenate([r, jnp.zeros((1,), r.dtype)])[self.slots]  # (N + 1, b)

        def forward(rb, level_inverse):
            level, inverse_l = level_inverse
            y = jnp.einsum("lab,lb->la", inverse_l, rb[level])
            return rb.at[up[level]].add(-jnp.einsum("lab,lb->la", L[level], y)), y

        _, Y = jax.lax.scan(forward, rb, (levels, inverse))

        def back(xb, level_y_x):
            level, y, X_l = level_y_x
            return xb.at[level].set(y - jnp.einsum("lab,lb->la", X_l, xb[up[level]])), None

        xb, _ = jax.lax.scan(back, jnp.zeros_like(rb), (levels, Y, X), reverse=True)
        return jnp.zeros((n + 1,), r.dtype).at[self.slots[:-1]].set(xb[:-1])[:n]

    def abs_times(self, blocks, w):
        """``|J| w`` (n,) from the blocks."""
        D, U, L = blocks[0], blocks[1][:-1], blocks[2][:-1]
        n, N, parent = w.shape[0], self.n_nodes, self.parent
        wb = jnp.concatenate([w, jnp.zeros((1,), w.dtype)])[self.slots]
        out = jnp.einsum("nab,nb->na", jnp.abs(D), wb)
        out = out.at[:N].add(jnp.einsum("nab,nb->na", jnp.abs(U), wb[parent]))
        out = out.at[parent].add(jnp.einsum("nab,nb->na", jnp.abs(L), wb[:N]))
        return jnp.zeros((n + 1,), w.dtype).at[self.slots[:-1]].set(out[:-1])[:n]

    def condition(self, J):
        """The largest condition number of the diagonal blocks met when eliminating the dense J
        (numpy, (n, n)) along this tree: ∞ if one is singular."""
        J = np.pad(np.asarray(J), ((0, 1), (0, 1)))
        s, p = self.slots, self.slots[np.append(self.parent, self.n_nodes)]
        D = J[s[:, :, None], s[:, None, :]] + (self.slots == J.shape[0] - 1)[:, :, None] * np.eye(self.width)
        U, L = J[s[:, :, None], p[:, None, :]], J[p[:, :, None], s[:, None, :]]
        worst = 1.0
        for level in self.levels:
            for i in level[level < self.n_nodes]:
                worst = max(worst, np.linalg.cond(D[i]))
                if not worst < 1e15:  # singular to working precision
                    return np.inf
                D[self.parent[i]] -= L[i] @ np.linalg.solve(D[i], U[i])
        return worst

    def dense(self, blocks):
        """The dense J (n, n) assembled from the blocks (for tests against :class:`Dense`)."""
        D, U, L = blocks[0], blocks[1][:-1], blocks[2][:-1]
        n = int(self.slots.max())
        s, p = self.slots, self.slots[self.parent]
        J = jnp.zeros((n + 1, n + 1), D.dtype)
        J = J.at[s[:, :, None], s[:, None, :]].add(D)
        J = J.at[s[:-1, :, None], p[:, None, :]].add(U)
        J = J.at[p[:, :, None], s[:-1, None, :]].add(L)
        return J[:n, :n]


def _kernel_inverses(D):
    """D⁻¹ (w, b, b) of w blocks by :func:`kernel_inverse`: J⁻¹ r = B r[perm], so column perm[j] of
    J⁻¹ is column j of B."""
    B, perm = jax.vmap(kernel_inverse)(D)
    # the inverse permutation by comparisons, not jnp.argsort: XLA's CPU sort is a library call,
    # and a loop holding one cannot be one kernel (every thunk of the Newton loop then dispatched)
    b = perm.shape[1]
    index = jnp.arange(b, dtype=perm.dtype)
    inverse = jnp.sum(jnp.where(perm[:, :, None] == index[None, None, :], index[None, :, None], 0), axis=1)
    return jnp.take_along_axis(B, inverse[:, None, :], axis=2)


def block_tree(jacobians, node, max_condition=1e10, columns=None):
    """The :class:`BlockTree` of a Newton matrix, or None if its couplings are not a forest or its
    blocks cannot be eliminated without pivoting between them (for cycles of free bodies,
    :func:`bordered_tree` sets their closing rows aside).

    Two rootings of each tree: the *owners'* one decides which node a multiplier joins (the one
    farther from the owner root among the two its row couples), the *elimination's* one the order.
    The owner root is the most anchored node (the most rows of its own: a body jointed to the
    ground), so every body carries the rows of the joint towards the ground, as in a kinematic
    tree; a body that would hold more rows than it has coordinates (a crank on its ground pivot
    whose tip closes a loop) makes one node with the joint whose rows it cannot hold and the body
    across it (``_loop_nodes``). Tried in turn: (anchored, anchored), (anchored, centre) and
    (centre, centre), the centre being a node of least eccentricity (for a free-floating tree); a
    rooting is used only if its elimination passes the check (a singular block: then the dense
    solver serves). Eliminating from the centre halves a
    chain's sequential levels, but LAPACK's per-matrix cost on the CPU (~10 µs for b = 21,
    batched or not) makes it no faster, so the anchored root comes first.

    Parameters
    ----------
    jacobians : sequence of (n, n) arrays, J at a few random points: their nonzeros give the
        sparsity pattern (rows and unknowns share their indices: row r belongs with unknown r),
        and the elimination is tried on each
    node : (n,) int, the node of each unknown that has one (a body's coordinates, a rotor's
        unknowns: its master's node), −1 for the others (multipliers), which join one of the (at
        most two) nodes their row and column touch (see above)
    max_condition : every diagonal block met in the elimination must have a condition number
        below this on every J given
    columns : the :class:`Coloured` solver of the same matrices, whose pattern and colours the
        tree's Jacobian reads (:func:`coloured`, with the 3-blocks of coordinates as groups);
        default: ``coloured(jacobians, range(n))``
    """
    jacobians = [np.asarray(J) for J in jacobians]
    pattern = _symmetric_pattern(jacobians)
    node = np.asarray(node)
    if (int(node.max()) + 1 if len(node) else 0) < 2:
        return None
    graph = _node_graph(pattern, node)
    if graph is None:
        return None
    return _forest(jacobians, pattern, node, *graph, max_condition, columns)


def _symmetric_pattern(jacobians):
    """(n, n) bool, the nonzeros of any of the J, made symmetric: a multiplier touches what its row
    touches and what its column does."""
    pattern = np.any([J != 0 for J in jacobians], axis=0)
    return pattern | pattern.T


def _node_graph(pattern, node):
    """(touch, adjacency) of the unknowns' nodes: the nodes each row touches (free unknowns, node
    −1, not counted) and the couplings between nodes, directly or through a free unknown (list of
    sets); unknowns of node −2 (a bordered tree's border) are left out. None if a free unknown
    touches no node."""
    n, N = len(node), int(node.max()) + 1
    touch = [set(node[pattern[r]]) - {-1, -2} for r in range(n)]
    adjacency = [set() for _ in range(N)]
    for r in range(n):
        if node[r] >= 0:  # a node's row or unknown couples it to what it touches
            for c in touch[r] - {node[r]}:
                adjacency[node[r]].add(c)
                adjacency[c].add(node[r])
        elif node[r] == -2:
            continue
        elif not touch[r]:
            return None
        else:  # a free unknown will join one of the nodes it touches: it couples them all
            for a in touch[r]:
                adjacency[a] |= touch[r] - {a}
    return touch, adjacency


def _forest(jacobians, pattern, node, touch, adjacency, max_condition, columns):
    """:func:`block_tree`'s search once the node graph is known: None if it has a cycle."""
    n, N = len(node), len(adjacency)
    centres = _centres(adjacency)
    if centres is None:
        return None  # a cycle
    own = np.zeros(N, int)  # rows of free unknowns that touch one node only
    for r in np.flatnonzero(node < 0):
        if len(touch[r]) == 1:
            own[next(iter(touch[r]))] += 1
    anchored = [max(_component(adjacency, c), key=lambda a: (own[a], a == c)) for c in centres]
    columns = coloured(jacobians, np.arange(n)) if columns is None else columns  # read alike by any rooting
    for owners, roots in ((anchored, anchored), (anchored, centres), (centres, centres)):
        tree = _rooted(pattern, node, touch, adjacency, owners, roots, columns)
        if tree is not None and all(tree.condition(J) <= max_condition for J in jacobians):
            return tree
    return None


def bordered_tree(jacobians, node, max_condition=1e10, columns=None):
    """The :class:`BorderedTree` of a Newton matrix whose node graph has cycles that no ground
    closes (a ring of free bodies), or None.

    A spanning forest of the node graph is grown coupling by coupling, a coupling being all that
    joins one set of nodes: the free unknowns (multipliers) whose rows touch just these nodes (a
    joint's rows) and the direct couplings between them (a spring; the terms Gᵀλ of a joint's rows
    bilinear in two bodies' coordinates, as a revolute joint's axis rows). Those with direct
    couplings come first, then the others in the order of their first unknown; a coupling whose
    nodes the forest already connects closes a cycle, and its free unknowns become the *border* (a
    loop's closing joint: 3 unknowns for a spherical one). A cycle closed by a direct coupling has
    no multipliers to set aside: one of its nodes is set aside instead, its unknowns and every
    free unknown that touches it joining the border (a body with its joints' rows, ~30
    unknowns), and the forest is grown again without it. None when there is no border (the
    couplings are a forest: :func:`block_tree` decides), when the border would hold more than
    half of the unknowns, when the rest is no forest :func:`block_tree`'s search accepts, or when
    the Schur complement S of the border is singular or ill-conditioned (its condition number
    above ``max_condition`` on some J given). Parameters as :func:`block_tree`'s."""
    jacobians = [np.asarray(J) for J in jacobians]
    pattern = _symmetric_pattern(jacobians)
    node = np.asarray(node)
    n, N = len(node), int(node.max()) + 1 if len(node) else 0
    if N < 2 or _node_graph(pattern, node) is None:
        return None
    aside = set()  # nodes set aside into the border
    while True:
        border, closing = _closing_unknowns(pattern, node, aside)
        if closing is None:
            break
        aside.add(closing)
    if not border or 2 * len(border) > n:
        return None
    border = np.array(sorted(border))
    cut = pattern.copy()
    cut[border, :] = cut[:, border] = False
    inner = node.copy()
    inner[border] = -2  # in no node
    kept = inner >= 0
    inner[kept] = np.unique(inner[kept], return_inverse=True)[1]  # the nodes left, numbered anew
    graph = _node_graph(cut, inner)
    if graph is None:
        return None
    columns = coloured(jacobians, np.arange(n)) if columns is None else columns  # of the full pattern
    tree = _forest([np.where(cut, J, 0.0) for J in jacobians], cut, inner, *graph, max_condition, columns)
    if tree is None:
        return None
    wide = columns.pattern
    rest = np.ones(n, bool)
    rest[border] = False
    solver = BorderedTree(tree=tree, border=border, reads_b=wide[:, border] & rest[:, None],
                          reads_c=wide[border, :] & rest[None, :], reads_e=wide[np.ix_(border, border)])
    if not all(solver.condition(J) <= max_condition for J in jacobians):
        return None
    return solver


def _closing_unknowns(pattern, node, aside):
    """(border, None): the unknowns of the nodes ``aside`` (a set), the free unknowns that touch
    them and those of the couplings that close cycles of the rest (see :func:`bordered_tree`); or
    (None, a node) to set aside too, one of a coupling with direct terms that closes a cycle."""
    N = int(node.max()) + 1
    root = np.arange(N)  # union–find of the forest's components

    def find(a):
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    border = list(np.flatnonzero(np.isin(node, list(aside))))
    couplings = {}  # the couplings between nodes: {nodes: [direct, free unknowns]}
    rr, cc = np.nonzero(pattern)
    for a, c in zip(node[rr].tolist(), node[cc].tolist()):
        if 0 <= a < c and a not in aside and c not in aside:
            couplings.setdefault(frozenset((a, c)), [True, []])[0] = True
    for r in np.flatnonzero(node == -1):
        touched = set(node[pattern[r]].tolist()) - {-1}
        if touched & aside:
            border.append(r)
        elif len(touched) > 1:
            couplings.setdefault(frozenset(touched), [False, []])[1].append(r)
    # direct couplings first: they must be in the forest; then the rest in the order of their first unknown
    for touched, (direct, rows) in sorted(couplings.items(), key=lambda item: not item[1][0]):
        components = {find(a) for a in touched}
        if len(components) == 1:  # closes a cycle
            if direct:
                return None, max(touched)
            border += rows
        for a in components:
            root[a] = find(next(iter(touched)))
    return border, None


@dataclass(frozen=True, eq=False)
class BorderedTree(_Structure):
    """A :class:`BlockTree` bordered by k unknowns that close its cycles (see the module
    docstring); built by :func:`bordered_tree`. With t the tree's unknowns and c the border's,

        J = [[A, B], [C, E]],  A = J_tt (the tree's blocks), B = J_tc (n_t, k), C = J_ct (k, n_t), E = J_cc,

    eliminated by the Schur complement of A (a bordered system): Y = A⁻¹ B by k solves along the
    tree, S = E − C Y (k, k) and its LU; then J x = r is y = A⁻¹ r_t, x_c = S⁻¹ (r_c − C y),
    x_t = y − Y x_c. O(N b³ + N b² k + n k² + k³) per factorisation, O(N b² + n k) per solve:
    linear in the nodes for a fixed border. B and C are kept as (n, k) and (k, n) with zeros in the
    border's rows and columns (the tree's vectors are of all n unknowns, zero at the border).

    Attributes
    ----------
    tree : the :class:`BlockTree` of A, over the full numbering of the unknowns (the border in no
        node's slots), whose ``colour`` (that of the full pattern) gives the probes B, C, E are read from too
    border : (k,) int, the border unknowns (indices into x)
    reads_b, reads_c, reads_e : (n, k), (k, n), (k, k) bool, the entries of B, C, E that may be nonzero
    kernel : the tree's ``kernel`` (:class:`BlockTree`), and S inverted by :func:`kernel_inverse`
        instead of LAPACK's LU
    """

    tree: BlockTree
    border: np.ndarray
    reads_b: np.ndarray
    reads_c: np.ndarray
    reads_e: np.ndarray
    kernel: bool = field(default=False, kw_only=True)
    _key: bytes = field(init=False, repr=False)

    name = "bordered tree"
    loops = True  # the border closes loops of bodies that turn against each other (Director.reuse)

    def __post_init__(self):
        if self.tree.kernel != self.kernel:
            object.__setattr__(self, "tree", replace(self.tree, kernel=self.kernel))
        super().__post_init__()

    def _arrays(self):
        return (*self.tree._arrays(), self.border, self.reads_b, self.reads_c, self.reads_e, np.asarray(self.kernel))

    @property
    def n_nodes(self):
        return self.tree.n_nodes

    @property
    def width(self):
        return self.tree.width

    @property
    def n_border(self):
        return self.border.shape[0]

    @property
    def n_colours(self):
        return self.tree.n_colours

    def largest_inverse(self, n):
        """As :meth:`Dense.largest_inverse`: a diagonal block's order or the border's, whatever n."""
        return max(self.width, self.n_border)

    def jacobian(self, residual, x):
        """The blocks of J at x: (D, U, L) of the tree (:meth:`BlockTree.jacobian`), B (n, k),
        C (k, n), E (k, k), all read from one compressed Jacobian."""
        Jx = _compressed_jacobian(residual, x, self.tree.colour)  # (probes, n): entry (colour[j], i) is J_ij
        probe = self.tree.colour[self.border]
        B = jnp.where(self.reads_b, Jx[probe].T, 0.0)
        C = jnp.where(self.reads_c, Jx[:, self.border][self.tree.colour].T, 0.0)
        E = jnp.where(self.reads_e, Jx[probe][:, self.border].T, 0.0)
        return self.tree._blocks(Jx, x.dtype), B, C, E

    def factorise(self, blocks):
        """(the tree's factors, Y = A⁻¹ B (n, k), C, the factors of S = E − C Y)."""
        tree_blocks, B, C, E = blocks
        factors = self.tree.factorise(tree_blocks)
        Y = jax.vmap(lambda b: self.tree.solve(factors, b), in_axes=1, out_axes=1)(B)
        S = E - C @ Y
        return factors, Y, C, kernel_inverse(S) if self.kernel else lu_factor(S)

    def solve(self, factors, r):
        """x with J x = r (n,)."""
        tree_factors, Y, C, schur = factors
        y = self.tree.solve(tree_factors, r)  # zero at the border
        rc = r[self.border] - C @ y
        xc = kernel_inverse_solve(schur, rc) if self.kernel else lu_solve(schur, rc)
        return (y - Y @ xc).at[self.border].set(xc)

    def abs_times(self, blocks, w):
        """``|J| w`` (n,) from the blocks."""
        tree_blocks, B, C, E = blocks
        wc = w[self.border]
        out = self.tree.abs_times(tree_blocks, w) + jnp.abs(B) @ wc
        return out.at[self.border].add(jnp.abs(C) @ w + jnp.abs(E) @ wc)

    def condition(self, J):
        """The largest condition number met when eliminating the dense J (numpy, (n, n)): the
        tree's diagonal blocks' (:meth:`BlockTree.condition`, on A) and S's; ∞ if one is singular."""
        J = np.asarray(J)
        worst = self.tree.condition(J)
        if not worst < 1e15:
            return np.inf
        c = self.border
        t = np.setdiff1d(np.arange(J.shape[0]), c)
        S = J[np.ix_(c, c)] - J[np.ix_(c, t)] @ np.linalg.solve(J[np.ix_(t, t)], J[np.ix_(t, c)])
        worst = max(worst, np.linalg.cond(S))
        return worst if worst < 1e15 else np.inf

    def dense(self, blocks):
        """The dense J (n, n) assembled from the blocks (for tests against :class:`Dense`)."""
        tree_blocks, B, C, E = blocks
        J = self.tree.dense(tree_blocks)
        c = self.border
        return J.at[:, c].add(B).at[c, :].add(C).at[c[:, None], c[None, :]].add(E)


def _rooting(adjacency, roots):
    """(parent, depth, breadth-first order) of the forest rooted at ``roots`` (parent N for a root)."""
    N = len(adjacency)
    parent, depth, bfs = np.full(N, N), np.zeros(N, int), []
    for root in roots:
        queue = deque([root])
        while queue:
            a = queue.popleft()
            bfs.append(a)
            for c in adjacency[a] - {parent[a]}:
                parent[c], depth[c] = a, depth[a] + 1
                queue.append(c)
    return parent, depth, bfs


def _component(adjacency, start):
    seen, queue = {start}, deque([start])
    while queue:
        for c in adjacency[queue.popleft()] - seen:
            seen.add(c)
            queue.append(c)
    return sorted(seen)


def _rooted(pattern, node, touch, adjacency, owners, roots, columns):
    """The BlockTree of the forest eliminated towards ``roots`` (one per tree), its free unknowns
    joining the node farthest from ``owners`` (one per tree) among those they touch, or a loop's
    joint and bodies one node (``_loop_nodes``); or None."""
    n = len(node)
    _, depth, _ = _rooting(adjacency, owners)
    node, relabel = _loop_nodes(node, touch, depth)
    N, roots = int(node.max()) + 1, list(dict.fromkeys(relabel[roots]))
    adjacency = [set() for _ in range(N)]
    rr, cc = np.nonzero(pattern)
    for a, c in zip(node[rr], node[cc]):
        if a != c:
            adjacency[a].add(c)
    if _centres(adjacency) is None:
        return None  # rows of their own closed a cycle (two joints between the same bodies)
    parent, _, bfs = _rooting(adjacency, roots)
    # every coupling joins a node to itself, its parent or a child
    rr, cc = np.nonzero(pattern)
    a, c = node[rr], node[cc]
    parent_ext = np.append(parent, N)
    if not np.all((a == c) | (parent_ext[a] == c) | (parent_ext[c] == a)):
        return None
    members = [np.flatnonzero(node == k) for k in range(N)]
    b = max(len(m) for m in members)
    slots = np.full((N + 1, b), n)
    for k, m in enumerate(members):
        slots[k, :len(m)] = m
    height = np.zeros(N, int)  # 0 for leaves, 1 + the highest child's otherwise
    for k in bfs[::-1]:
        if parent[k] < N:
            height[parent[k]] = max(height[parent[k]], height[k] + 1)
    groups = [np.flatnonzero(height == h) for h in range(height.max() + 1)]
    levels = np.full((len(groups), max(len(g) for g in groups)), N)
    for h, g in enumerate(groups):
        levels[h, :len(g)] = g
    # which entries of the blocks D (node, node), U (node, parent), L (parent, node) may be nonzero
    # (none in an empty slot n, so none of the dummy node's, whose parent is itself)
    wide = np.pad(columns.pattern, ((0, 1), (0, 1)))
    up = slots[np.append(parent, N)]
    reads = np.stack([wide[slots[:, :, None], slots[:, None, :]], wide[slots[:, :, None], up[:, None, :]],
                      wide[up[:, :, None], slots[:, None, :]]])
    return BlockTree(slots=slots, parent=parent, levels=levels, colour=columns.colour, reads=reads,
                     loops=bool(len(relabel) > N))


def _loop_nodes(node, touch, depth):
    """((n,) the node of every unknown, (N,) each given node's new one). A free unknown (a
    multiplier, node −1) joins the node farthest (by ``depth``) among those its row ``touch`` es; but
    a node that would then hold more multiplier rows than it has unknowns of its own (12 for a
    body) has a singular diagonal block — a crank on its ground pivot whose tip also closes a loop
    — and then the largest set of its rows that touch other nodes (a loop-closing joint's) and the
    nodes they touch become one node, until no node holds more rows than it has unknowns. A chain
    of loops closed through the ground (the N-four-bar, a slider-crank) stays a chain of nodes,
    each a loop's closing joint with the two bodies it joins."""
    node = node.copy()
    N = int(node.max()) + 1
    unknowns = np.bincount(node[node >= 0], minlength=N)
    free = np.flatnonzero(node == -1)  # a bordered tree's border (node −2) joins no node
    inside = node != -2
    node[free] = [max(touch[r], key=lambda a: depth[a]) for r in free]
    root = np.arange(N)  # union–find of the merged nodes

    def find(a):
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    while True:
        merged = np.array([find(a) for a in range(N)])
        held = np.bincount(merged[node[free]], minlength=N)
        own = np.bincount(merged, weights=unknowns, minlength=N)
        joined = False
        for k in np.flatnonzero(held > own):
            groups = {}
            for r in free[merged[node[free]] == k]:
                touched = frozenset(merged[list(touch[r])])
                if len(touched) > 1:
                    groups.setdefault(touched, []).append(r)
            if groups:
                for a in max(groups, key=lambda touched: len(groups[touched])):
                    root[find(a)] = k
                joined = True
        if not joined:
            break
    merged = np.array([find(a) for a in range(N)])
    relabel = np.unique(merged, return_inverse=True)[1]
    if inside.all():
        return relabel[merged[node]], relabel
    return np.where(inside, relabel[merged[np.where(inside, node, 0)]], -1), relabel


def _centres(adjacency):
    """One centre per tree of a forest (adjacency: list of sets): a node of least
    eccentricity (the middle of a longest path), so the tree rooted there is as shallow as it can
    be; None if the graph has a cycle."""
    N = len(adjacency)
    if sum(map(len, adjacency)) // 2 != N - sum(1 for _ in _components(adjacency)):
        return None  # not a forest: a forest of k trees has N − k edges
    centres = []
    for component in _components(adjacency):
        u = _rooting(adjacency, [component[0]])[2][-1]  # the last node reached is a farthest one
        parent, _, bfs = _rooting(adjacency, [u])
        path = [bfs[-1]]
        while parent[path[-1]] < N:
            path.append(parent[path[-1]])
        centres.append(path[len(path) // 2])
    return centres


def _components(adjacency):
    """The connected components (sorted node lists) of a graph."""
    done = set()
    for start in range(len(adjacency)):
        if start not in done:
            component = _component(adjacency, start)
            done |= set(component)
            yield component
