"""How compiled code is made and kept (conserve.compilation): a second process running the same
model structure loads the compiled step from the persistent cache instead of compiling it, and
computes the same numbers; unoptimized, quick and optimized code take the same steps, and
compile="auto" chooses by the run's length."""

import json
import os
import subprocess
import sys

RUN = """
import json, sys
import jax
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name.rsplit("/", 1)[-1]))
import conserve as cs
body = cs.RigidBody("body", 1.0, (1.0, 2.0, 3.0), angular_velocity=(0.3, 2.0, 0.1))
sol = cs.simulate(cs.System([body]), 0.5, 1e-2)
print(json.dumps({"hits": events.count("cache_hits"), "misses": events.count("cache_misses"),
                  "q": sol.q[-1].tolist(), "dir": cs.compilation.cache.compilation_cache_directory(),
                  "scipy": sorted(m for m in sys.modules if m.startswith("scipy."))}))
"""


def _run(directory=None, **env):
    """RUN in a fresh process: with the cache in ``directory``, or as the environment ``env``
    (added to this one's without its cache settings) leaves it."""
    base = {k: v for k, v in os.environ.items() if "COMPILATION_CACHE" not in k}
    if directory is not None:
        base["CONSERVE_COMPILATION_CACHE"] = str(directory)
    out = subprocess.run([sys.executable, "-c", RUN], env={**base, **env}, capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_step_and_computes_the_same(tmp_path):
    """The cache is on by default (in the user's cache folder); a second process loads what the
    first compiled; clearing it empties it; "off" turns it off; jax's own setting wins. A run
    imports none of scipy's slow subpackages (spatial, integrate, sparse: 0.1–0.2 s each), which
    only the ode backend, colouring and Euler-angle output use."""
    from conserve.compilation.cache import cache_contents, clear_compilation_cache

    directory = tmp_path / "conserve" / "jax"  # the default under XDG_CACHE_HOME
    first = _run(XDG_CACHE_HOME=str(tmp_path))
    assert first["dir"] == str(directory) and first["misses"] >= 3  # the chunk, checks, diagnostics
    assert not [m for m in first["scipy"] if m.split(".")[1] in ("spatial", "integrate", "sparse")]
    entries, size = cache_contents(directory)
    assert entries >= first["misses"] and size > 0
    second = _run(directory)
    # everything the first process compiled (the step's chunk, diagnostics, helpers) is loaded
    assert second["misses"] == 0 and second["hits"] >= first["misses"]
    assert second["q"] == first["q"]  # bit-identical
    assert clear_compilation_cache(directory) == (entries, size) and cache_contents(directory) == (0, 0)
    off = _run(CONSERVE_COMPILATION_CACHE="off", XDG_CACHE_HOME=str(tmp_path))
    assert off["dir"] is None and off["hits"] == 0 and cache_contents(directory) == (0, 0)
    assert off["q"] == first["q"]
    mine = _run(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "mine"))  # jax's own setting is left alone
    assert mine["dir"] == str(tmp_path / "mine")


def test_the_code_generations_take_the_same_steps():
    """The three code generations (conserve.compilation) compile one program: the same discrete
    trajectory to round-off (amplified over 250 steps of the fast top: ~1e-12 m), and each
    conserves; "auto" compiles this short run unoptimized; an unknown mode is refused by name."""
    import numpy as np
    import pytest

    import conserve as cs

    system = cs.problems.heavy_top()
    auto = cs.simulate(system, t_end=0.5, dt=2e-3)  # 250 steps × 21 unknowns
    assert auto.stats["compile"] == "unoptimized" and auto.stats["unknown_steps"] == 250 * 21
    assert np.array_equal(auto.q, cs.simulate(system, t_end=0.5, dt=2e-3, compile="unoptimized").q)
    quick = cs.simulate(system, t_end=0.5, dt=2e-3, compile="quick")
    optimized = cs.simulate(system, t_end=0.5, dt=2e-3, compile="optimized")
    for other in (auto, optimized):
        assert np.max(np.abs(quick.q - other.q)) <= 1e-11
    assert np.max(np.abs(quick.q[1] - optimized.q[1])) <= 1e-15  # one step
    # unoptimized code rounds differently again (one step: 3e-15 measured, ~10 ulp of q)
    assert np.max(np.abs(quick.q[1] - auto.q[1])) <= 1e-14
    for sol in (auto, quick, optimized):
        E = sol.energy.total
        assert np.max(np.abs(E - E[0])) <= 1e-13 * abs(E[0])
    with pytest.raises(cs.ModelError, match="compile must be one of"):
        cs.simulate(system, t_end=0.5, dt=2e-3, compile="fast")


