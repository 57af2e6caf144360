"""The one place where conserve switches jax to float64.

Conservation to 1e-10 is impossible in float32 (machine epsilon 1.2e-7), so importing
`conserve` enables jax's x64 mode process-wide before any array is created.
"""

import jax

jax.config.update("jax_enable_x64", True)


def x64_enabled() -> bool:
    """True when jax creates float64 arrays by default."""
    return bool(jax.config.jax_enable_x64)
