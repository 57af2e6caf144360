"""docs/guide/extending.rst runs as written: its code blocks are executed in order, and what the
text claims of them is asserted here — a user-defined joint and force conserve with both
energy-momentum backends, and a user-defined backend (a composition) has order 4."""

import re
from pathlib import Path

import numpy as np
import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "extending.rst"


@pytest.fixture(scope="module")
def guide():
    """The namespace after running every ``.. code-block:: python`` of the guide."""
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", GUIDE.read_text())
    assert len(blocks) == 4
    namespace = {}
    for block in blocks:
        exec(compile("\n".join(line[4:] for line in block.splitlines()), str(GUIDE), "exec"), namespace)
    return namespace


def test_user_joint_and_force_conserve_with_both_backends(guide):
    runs = guide["runs"]
    for backend, sol in runs.items():
        energy = sol.energy.total
        assert np.max(np.abs(energy - energy[0])) <= 1e-12 * abs(energy[0]), backend
        J = sol.angular_momentum[:, 2]  # the system is symmetric about the vertical axis
        assert np.max(np.abs(J - J[0])) <= 1e-12 * np.max(sol.diagnostics["angular_momentum_scale"]), backend
        assert np.max(sol.constraint_residual) <= 1e-12, backend
        assert np.ptp(sol["box"].position[:, 2]) > 0.05  # it really moves along the guide
    # the same discrete trajectory in minimal coordinates
    np.testing.assert_allclose(runs["reduced"].q, runs["director"].q, rtol=0, atol=1e-8)


def test_user_backend_is_a_conserving_fourth_order_composition(guide):
    errors = guide["errors"]
    assert 3.6 <= np.log2(errors[0] / errors[1]) <= 4.4
    sol = guide["reference"]
    assert sol.stats["backend"] == "triple jump"
    energy = sol.energy.total
    assert np.max(np.abs(energy - energy[0])) <= 1e-12 * abs(energy[0])
    assert np.max(sol.constraint_residual) <= 1e-12
