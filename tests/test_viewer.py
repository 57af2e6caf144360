"""The interactive 3-D viewer (conserve.results.viewer): one self-contained HTML page, driven in headless
Chromium through the DevTools protocol.

Chromium is Debian's ``chromium`` package (``apt-get install chromium``; CI's .ci/run installs it). The test
talks to it over ``--remote-debugging-pipe`` (the protocol's JSON messages, NUL-separated, on file
descriptors 3 and 4): no websocket, no Python package beyond the standard library.
"""

import base64
import dataclasses
import io
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image

import conserve as cs
from conserve import problems
from conserve.cli import main
from conserve.results.viewer import write_html

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
INSTALL = ("Chromium is not installed, and tests/test_viewer.py drives it headless to check the viewer's page. "
           "Install it: `apt-get install chromium` (Debian; `sudo` when not root; .ci/run does this in CI).")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-unsafe-swiftshader", "--use-angle=swiftshader",  # WebGL on the CPU (SwiftShader), no GPU needed
         "--window-size=1280,800", "--force-device-scale-factor=1", "--hide-scrollbars"]

ON_FDS_3_AND_4 = ("import fcntl, os, sys; a, b = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]); "
                  "os.dup2(a, 3); os.dup2(b, 4); os.execv(sys.argv[3], sys.argv[3:])")


