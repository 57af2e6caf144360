"""conserve.kinematics.tensor.contract: jnp.einsum by broadcast products and sums, for every
contraction the package makes with it (and one above its size limit, which falls back)."""

import jax.numpy as jnp
import numpy as np
import pytest

from conserve.kinematics.tensor import LIMIT, contract

SIZES = {"n": 3, "l": 2, "i": 3, "j": 3, "k": 3, "c": 3, "d": 3, "z": 2}
CASES = ["ni,nij->nj", "nij,njc->nic", "nj,jkl,nklc->nc", "nk,kij->nij", "nij,nic,njc->n", "lij,lkj,lk->li",
         "lki,lk->li", "lij,lkj->lki", "lij,lj->li", "lij,ljk->lik", "lij,ljkz->likz", "lij,ljz->liz",
         "lzk,lk->lz", "nij,nijk->nk", "nij,nj->ni", "nij,ni->nj", "nij,nkj->nki", "nic,nid->ncd"]


@pytest.mark.parametrize("subscripts", CASES)
def test_contract_is_einsum(subscripts):
    rng = np.random.default_rng(0)
    operands = [jnp.asarray(rng.normal(size=[SIZES[c] for c in term]))
                for term in subscripts.split("->")[0].split(",")]
    expected = jnp.einsum(subscripts, *operands)
    got = contract(subscripts, *operands)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14 * float(jnp.max(jnp.abs(expected))))


def test_large_contractions_fall_back_to_einsum():
    a = jnp.ones((8, 8, 8))
    assert 8**4 > LIMIT
    np.testing.assert_array_equal(contract("nij,njk->nik", a, a), jnp.einsum("nij,njk->nik", a, a))
