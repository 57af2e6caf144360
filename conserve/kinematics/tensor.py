"""Contractions of the small tensors that element kernels work with (3-vectors, 3 × 3 and 4 × 4
blocks, stacked over elements): :func:`contract` is ``jnp.einsum`` computed by broadcast products
and sums.

XLA's CPU compiler makes every ``dot_general`` a kernel of its own, fed by its own gathers, while
products and sums fuse with the gathers and arithmetic around them into few kernels. For
element-sized operands that is faster to run and to compile. Contractions with more than
:data:`LIMIT` product terms stay ``jnp.einsum``: vmapped over the probes of a Newton matrix, a
batched matrix product then pays off. The same holds for ``@`` on a link's or an element's 3 × 3
blocks inside a ``vmap`` (each a batched ``dot_general``): the reduced backend's link maps
(:mod:`conserve.backends.null_space`) use :func:`contract` instead. (Measurements:
benchmarks/results/defaults.md, sections ``contract`` and ``LIMIT``.)
"""

from __future__ import annotations

import math

import jax.numpy as jnp

#: Largest number of product terms (the product of all index sizes) contracted by broadcasting.
LIMIT = 128


def contract(subscripts: str, *operands):
    """``jnp.einsum(subscripts, *operands)`` for explicit subscripts ("ij,jk->ik", no ellipsis),
    as one broadcast product summed over the contracted indices (see the module docstring)."""
    inputs, output = subscripts.replace(" ", "").split("->")
    inputs = inputs.split(",")
    sizes = {c: n for term, x in zip(inputs, operands) for c, n in zip(term, x.shape)}
    letters = list(dict.fromkeys("".join(inputs) + output))
    if math.prod(sizes[c] for c in letters) > LIMIT:
        return jnp.einsum(subscripts, *operands)
    product = None
    for term, x in zip(inputs, operands):
        order = sorted(range(len(term)), key=lambda i: letters.index(term[i]))
        x = jnp.transpose(x, order).reshape([sizes[c] if c in term else 1 for c in letters])
        product = x if product is None else product * x
    summed = tuple(i for i, c in enumerate(letters) if c not in output)
    result = product.sum(axis=summed) if summed else product
    kept = [c for c in letters if c in output]
    return jnp.transpose(result, [kept.index(c) for c in output])
