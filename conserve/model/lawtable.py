"""Law tables: the user laws of the elements of one kind, each distinct law evaluated once, on its
own elements, so that elements that differ only in their laws share one kind.

A kind is vectorised code over its elements (:mod:`.elements`), and a kind holding a user law
(a joint motor's, an applied load's) is static: without law tables every element with a law of
its own — even one wrapping the same function — would be a kind of its own, with its own copy of
the kind's code in the compiled step, each copy adding compilation and time per step
(measurements: benchmarks/results/defaults.md, section ``LawTable``). So assembly
(``conserve.model.terms.stack_terms``) groups the elements by their kind *without* its laws and
gives the group a :class:`LawTable` per law field (``law_fields`` of the kind's class): the
distinct laws — equal when they compute the same, :class:`~conserve.model.identity.LawHasher`
(the same function, or the same code with the same constants, as a factory makes them) — and
which elements use each. The kind's code runs once
for all its elements; each distinct law runs on its own elements only (their slice or a gather,
the law under ``jax.vmap``, the results put in element order), so a law costs in proportion to
the elements that use it. The hybrid rotors' motor laws are evaluated by a law table too
(``Model.rotor_motors``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from .identity import LawHasher


@dataclass(frozen=True)
class LawTable:
    """The laws of one kind's n elements.

    laws : the distinct laws (callables), in order of first use
    members : per law, the (sorted) indices of the elements that use it; together 0 … n − 1
    """

    laws: tuple
    members: tuple

    @classmethod
    def of(cls, laws) -> LawTable:
        """The table of the elements' laws (one per element, in element order): laws that
        compute the same (:class:`~conserve.model.identity.LawHasher`; an opaque one, whose state
        cannot be read, equals only itself) are one law."""
        keys, distinct, members = {}, [], []
        for i, law in enumerate(laws):
            hasher = LawHasher()
            hasher.add(law)
            key = ("identity", id(law)) if hasher.opaque else ("digest", hasher.hexdigest())
            if key not in keys:
                keys[key] = len(distinct)
                distinct.append(law)
                members.append([])
            members[keys[key]].append(i)
        return cls(tuple(distinct), tuple(tuple(m) for m in members))

    def vmap(self, in_axes):
        """The laws over all elements, like ``jax.vmap(law, in_axes)`` of one law: arguments with
        axis 0 (pytrees of arrays with a leading element axis n) or None (shared); returns the
        results stacked over the n elements in element order. Each law reads its elements by a
        slice where they are consecutive (a gather otherwise); the results are put in element
        order by one gather, if they are not in it already."""
        if len(self.laws) == 1:
            return jax.vmap(self.laws[0], in_axes=in_axes)

        def evaluate(*args):
            outs = []
            for law, members in zip(self.laws, self.members):
                take = _reader(members)
                mine = [a if axis is None else jax.tree.map(take, a) for a, axis in zip(args, in_axes)]
                outs.append(jax.vmap(law, in_axes=in_axes)(*mine))
            order = np.argsort(np.concatenate([np.asarray(m, dtype=np.int64) for m in self.members]))
            in_order = np.array_equal(order, np.arange(order.size))
            return jax.tree.map(lambda *o: jnp.concatenate(o) if in_order else jnp.concatenate(o)[order], *outs)

        return evaluate


def _reader(members):
    """x -> x[members] along the leading axis: a slice for consecutive members, else a gather."""
    first, n = members[0], len(members)
    if tuple(members) == tuple(range(first, first + n)):
        return lambda x: jax.lax.slice_in_dim(x, first, first + n)
    idx = np.asarray(members, dtype=np.int64)
    return lambda x: x[idx]


def without_laws(kind):
    """The kind with each of its law fields (``law_fields``) replaced by whether it holds a law:
    the kind elements share when they differ only in their laws."""
    names = getattr(type(kind), "law_fields", ())
    return replace(kind, **{f: getattr(kind, f) is not None for f in names}) if names else kind


def with_tables(lawless, kinds):
    """The kind of a group of elements (``lawless`` their :func:`without_laws`, ``kinds`` their own
    kinds in element order) with a :class:`LawTable` in each law field that holds laws."""
    names = getattr(type(lawless), "law_fields", ())
    if not names:
        return lawless
    return replace(lawless, **{f: LawTable.of([getattr(k, f) for k in kinds]) if getattr(lawless, f) else None
                               for f in names})
