"""Animation and frames (issue 7): the pictures show the solution's geometry."""

import numpy as np
import pytest
from PIL import Image

import conserve as cs
from conserve import problems
from conserve.results.animation import Scene, draw, save_frame


@pytest.fixture(scope="module")
def crane():
    return cs.simulate(problems.RotaryCrane().system("hybrid"), 1.0, 1e-2)


def test_gif_has_the_requested_frames(crane, tmp_path):
    crane.animate(tmp_path / "crane.gif", frames=12)
    with Image.open(tmp_path / "crane.gif") as gif:
        assert gif.n_frames == 12
    with pytest.raises(ValueError, match=".gif or .mp4"):
        crane.animate(tmp_path / "crane.avi")


def test_drawn_geometry_is_the_solution(crane):
    """Body-frame arrows start at the centre along the directors; the rope joins the boom tip
    and the load; the spin marker sits on the drum's circle at its spin angle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(crane) - 1
    scene = Scene(crane, [0, k])
    fig = plt.figure()
    drawn = draw(scene, 1, fig.add_subplot(projection="3d"))
    plt.close(fig)
    boom = crane["boom"]
    for i, (start, end) in enumerate(drawn["frames"]["boom"]):
        np.testing.assert_allclose(start, boom.position[k], atol=1e-14)
        np.testing.assert_allclose(end - start, scene.arrow * boom.rotation[k][:, i], atol=1e-14)
    name, kind, tip, load = next(link[:4] for link in scene.links if link[1] == "rope")
    np.testing.assert_allclose(tip[1], boom.position[k] + boom.rotation[k] @ [1.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(load[1], crane["load"].position[k], atol=1e-14)
    centre, axis, marker, e1, e2, radius = scene.rotors["drum"]
    offset = marker[1] - centre[1]
    assert abs(np.linalg.norm(offset) - radius) <= 1e-12 and abs(offset @ axis[1]) <= 1e-12
    angle = np.arctan2(offset @ e2[1], offset @ e1[1])
    assert abs(np.angle(np.exp(1j * (angle - crane.rotor("drum").angle[k])))) <= 1e-12


def test_frame_png_and_loaded_solutions(crane, tmp_path):
    crane.save(tmp_path / "run.npz")
    path = save_frame(cs.Solution.load(tmp_path / "run.npz"), tmp_path / "frame.png", time=0.5)
    assert path.stat().st_size > 10_000
