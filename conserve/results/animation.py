"""3-D pictures and animations of a Solution with matplotlib (post-processing only).

Drawn per frame: every rigid body as its body frame (the directors d1, d2, d3 as red, green,
blue arrows of a common length) at its centre of mass, point masses as dots, joints as markers
at their attachment point with a line from each part's centre to it (a stick figure), ropes,
springs and beam elements as lines between their points, rotors as a circle normal to their axis with a marker
turning with the spin angle, and trails of the centres. The geometry comes from the Solution's
layout (``layout["sketch"]``, see :class:`conserve.model.system.Layout`), so a loaded file can
be animated too.

    sol.animate("run.gif")                         # or .mp4 where ffmpeg is installed
    import conserve.results.animation                      # (not imported by ``import conserve``: matplotlib)
    conserve.results.animation.save_frame(sol, "run.png", time=1.0)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np


def _rotation(sol, part, frames):
    """(F, 3, 3) rotation of ``part`` at the frames (identity for the ground)."""
    if part == "ground":
        return np.broadcast_to(np.eye(3), (len(frames), 3, 3))
    return sol[part].rotation[frames]


def _centre(sol, part, frames):
    return np.zeros((len(frames), 3)) if part == "ground" else sol[part].position[frames]


def _world(sol, part, point, frames):
    """(F, 3) world position of the body point ``point`` (3,) of ``part``."""
    kind = "ground" if part == "ground" else sol.parts[part][0]
    if kind == "PointMass":
        return _centre(sol, part, frames)
    return _centre(sol, part, frames) + _rotation(sol, part, frames) @ np.asarray(point, float)


class Scene:
    """The world geometry of a Solution at selected frames (all arrays over the F frames).

    Attributes
    ----------
    frames : (F,) node indices;  t : (F,) s
    centres : {part: (F, 3)} centres of mass, m;  rotations : {rigid body: (F, 3, 3)}
    links : [(name, kind, (F, 3) point on a, (F, 3) point on b, (F, 3) centre a, (F, 3) centre b)]
    rotors : {name: ((F, 3) centre, (F, 3) axis, (F, 3) spin marker, (F, 3) e1, (F, 3) e2 spanning the
        rotor's plane, radius m)}
    arrow : length of the body-frame arrows, m (0.15 of the scene's extent)
    """

    def __init__(self, sol, frames):
        self.frames = np.asarray(frames)
        self.t = sol.t[self.frames]
        sketch = sol.layout.get("sketch", {"links": [], "rotors": {}})
        self.centres = {name: sol[name].position[self.frames] for name in sol.parts}
        self.rotations = {name: sol[name].rotation[self.frames] for name, (kind, _, n) in sol.parts.items()
                          if n == 4}
        self.links = []
        for name, kind, a, at_a, b, at_b in sketch["links"]:
            self.links.append((name, kind, _world(sol, a, at_a, self.frames), _world(sol, b, at_b, self.frames),
                               _centre(sol, a, self.frames), _centre(sol, b, self.frames)))
        rotors = []
        for name, (master, axis, offset, radius) in sketch["rotors"].items():
            R = _rotation(sol, master, self.frames)
            axis = np.asarray(axis, float)
            e1 = np.cross(axis, np.eye(3)[np.argmin(np.abs(axis))])
            e1 /= np.linalg.norm(e1)
            rotors.append((name, _world(sol, master, offset, self.frames), R @ axis, R @ e1,
                           R @ np.cross(axis, e1), radius, sol.rotor(name).angle[self.frames]))
        points = ([c for c in self.centres.values()] + [p for link in self.links for p in link[2:4]]
                  + [r[1] for r in rotors])
        lo, hi = np.min([p.min(0) for p in points], 0), np.max([p.max(0) for p in points], 0)
        extent = float(np.max(hi - lo))
        self.arrow = 0.15 * extent if extent > 1e-3 else 0.3  # a single body barely moving: 0.3 m
        self.rotors = {}
        for name, centre, a, e1, e2, radius, angle in rotors:
            radius = radius or 0.5 * self.arrow
            marker = centre + radius * (np.cos(angle)[:, None] * e1 + np.sin(angle)[:, None] * e2)
            self.rotors[name] = (centre, a, marker, e1, e2, radius)
            points += [centre - radius, centre + radius]
        points += [c + s * self.arrow for c in self.centres.values() for s in (-1, 1)]
        self.lower = np.min([p.min(0) for p in points], 0)
        self.upper = np.max([p.max(0) for p in points], 0)


def _limits(ax, scene):
    centre = 0.5 * (scene.lower + scene.upper)
    half = 0.55 * float(np.max(scene.upper - scene.lower)) or 1.0
    for axis, c in zip("xyz", centre):
        getattr(ax, f"set_{axis}lim")(c - half, c + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")


def draw(scene: Scene, k: int, ax, trails=True):
    """Draw frame k (index into ``scene.frames``) on the 3-D axes ``ax``; returns the artists:
    {"frames": {body: [3 arrows (start (3,), end (3,))]}, ...} for inspection in tests."""
    ax.cla()
    _limits(ax, scene)
    drawn = {"frames": {}}
    for name, c in scene.centres.items():
        ax.scatter(*c[k], color="k", s=12 if name in scene.rotations else 30)
        if trails and k > 0:
            ax.plot(*c[:k + 1].T, color="0.6", lw=0.8)
        if name in scene.rotations:
            arrows = []
            for i, colour in enumerate("rgb"):
                end = c[k] + scene.arrow * scene.rotations[name][k][:, i]
                ax.plot(*np.stack([c[k], end]).T, color=colour, lw=2)
                arrows.append((c[k], end))
            drawn["frames"][name] = arrows
            ax.text(*c[k], f" {name}", fontsize=7)
    for name, kind, pa, pb, ca, cb in scene.links:
        if kind == "joint":
            ax.plot(*np.stack([ca[k], pa[k], cb[k]]).T, color="0.3", lw=1.2)
            ax.scatter(*pa[k], color="tab:orange", s=25, marker="o")
        else:  # the attachment points belong to the parts (a boom's tip): stick lines, then the rope
            for centre, point in ((ca, pa), (cb, pb)):
                ax.plot(*np.stack([centre[k], point[k]]).T, color="0.3", lw=1.2)
            style = {"rope": dict(color="tab:brown", lw=1.5), "spring": dict(color="tab:purple", lw=1.0, ls="--"),
                     "beam": dict(color="tab:blue", lw=2.5)}
            ax.plot(*np.stack([pa[k], pb[k]]).T, **style[kind])
    phi = np.linspace(0.0, 2 * np.pi, 49)
    for name, (centre, axis, marker, e1, e2, radius) in scene.rotors.items():
        ring = centre[k] + radius * (np.cos(phi)[:, None] * e1[k] + np.sin(phi)[:, None] * e2[k])
        ax.plot(*ring.T, color="tab:cyan", lw=1.5)
        ax.plot(*np.stack([centre[k], marker[k]]).T, color="tab:cyan", lw=1.0)
        ax.scatter(*marker[k], color="tab:red", s=18)
    ax.set_title(f"t = {scene.t[k]:.3f} s")
    return drawn


def _frames(sol, frames):
    n = len(sol)
    return np.unique(np.linspace(0, n - 1, min(frames, n)).round().astype(int))


def animate(sol, path, *, frames=100, fps=20, trails=True, dpi=90):
    """Write an animation of ``sol`` to ``path`` (.gif with Pillow, .mp4 with ffmpeg), using
    ``frames`` nodes spread evenly over the run. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FFMpegWriter, FuncAnimation, PillowWriter

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        writer = PillowWriter(fps=fps)
    elif suffix == ".mp4":
        if shutil.which("ffmpeg") is None:
            raise RuntimeError(f"animate: {path} needs ffmpeg for MP4, which is not installed; write a .gif.")
        writer = FFMpegWriter(fps=fps)
    else:
        raise ValueError(f"animate: cannot write {path.name!r}; give a path ending in .gif or .mp4.")
    scene = Scene(sol, _frames(sol, frames))
    fig = plt.figure(figsize=(5.5, 5.5))
    ax = fig.add_subplot(projection="3d")
    anim = FuncAnimation(fig, lambda k: draw(scene, k, ax, trails) and [], frames=len(scene.frames))
    anim.save(path, writer=writer, dpi=dpi)
    plt.close(fig)
    return path


def save_frame(sol, path, *, time=None, trails=True, dpi=110):
    """Write the picture of the node nearest ``time`` (s; default: the last) to ``path`` (.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(sol) - 1 if time is None else int(np.argmin(np.abs(sol.t - time)))
    scene = Scene(sol, np.arange(k + 1) if trails else np.array([k]))
    fig = plt.figure(figsize=(5.5, 5.5))
    draw(scene, len(scene.frames) - 1, fig.add_subplot(projection="3d"), trails)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return Path(path)
