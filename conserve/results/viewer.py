"""An interactive 3-D viewer of a Solution: one self-contained HTML file for any browser.

The page draws the run with three.js (embedded, version 0.170.0, MIT licence: nothing is fetched
when it opens, no server is needed): every rigid body as its visual shapes or, without shapes, as
its equivalent inertia box, point masses as small spheres, body frames as red, green and blue
axes (d1, d2, d3), joints, ropes, springs and beam elements as lines between their points (the
geometry of ``conserve.results.animation.Scene``), rotors as a disk with a spin marker, the
paths (traces) of chosen points, a ground grid and the inertial axes. Controls: play/pause, a time
slider, playback speed, loop, an orbit camera (drag: turn, right-drag: pan, wheel: zoom). Beside
the scene: the energy-balance error relative to the energy scale and the constraint residual
over time, with a cursor at the time shown.

    sol.to_html("run.html")                              # or:
    from conserve.results.viewer import write_html
    write_html(sol, "run.html", points=["load", ("boom", (1.0, 0.0, 0.0))])
    conserve view run.npz                                # a saved run, from the command line

Visual shapes: ``sol.layout["sketch"]["shapes"]`` (optional) = {body: [shape, ...]}, the bodies'
``RigidBody(shapes=...)`` (:func:`conserve.model.bodies.shape`: kind, size, pos and rotation in
body axes about the centre of mass, rgba; checked again here by
:func:`conserve.model.bodies.checked_shape`, as a file may have been written by other means).

Inertia boxes: a box of uniform density with the body's mass and principal moments, edges
a_i = sqrt(6 (J_j + J_k - J_i) / m) along the principal axes (an edge at least 5 % of the longest,
so that rods and plates stay visible). The masses come from ``sol.layout["sketch"]["inertia"]`` =
{body: [mass kg, inertia (3, 3) kg m² in body axes]}; a body of a file saved before layouts
carried them is drawn as a cube whose edge is a tenth of the scene's extent (the page says so).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np

from ..kinematics.rotations import rotation_to_quaternion
from ..model.bodies import checked_shape
from .animation import Scene, _frames

#: the most frames a page holds by default (nodes spread evenly over the run)
MAX_FRAMES = 2000
#: the most samples per plot: longer histories are drawn as the min/max envelope of as many buckets
PLOT_SAMPLES = 2000
VENDOR = Path(__file__).resolve().parent / "vendor" / "three"
TEMPLATE = Path(__file__).resolve().parent / "viewer_template.html"
#: the playback speeds offered (multiples of real time)
SPEEDS = (0.01, 0.1, 0.25, 0.5, 1, 2, 4, 10, 100)
_PALETTE = [(0.35, 0.55, 0.80), (0.90, 0.55, 0.25), (0.40, 0.70, 0.40), (0.80, 0.40, 0.40), (0.60, 0.50, 0.75),
            (0.60, 0.45, 0.40), (0.85, 0.55, 0.75), (0.55, 0.55, 0.55), (0.75, 0.75, 0.35), (0.35, 0.75, 0.80)]


def write_html(sol, path, *, points=None, frames=None, title=None) -> Path:
    """Write an interactive 3-D viewer of ``sol`` to ``path`` (one self-contained .html file).

    Parameters
    ----------
    sol : :class:`conserve.results.solution.Solution` (from a run or ``Solution.load``)
    path : the HTML file to write (its folder must exist)
    points : the points whose paths are drawn (traces): a list of part names (their centres of
        mass) and ``(part, (x, y, z))`` pairs (a body point in m, in the body's axes); default:
        the centres of all parts; ``[]``: none
    frames : the nodes shown: an int (at most that many nodes spread evenly over the run) or a
        sequence of node indices into ``sol.t``; default: at most :data:`MAX_FRAMES` nodes
    title : the page's title; default: the file's name

    Returns
    -------
    Path : the file written. Positions are sent to the page as float32 relative to the scene's
    centre (display precision); the plots hold every node (or a min/max envelope of
    :data:`PLOT_SAMPLES` buckets of them).
    """
    path = Path(path)
    if not sol.parts:
        raise ValueError("write_html: this Solution has no parts (bodies or point masses) to draw; simulate a "
                         "System with at least one RigidBody or PointMass.")
    if len(sol) == 0:
        raise ValueError("write_html: this Solution has no nodes (sol.t is empty); there is nothing to show.")
    nodes = _node_indices(sol, frames)
    paths = _traces(sol, points, nodes)
    shapes = _checked_shapes(sol)
    scene = Scene(sol, nodes)
    origin = 0.5 * (scene.lower + scene.upper)  # positions are sent relative to it (float32 keeps the digits)
    extent = float(np.max(scene.upper - scene.lower)) or 1.0

    def rel(x):
        return _f32(np.asarray(x, float) - origin)

    masses = _mass_properties(sol)
    bodies, cubes = [], []
    for i, (name, (kind, _, n)) in enumerate(sol.parts.items()):
        colour = _PALETTE[i % len(_PALETTE)]
        rigid = n == 4
        if name in shapes:
            body_shapes = [dict(s, rgba=s["rgba"] or [*colour, 1.0]) for s in shapes[name]]
        elif not rigid:
            body_shapes = [_shape("sphere", [0.03 * extent], np.zeros(3), np.eye(3), [*colour, 1.0])]
        elif name in masses:
            body_shapes = [_inertia_box(*masses[name], [*colour, 1.0])]
        else:
            cubes.append(name)
            body_shapes = [_shape("box", [0.05 * extent] * 3, np.zeros(3), np.eye(3), [*colour, 1.0])]
        body = {"name": name, "rigid": rigid, "pos": rel(scene.centres[name]), "shapes": body_shapes}
        if rigid:
            body["quat"] = _f32(_quaternions(scene.rotations[name]))
        bodies.append(body)

    links = []
    for (_, _, a, _, b, _), (name, kind, pa, pb, ca, cb) in zip(sol.layout.get("sketch", {}).get("links", []),
                                                                scene.links):
        links.append({"name": name, "kind": kind, "a": rel(pa), "b": rel(pb),
                      "ca": None if a == "ground" else rel(ca), "cb": None if b == "ground" else rel(cb)})
    rotors = [{"name": name, "centre": rel(centre), "e1": _f32(e1), "e2": _f32(e2), "marker": rel(marker),
               "radius": float(radius)} for name, (centre, axis, marker, e1, e2, radius) in scene.rotors.items()]
    traces = [{"label": label, "pos": rel(x)} for label, x in paths]

    lower, upper = scene.lower - origin, scene.upper - origin
    grid = _nice_ceil(1.5 * max(upper[0] - lower[0], upper[1] - lower[1], 0.2 * extent))
    ground = -origin[2]  # the grid lies on the plane z = 0 when that is near the scene's bottom, else under it
    grid_z = ground if lower[2] - extent <= ground <= lower[2] + scene.arrow else lower[2]
    data = {"t": [float(x) for x in scene.t], "nodes": [int(k) for k in nodes], "extent": extent,
            "origin": origin.tolist(), "arrow": float(scene.arrow),
            "grid": {"size": grid, "divisions": 20, "centre": [0.0, 0.0, float(grid_z)]},
            "bodies": bodies, "links": links, "rotors": rotors, "traces": traces, "plots": _plots(sol),
            "info": _info(sol, nodes, cubes), "speeds": list(SPEEDS), "autoplay": True,
            "speed": _default_speed(float(sol.t[-1] - sol.t[0])), "decimals": _decimals(scene.t)}
    title = path.stem if title is None else str(title)
    orbit = (VENDOR / "OrbitControls.js").read_text(encoding="utf-8")
    if len(re.findall(r"from\s*['\"]three['\"]", orbit)) != 1:
        raise RuntimeError(f"write_html: {VENDOR / 'OrbitControls.js'} does not import from 'three' exactly once; "
                           "the page rewrites that import (see vendor/three/README.md).")
    fill = {"TITLE": html.escape(title), "DATA": _script_json(data),
            "THREE": _script_json((VENDOR / "three.module.min.js").read_text(encoding="utf-8")),
            "ORBIT": _script_json(orbit)}
    page = re.sub(r"\{\{(TITLE|DATA|THREE|ORBIT)\}\}", lambda m: fill[m[1]], TEMPLATE.read_text(encoding="utf-8"))
    path.write_text(page, encoding="utf-8")
    return path


def _node_indices(sol, frames):
    """The node indices shown (sorted, unique) from the ``frames`` argument of :func:`write_html`."""
    n = len(sol)
    if frames is None:
        return _frames(sol, MAX_FRAMES)
    if np.ndim(frames) == 0:
        if int(frames) != frames or frames < 1:
            raise ValueError(f"write_html: frames={frames!r}; give a number of frames ≥ 1 or a list of node indices.")
        return _frames(sol, int(frames))
    nodes = np.asarray(frames)
    if nodes.ndim != 1 or nodes.size == 0 or not np.issubdtype(nodes.dtype, np.integer):
        raise ValueError(f"write_html: frames must be a number of frames or a non-empty list of integer node indices "
                         f"into sol.t (0 … {n - 1}); got {frames!r}.")
    bad = nodes[(nodes < -n) | (nodes >= n)]
    if bad.size:
        raise ValueError(f"write_html: node indices {bad.tolist()} are outside the run's {n} nodes (0 … {n - 1}).")
    return np.unique(nodes % n)


def _nice_ceil(x):
    """The least of 1, 2, 5 × 10^k at or above x > 0."""
    k = np.floor(np.log10(x))
    return float(next(m * 10**k for m in (1, 2, 5, 10) if m * 10**k >= x * (1 - 1e-12)))


def _decimals(t):
    """Decimals that tell the frames' times (s) apart: 3 at least, up to 9."""
    steps = np.diff(t)
    step = steps[steps > 0].min() if np.any(steps > 0) else 1.0
    return int(np.clip(np.ceil(-np.log10(step)) + 1, 3, 9))


def _default_speed(duration):
    """The playback speed a page starts at (a multiple of real time, one of SPEEDS) for a run of ``duration`` s:
    real time, slower for runs shorter than 3 s, faster for runs longer than 2 minutes."""
    if duration < 3:
        return max((s for s in SPEEDS if s <= 1 and duration / s >= 3), default=SPEEDS[0])
    return min((s for s in SPEEDS if s >= 1 and duration / s <= 120), default=SPEEDS[-1])


def _f32(a) -> str:
    """An array as base64 of its little-endian float32 bytes (the page reads it as a Float32Array)."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def _script_json(value) -> str:
    """JSON safe to place inside a <script> element: every "<" written as \\u003c (JSON, and JavaScript, read
    it back as "<"), so no "</script>" or "<!--" in the data can end the element."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _quaternions(R):
    """(F, 4) unit quaternions (x, y, z, w) (three.js's order) of rotation matrices R (F, 3, 3)."""
    return rotation_to_quaternion(R)[..., [1, 2, 3, 0]]


def _shape(kind, size, pos, rotation, rgba, vertices=None, faces=None):
    shape = {"kind": kind, "size": [float(s) for s in size], "pos": np.asarray(pos, float).tolist(),
             "quat": _quaternions(np.asarray(rotation, float)[None])[0].tolist(),
             "rgba": None if rgba is None else [float(c) for c in rgba]}
    if kind == "mesh":
        shape["vertices"], shape["faces"] = _f32(vertices), base64.b64encode(
            np.ascontiguousarray(faces, dtype="<u4").tobytes()).decode("ascii")
    return shape


def _mass_properties(sol):
    """{rigid body: (mass kg, inertia (3, 3) kg m² in body axes)} from ``sol.layout["sketch"]["inertia"]``
    (files saved before the layout carried them have none)."""
    return {name: (float(m), np.asarray(J, float)) for name, (m, J) in
            sol.layout.get("sketch", {}).get("inertia", {}).items()}


def _inertia_box(mass, inertia, rgba):
    """The box of uniform density with this mass (kg) and inertia tensor (3, 3) (kg m², body axes): a shape
    along the principal axes, edges a_i = sqrt(6 (J_j + J_k - J_i) / m), each ≥ 5 % of the longest."""
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0:
        axes[:, 2] *= -1
    edges = np.sqrt(np.maximum(6.0 * (moments.sum() - 2 * moments) / mass, 0.0))
    edges = np.maximum(edges, 0.05 * edges.max()) if edges.max() > 0 else np.full(3, 0.1)
    return _shape("box", 0.5 * edges, np.zeros(3), axes, rgba)


def _checked_shapes(sol):
    """{body: [shape for the page]} from ``sol.layout["sketch"]["shapes"]``, each checked (module docstring)."""
    given = sol.layout.get("sketch", {}).get("shapes", {})
    shapes = {}
    for body, specs in given.items():
        if body not in sol.parts:
            raise ValueError(f"write_html: layout['sketch']['shapes'] names a body {body!r} that is not in this "
                             f"Solution; parts: {sorted(sol.parts)}.")
        if isinstance(specs, dict):
            specs = [specs]
        shapes[body] = [_checked_shape(body, i, spec) for i, spec in enumerate(specs)]
    return shapes


def _checked_shape(body, i, spec):
    c = checked_shape(spec, f"write_html: shape {i} of body {body!r}")
    return _shape(c["kind"], c["size"], c["pos"], c["rotation"], c.get("rgba"), c.get("vertices"), c.get("faces"))


def _traces(sol, points, nodes):
    """[(label, (F, 3) world path)] of the ``points`` argument of :func:`write_html` at the nodes."""
    if points is None:
        points = list(sol.parts)
    traces = []
    for entry in points:
        if isinstance(entry, str):
            name, X = entry, np.zeros(3)
        elif isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str):
            name, X = entry[0], np.asarray(entry[1], float)
        else:
            raise ValueError(f"write_html: points entry {entry!r} is neither a part name nor a (part, (x, y, z)) "
                             "pair.")
        if name not in sol.parts:
            raise ValueError(f"write_html: no part named {name!r} for a trace; parts: {sorted(sol.parts)}.")
        if X.shape != (3,) or not np.all(np.isfinite(X)):
            raise ValueError(f"write_html: the point of {name!r} must be 3 finite numbers (m, body axes), got "
                             f"{entry[1]!r}.")
        part = sol[name]
        if part.rigid:
            x = part.position[nodes] + part.rotation[nodes] @ X
        elif np.any(X != 0):
            raise ValueError(f"write_html: part {name!r} is a {part.kind}: its only point is (0, 0, 0), got "
                             f"{X.tolist()}.")
        else:
            x = part.position[nodes]
        traces.append((name if isinstance(entry, str) else f"{name} {tuple(X.tolist())}", x))
    return traces