def test_auto_compiles_by_the_work_bounds():
    """compile="auto" counts a run's unknown-steps: steps × composed stages × members × the
    director backend's unknowns (whichever backend), and takes unoptimized code up to AUTO_WORK,
    optimized from OPTIMIZED_WORK where that makes the Newton loop one kernel, else quick."""
    import conserve as cs
    from conserve.backends import Composition, Director, Reduced
    from conserve.compilation.modes import AUTO_WORK, OPTIMIZED_WORK, resolved_mode
    from conserve.run.options import run_work

    model = cs.problems.heavy_top().assemble().model
    n = 21  # the heavy top's director unknowns: 12 coordinates, 9 multipliers (6 director, 3 joint)
    steps = AUTO_WORK // n
    for backend in (Director(), Reduced()):
        assert run_work(backend, model, steps) == steps * n
        assert resolved_mode("auto", run_work(backend, model, steps)) == "unoptimized"
        assert resolved_mode("auto", run_work(backend, model, steps + 1)) == "quick"
        long = -(-OPTIMIZED_WORK // n)  # the fewest steps of at least OPTIMIZED_WORK
        assert resolved_mode("auto", run_work(backend, model, long - 1), kernel=True) == "quick"
        assert resolved_mode("auto", run_work(backend, model, long), kernel=True) == "optimized"
        assert resolved_mode("auto", run_work(backend, model, long)) == "quick"
    assert run_work(Composition(Director(), 4), model, 10) == 10 * 10 * n  # order 4: ten sub-steps per step
    assert resolved_mode("auto", None) == "quick"  # an adaptive run's length is not known
    assert resolved_mode("optimized", 1) == "optimized"


def test_options_this_xla_does_not_know_are_dropped(monkeypatch):
    """Every code generation passes XLA the options of its mode (BASE's in all three), but only
    those this jaxlib's XLA accepts: an unknown option (a jaxlib that renamed one) is dropped
    alone, so a run still compiles, with the other options."""
    import jax
    import jax.numpy as jnp

    from conserve.compilation import modes as compilation

    for mode, options in (("unoptimized", compilation.UNOPTIMIZED), ("quick", compilation.QUICK),
                          ("optimized", compilation.OPTIMIZED)):
        assert compilation.BASE.items() <= options.items()
        assert compilation.compiler_options(mode).items() <= options.items()
    monkeypatch.setattr(compilation, "QUICK", {**compilation.QUICK, "xla_no_such_option": True})
    options = compilation.compiler_options("quick")
    assert "xla_no_such_option" not in options and options == {k: v for k, v in compilation.QUICK.items()
                                                               if k != "xla_no_such_option"}
    assert float(jax.jit(jnp.negative, compiler_options=options)(1.0)) == -1.0


def test_a_small_model_compiled_quick_runs_its_newton_loop_as_one_kernel(monkeypatch):
    """Importing conserve (here before jax computed anything) raises XLA's size of loops compiled as
    one kernel; a run whose dense Newton matrix is small then solves by Gauss–Jordan in XLA operations,
    and its whole loop of steps is one kernel (XLA marks it ``xla_cpu_small_call``): compiled
    "optimized" whatever the model's size, "quick" with the director backend on a small model
    (both with quick's options).
    Unoptimized runs, ensembles and larger matrices keep LAPACK's LU. (That the steps agree with
    LAPACK's to round-off: test_the_code_generations_take_the_same_steps.)"""
    from dataclasses import replace

    import jax
    import numpy as np

    import conserve as cs
    from conserve.backends import Director, Reduced
    from conserve.backends.director import unknowns
    from conserve.compilation.modes import KERNEL_SIZE, KERNEL_UNKNOWNS, loops_as_kernels
    from conserve.run.chunks import compile_chunks, kernel_code, kernel_when_optimized, members_per_group, newton_sizes
    assert loops_as_kernels()
    assembly = cs.problems.heavy_top().assemble()
    model, state = assembly.model, assembly.initial_state
    for backend in (Director().prepare(model, state), Reduced().prepare(model, state)):
        assert not backend.linear.kernel
        code, options = kernel_code(backend, model, "optimized")
        assert code.linear.kernel and options == "quick"
        code, options = kernel_code(backend, model, "quick")  # the director's loop only (compiles fast)
        assert code.linear.kernel == (backend.name == "director") and options == "quick"
        assert kernel_code(backend, model, "unoptimized") == (backend, "unoptimized")
        # an ensemble's: Gauss–Jordan in long runs only (vmapped, its step compiles 2× longer)
        assert kernel_code(backend, model, "optimized", batch=[0])[0].linear.kernel
        assert kernel_code(backend, model, "quick", batch=[0]) == (backend, "quick")
    backend = Director().prepare(model, state)
    assert unknowns(model) == 21 <= min(KERNEL_UNKNOWNS, KERNEL_SIZE)
    module = sys.modules["conserve.run.chunks"]
    monkeypatch.setattr(module, "KERNEL_UNKNOWNS", 20)  # the top as a model over the bound of quick runs
    assert kernel_code(backend, model, "quick") == (backend, "quick")
    assert kernel_code(backend, model, "optimized")[0].linear.kernel
    monkeypatch.setattr(module, "KERNEL_SIZE", 20)  # and as a matrix over the bound of both
    assert kernel_code(backend, model, "optimized") == (backend, "optimized")
    monkeypatch.undo()
    # a chain's tree solver inverts its blocks (21 unknowns) by Gauss–Jordan too, whatever its length
    bars = [cs.RigidBody(f"b{k}", 1.0, (1.0, 1.0, 0.1), position=(0.0, 0.0, -k)) for k in range(6)]
    chain = cs.System(bars + [cs.Spherical(([cs.ground] + bars)[k], bars[k], at=(0.0, 0.0, 0.5 - k))
                              for k in range(6)]).assemble()
    tree = Director().prepare(chain.model, chain.initial_state)
    assert tree.linear.name == "tree" and unknowns(chain.model) > KERNEL_SIZE and not tree.linear.kernel
    assert newton_sizes(tree, chain.model) == (unknowns(chain.model), tree.linear.width)  # its blocks
    assert members_per_group(*newton_sizes(tree, chain.model)) > members_per_group(unknowns(chain.model))
    code, options = kernel_code(tree, chain.model, "optimized")
    assert code.linear.kernel and code.linear.name == "tree" and options == "quick"
    # ... so compile="auto" takes optimized code for its long runs (the top's loop is one kernel in quick code too)
    assert kernel_when_optimized(tree, chain.model) and not kernel_when_optimized(backend, model)
    monkeypatch.setattr(module, "KERNEL_BLOCK", tree.linear.width - 1)  # blocks over the bound: LAPACK's LU
    assert kernel_code(tree, chain.model, "optimized") == (tree, "optimized")
    assert not kernel_when_optimized(tree, chain.model)
    monkeypatch.undo()
    # the carry (with reused factors) made before the code is chosen serves the kernel code
    for b, a in ((backend, assembly), (replace(tree, reuse=True), chain)):
        carry = b.init(a.model, a.initial_state)
        assert carry.memory is not None
        kernels = b.as_kernels().init(a.model, a.initial_state)
        assert jax.tree.structure(carry) == jax.tree.structure(kernels)
        assert [(np.shape(x), np.asarray(x).dtype) for x in jax.tree.leaves(carry)] == [
            (np.shape(x), np.asarray(x).dtype) for x in jax.tree.leaves(kernels)]
    assert kernel_code(tree, chain.model, "quick") == (tree, "quick")  # larger than KERNEL_UNKNOWNS
    args = (model, backend.init(model, state), np.int32(0), np.int32(8), np.float64(0.0), np.float64(1e-3))
    run, _ = compile_chunks(backend, 8, args, mode="quick")
    assert "xla_cpu_small_call" in run.as_text()
    # ... and the tree's: no library call in its program (a sort or a LAPACK call cannot be in a
    # kernel: the loop would run as operations dispatched one by one)
    args = (chain.model, tree.init(chain.model, chain.initial_state), np.int32(0), np.int32(8), np.float64(0.0),
            np.float64(1e-3))
    for program in (run, compile_chunks(tree, 8, args, mode="optimized")[0]):
        text = program.as_text()
        assert "xla_cpu_small_call" in text and " sort(" not in text and " custom-call(" not in text


def test_jax_used_before_conserve_keeps_lapacks_lu():
    """XLA reads its options once, when jax first computes: imported after that, conserve cannot
    raise the loop size, knows it (loops_as_kernels() False) and keeps LAPACK's LU, whose loops
    XLA runs kernel by kernel — slower, not different."""
    code = ("import jax; jax.numpy.ones(2).block_until_ready()\n"
            "import conserve as cs\n"
            "from conserve.run.chunks import kernel_code\nfrom conserve.compilation.modes import loops_as_kernels\n"
            "from conserve.backends import Director\n"
            "a = cs.problems.heavy_top().assemble()\n"
            "b = Director().prepare(a.model, a.initial_state)\n"
            "print(loops_as_kernels(), kernel_code(b, a.model, 'quick')[0] is b)\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_compiling_counts_the_compilations_inside_its_block_only():
    """A run's time leaves out what its loop compiles on first use (its nodes' diagnostics) by
    ``compiling()``: it counts the tracing, lowering and compilation inside its block — none for
    code compiled before, an inner block's in the outer's too."""
    import jax
    import jax.numpy as jnp

    from conserve.compilation.timing import compiling

    f = jax.jit(lambda x: jnp.sin(x) * 1.2345 + 0.678)
    f(0.5)  # compiled outside
    with compiling() as outer:
        f(1.0)
        assert outer() == 0.0
        with compiling() as inner:
            g = jax.jit(lambda x: jnp.cos(x) * 2.3456 - 0.789)
            g(1.0)
            spent = inner()
        assert spent > 0.0 and outer() == spent
        g(2.0)
        assert outer() == spent
