import numpy as np


def relative_drift(x):
    """max_n |x_n − x_0| / |x_0| for a scalar or vector history (N+1, ...)."""
    x = np.asarray(x)
    return np.max(np.abs(x - x[0])) / np.max(np.abs(x[0]))


def fitted_order(dts, errors):
    """Slope of log(error) against log(dt) by least squares."""
    return np.polyfit(np.log(dts), np.log(errors), 1)[0]