def _envelope(t, y):
    """(t, lo, hi) of a history: itself, or the min and max of PLOT_SAMPLES buckets of it (non-finite values
    are NaN in both, drawn as gaps)."""
    y = np.asarray(y, float)
    if len(y) <= 2 * PLOT_SAMPLES:
        return t, y, y
    edges = np.linspace(0, len(y), PLOT_SAMPLES + 1).astype(int)
    with np.errstate(invalid="ignore"):
        lo = np.minimum.reduceat(y, edges[:-1])
        hi = np.maximum.reduceat(y, edges[:-1])
    return t[edges[:-1]], lo, hi


def _plots(sol):
    """The two plots: the energy-balance error relative to the energy scale and the constraint residual."""
    scale = sol.energy_scale
    error = sol.energy_balance_error
    balance = bool(sol.work.size or sol.dissipation.size)
    what = "E − E₀ − (W − D)" if balance else "E − E₀"
    relative = scale > 0
    t, lo, hi = _envelope(sol.t, error / scale if relative else error)
    energy = {"id": "energy-plot", "colour": "#1f77b4",
              "title": f"energy {'balance ' if balance else ''}error ({'relative' if relative else 'J'})",
              "subtitle": f"({what}) / {scale:.3g} J, the energy scale" if relative else f"{what} in J",
              "t": _f32(t), "lo": _f32(lo), "hi": _f32(hi)}
    t, lo, hi = _envelope(sol.t, sol.constraint_residual)
    residual = {"id": "residual-plot", "colour": "#2ca02c", "title": "constraint residual",
                "subtitle": "max |g| over the constraint rows (m or 1)", "t": _f32(t), "lo": _f32(lo), "hi": _f32(hi)}
    return [energy, residual]


def _info(sol, nodes, cubes):
    """Lines of text under the plots: the run, its conservation, what the picture shows."""
    s = sol.stats
    steps = s.get("steps", len(sol) - 1)
    lines = [f"{steps} steps to t = {sol.t[-1]:.6g} s, backend {s.get('backend', '?')}, "
             f"{sol.layout.get('degrees_of_freedom', '?')} degrees of freedom",
             f"{len(nodes)} of {len(sol)} nodes shown"]
    scale = sol.energy_scale
    if len(sol):
        err = float(np.max(np.abs(sol.energy_balance_error)))
        lines.append(f"max |energy balance error| = {err:.2e} J" + (f" = {err / scale:.2e} of {scale:.3g} J"
                                                                    if scale > 0 else ""))
        lines.append(f"max constraint residual = {float(np.max(sol.constraint_residual)):.2e}")
    if cubes:
        lines.append(f"drawn as cubes (no masses or shapes in this file): {', '.join(cubes)}")
    lines.append("mouse: drag to turn, right-drag to pan, wheel to zoom; space: play/pause; ←/→: one frame")
    return lines