class Browser:
    """Headless Chromium and a DevTools session on one tab: ``call(method, **params)`` returns the result;
    the protocol's events (console messages, exceptions) collect in ``events``."""

    def __init__(self, profile):
        to_chromium, self._send = os.pipe()
        self._receive, from_chromium = os.pipe()
        self.log = profile / "chromium.log"
        with open(self.log, "wb") as log:  # Chromium reads commands on fd 3 and answers on fd 4: a small Python
            # renumbers the pipes and execs it (no preexec_fn: forking this multithreaded process is unsafe)
            self.process = subprocess.Popen(
                [sys.executable, "-c", ON_FDS_3_AND_4, str(to_chromium), str(from_chromium), CHROMIUM, *FLAGS,
                 f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
                pass_fds=(to_chromium, from_chromium), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(to_chromium)
        os.close(from_chromium)
        self.messages, self.events, self._id = queue.Queue(), [], 0
        threading.Thread(target=self._read, daemon=True).start()
        tab = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=tab["targetId"], flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable")

    def _read(self):
        buffer = b""
        while chunk := os.read(self._receive, 1 << 16):
            *messages, buffer = (buffer + chunk).split(b"\0")
            for m in messages:
                self.messages.put(json.loads(m))
        self.messages.put(None)  # Chromium closed the pipe

    def call(self, method, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if getattr(self, "session", None):
            message["sessionId"] = self.session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            answer = self.messages.get(timeout=30)
            if answer is None:
                raise RuntimeError(f"Chromium exited; its log:\n{self.log.read_text(errors='replace')[-2000:]}")
            if answer.get("id") == self._id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer["result"]
            self.events.append(answer)

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def open(self, path):
        """Load a local HTML file and wait until the viewer reports it has drawn; its console errors so far."""
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 15
        while not self.evaluate("!!(window.conserveViewer && conserveViewer.ready)"):
            assert not self.errors(), self.errors()
            assert time.monotonic() < deadline, f"the viewer never drew; console: {self.errors()}"
            time.sleep(0.05)

    def errors(self):
        """Uncaught exceptions and console/log messages of level error in the page so far."""
        return ([e["params"]["exceptionDetails"] for e in self.events if e.get("method") == "Runtime.exceptionThrown"]
                + [e["params"]["args"] for e in self.events
                   if e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error"]
                + [e["params"]["entry"]["text"] for e in self.events
                   if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"])

    def requested(self):
        """The URLs the page requested so far (itself, its Blob URLs, and whatever it fetched)."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def redrawn(self):
        """Wait two animation frames (the page renders on the next one after a change)."""
        self.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    def screenshot(self, element):
        """The pixels (H, W, 3) of the element with this id, as shown."""
        box = self.evaluate(f"(r => [r.x, r.y, r.width, r.height])(document.getElementById('{element}')"
                            ".getBoundingClientRect())")
        clip = dict(zip(("x", "y", "width", "height"), box), scale=1)
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png", clip=clip)["data"])
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._send)


@pytest.fixture(scope="module")
def pendulum():
    """The spatial double pendulum (two bars, a spherical and a revolute joint, gravity): 200 steps."""
    return cs.simulate(problems.double_pendulum(), t_end=1.0, dt=5e-3)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium for the module's pages (None when it is not installed: the tests then fail)."""
    if CHROMIUM is None:
        yield None
        return
    chromium = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield chromium
    chromium.close()


def _chromium(browser):
    if browser is None:
        pytest.fail(INSTALL)
    return browser


def _rotation(elements):
    """The 3 x 3 rotation of a three.js Matrix4's (column-major) elements."""
    return np.asarray(elements, float).reshape(4, 4).T[:3, :3]


def test_page_is_self_contained_and_the_command_line_writes_it(pendulum, tmp_path):
    page = write_html(pendulum, tmp_path / "run.html").read_text(encoding="utf-8")
    assert not re.search(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=""", page, re.I), "a fetched resource"
    assert not re.search(r"""import\s*\(?\s*['"]https?:|url\(\s*['"]?https?:""", page), "a network import"
    assert page.count("<script") == 4  # the data, three.js, OrbitControls (all as text), the viewer
    pendulum.save(tmp_path / "saved.npz")
    assert main(["view", str(tmp_path / "saved.npz"), "--no-open"]) == 0
    assert "conserve-data" in (tmp_path / "saved.html").read_text(encoding="utf-8")
    assert main(["view", str(tmp_path / "saved.npz"), "-o", str(tmp_path / "elsewhere.html"), "--no-open"]) == 0
    assert (tmp_path / "elsewhere.html").stat().st_size > 500_000  # three.js is inside
    assert main(["view", str(tmp_path / "missing.npz"), "--no-open"]) == 2


def test_bad_input_is_refused_with_what_to_do(pendulum, tmp_path):
    out = tmp_path / "x.html"
    with pytest.raises(ValueError, match="no part named 'elbow'.*parts: \\['lower', 'upper'\\]"):
        write_html(pendulum, out, points=["elbow"])
    with pytest.raises(ValueError, match="only point is"):
        write_html(dataclasses.replace(pendulum, layout={**pendulum.layout, "parts": {
            **pendulum.parts, "upper": ("PointMass", 0, 1)}}), out, points=[("upper", (0, 0, 1))])
    with pytest.raises(ValueError, match="no parts"):
        write_html(dataclasses.replace(pendulum, layout={**pendulum.layout, "parts": {}}), out)
    with pytest.raises(ValueError, match="outside the run's 201 nodes"):
        write_html(pendulum, out, frames=[0, 500])
    for shapes, message in (({"arm": [{"kind": "box", "size": [1, 1, 1]}]}, "body 'arm' that is not in"),
                            ({"upper": [{"kind": "cone", "size": [1]}]}, "kind 'cone' is not one of"),
                            ({"upper": [{"kind": "capsule", "size": [0.1]}]}, "capsule needs 2 positive"),
                            ({"upper": [{"kind": "box", "size": [1, 1, 1], "rotation": np.ones((3, 3))}]},
                             "rotation must be a 3x3 rotation"),
                            ({"upper": [{"kind": "mesh", "vertices": [[0, 0, 0]], "faces": [[0, 1, 2]]}]},
                             "vertex indices 0 … 0")):
        sketch = {**pendulum.layout["sketch"], "shapes": shapes}
        with pytest.raises(ValueError, match=message):
            write_html(dataclasses.replace(pendulum, layout={**pendulum.layout, "sketch": sketch}), out)


def test_viewer_draws_plays_and_scrubs_in_chromium(pendulum, browser, tmp_path):
    chromium = _chromium(browser)
    chromium.open(write_html(pendulum, tmp_path / "pendulum.html"))
    viewer = chromium.evaluate("({frames: conserveViewer.frames, nodes: conserveViewer.nodes, "
                               "bodies: conserveViewer.bodies, errors: conserveViewer.errors})")
    assert viewer == {"frames": len(pendulum), "nodes": list(range(len(pendulum))), "bodies": ["upper", "lower"],
                      "errors": []}
    chromium.evaluate("conserveViewer.playing && document.getElementById('play').click()")  # pause, as a user
    assert chromium.evaluate("conserveViewer.playing") is False
    scrub = ("(s => {{ s.value = '{}'; s.dispatchEvent(new Event('input')); }})"
             "(document.getElementById('time-slider'))")
    chromium.evaluate(scrub.format(0))
    chromium.redrawn()
    first = chromium.screenshot("view")
    k = 150
    chromium.evaluate(scrub.format(k))
    chromium.redrawn()
    later = chromium.screenshot("view")
    assert chromium.evaluate("[conserveViewer.frame, conserveViewer.time]") == [k, pendulum.t[k]]
    changed = np.count_nonzero(np.abs(first - later).max(axis=2) > 24)
    assert changed > 2000, f"only {changed} pixels of the 3-D view changed between t = 0 and t = {pendulum.t[k]} s"

    # the lower bar's inertia box is where the Solution puts the body, its edges a_i = sqrt(6 (J_j + J_k - J_i) / m)
    # from the bar's mass and principal moments (a slender bar: its length along d1, the thin edges at their
    # floor, 5 % of the longest)
    box = chromium.evaluate("(g => { g.updateMatrixWorld(true); const m = g.children.find(c => c.isMesh); "
                            "return {at: g.getWorldPosition(m.position.clone()).toArray(), "
                            "matrix: m.matrixWorld.elements, size: m.geometry.parameters}; })"
                            "(conserveViewer.objects.bodies.lower)")
    lower = pendulum["lower"]
    origin = np.asarray(chromium.evaluate("conserveViewer.origin"))
    np.testing.assert_allclose(np.asarray(box["at"]) + origin, lower.position[k], atol=1e-5)
    bar = next(p for p in pendulum.assembly.layout.parts if p.name == "lower")
    J = np.diag(bar.inertia)
    edges = np.sqrt(6 * (J.sum() - 2 * J) / bar.mass)
    assert edges[0] == pytest.approx(0.8, rel=1e-3)  # the bar from the elbow to the foot
    np.testing.assert_allclose([box["size"][w] for w in ("width", "height", "depth")],
                               [edges[0], 0.05 * edges[0], 0.05 * edges[0]], rtol=1e-6)
    long_edge = _rotation(box["matrix"])[:, 0]
    assert abs(long_edge @ lower.rotation[k][:, 0]) == pytest.approx(1.0, abs=1e-6)

    # the energy plot shows its line (the plot's colour, #1f77b4) and the page logged no errors
    plot = chromium.screenshot("energy-plot")
    assert np.count_nonzero(np.abs(plot - [0x1f, 0x77, 0xb4]).max(axis=2) < 40) > 200
    assert chromium.errors() == []
    # nothing was fetched: the file itself and the Blob URLs the page made of its embedded modules
    requested = chromium.requested()
    assert requested and all(url.startswith(("file:", "blob:", "data:")) for url in requested), requested


def test_visual_shapes_are_drawn_on_their_bodies(pendulum, browser, tmp_path):
    """Shapes of layout["sketch"]["shapes"] (an importer's visual geometry) replace the inertia box of
    their body and ride with it; a body without shapes keeps its box."""
    chromium = _chromium(browser)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # 90° about the body's x
    shapes = {"upper": [{"kind": "sphere", "size": [0.08], "pos": [0.5, 0.0, 0.0], "rgba": [0.9, 0.1, 0.1, 1.0]},
                        {"kind": "capsule", "size": [0.02, 0.4], "rotation": [[0, 0, 1], [0, 1, 0], [-1, 0, 0]]},
                        {"kind": "cylinder", "size": [0.05, 0.02], "pos": [-0.5, 0, 0]},
                        {"kind": "ellipsoid", "size": [0.1, 0.05, 0.03], "pos": [0.2, 0, 0], "rotation": tilt},
                        {"kind": "box", "size": [0.05, 0.05, 0.05], "pos": [-0.2, 0, 0], "rgba": [0, 0, 1, 0.5]},
                        {"kind": "mesh", "pos": [0, 0.1, 0], "vertices": [[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0],
                                                                          [0, 0, 0.1]],
                         "faces": [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]}]}
    layout = {**pendulum.layout, "sketch": {**pendulum.layout["sketch"], "shapes": shapes}}
    shaped = dataclasses.replace(pendulum, layout=layout)
    k = 120
    chromium.open(write_html(shaped, tmp_path / "shapes.html", points=[("upper", (0.5, 0.0, 0.0))], frames=[0, k]))
    chromium.evaluate("conserveViewer.pause(); conserveViewer.setFrame(1)")
    chromium.redrawn()
    drawn = chromium.evaluate("Object.fromEntries(Object.entries(conserveViewer.objects.bodies).map(([n, g]) => "
                              "{ g.updateMatrixWorld(true); return [n, g.children.filter(c => c.isMesh).map(m => "
                              "({type: m.geometry.type, at: m.getWorldPosition(m.position.clone()).toArray(), "
                              "matrix: m.matrixWorld.elements, opacity: m.material.opacity, "
                              "colour: Object.values(m.material.color.getRGB({}, 'srgb'))}))]; }))")
    assert [m["type"] for m in drawn["upper"]] == ["SphereGeometry", "CapsuleGeometry", "CylinderGeometry",
                                                   "SphereGeometry", "BoxGeometry", "BufferGeometry"]
    assert [m["type"] for m in drawn["lower"]] == ["BoxGeometry"]
    origin = np.asarray(chromium.evaluate("conserveViewer.origin"))
    upper = pendulum["upper"]
    for shape, mesh in zip(shapes["upper"], drawn["upper"]):
        np.testing.assert_allclose(np.asarray(mesh["at"]) + origin,
                                   upper.position[k] + upper.rotation[k] @ shape.get("pos", np.zeros(3)), atol=1e-5)
        R = upper.rotation[k] @ np.asarray(shape.get("rotation", np.eye(3)), float)
        np.testing.assert_allclose(_rotation(mesh["matrix"]), R, atol=1e-5)
    assert drawn["upper"][0]["colour"] == pytest.approx([0.9, 0.1, 0.1], abs=1e-4)
    assert drawn["upper"][4]["opacity"] == 0.5
    assert chromium.errors() == []
