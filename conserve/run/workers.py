"""Jobs in spawned processes, one per core: the process pool behind ``simulate_batch(workers=k)``.

jax runs one process's computations one after another on a CPU (a second thread or a second
virtual XLA device gains nothing), so the cores of a machine are used by processes of their own.
They are *spawned* (``multiprocessing.get_context("spawn")``), never forked: a fork copies the
parent's jax and its threads mid-flight. A spawned process starts a fresh Python, imports the
parent's main script under the name ``__mp_main__`` (so a script must keep its simulation under
``if __name__ == "__main__":``, as with any spawned pool), then the job's function, and runs it.

Each worker gets, in its environment before anything is imported: one thread for OpenBLAS, MKL and
OpenMP, and one for XLA's CPU computations, run on the calling thread (:data:`ONE_THREAD`,
:data:`XLA_ONE_THREAD`, :data:`SYNCHRONOUS`), so k workers use k cores without oversubscribing
them; the parent's ``XLA_FLAGS`` (conserve's loop-kernel option among them), float64, and the
parent's persistent compilation cache directory (off when the parent has none).
Nothing is pinned: the operating system places the workers on the cores this process may use.

The workers are kept for later calls (a second ensemble starts no process, imports nothing and
reuses what the workers compiled) until the parent exits or :func:`shut_down` ends them. A
worker ignores Ctrl-C: the parent decides. When the parent stops (Ctrl-C, an error of a job or
of ``on_result``) it ends the workers and raises.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import os
import pickle
import signal
import sys
import types
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ..compilation.cache import ENVIRONMENT_VARIABLE, compilation_cache_directory
from ..errors import ModelError

#: thread counts for the linear-algebra libraries of a worker (read when they load)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: XLA's option for one thread of CPU computation in a worker (added to ``XLA_FLAGS``): Eigen's
#: operations single-threaded. (``intra_op_parallelism_threads=1``, often quoted, is no XLA flag:
#: in ``XLA_FLAGS`` it makes XLA drop the flags after it, conserve's loop kernels among them, and
#: a heavy-top step 8× slower.)
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"

#: jax's CPU computations run on the calling thread, not handed to a thread of XLA's pool and
#: waited for: unpinned, that hand-off between cores made a heavy-top step 1.4× slower alone and
#: 2–3× slower with two workers on two cores (benchmarks/results/defaults.md, section ``WORKER_WORK``)
SYNCHRONOUS = {"JAX_CPU_ENABLE_ASYNC_DISPATCH": "false"}

#: set to "1" in a worker's environment: tells conserve it runs inside a worker
WORKER_VARIABLE = "CONSERVE_WORKER"


def usable_cores() -> int:
    """The number of CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where
    the platform has no affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def in_worker() -> bool:
    """True inside a process started by :func:`run_in_processes`."""
    return os.environ.get(WORKER_VARIABLE) == "1"


def slices(n: int, k: int) -> list:
    """``k`` contiguous (start, end) ranges covering 0…n, their lengths differing by at most one
    (fewer when n < k; none empty)."""
    k = max(1, min(int(k), int(n)))
    size, extra = divmod(n, k)
    bounds, start = [], 0
    for i in range(k):
        end = start + size + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


class _Checker(pickle.Pickler):
    """A pickler into nothing that records the functions of an interactive ``__main__`` (a
    notebook, the REPL): they pickle by name, but a spawned process has no such module to find
    them in."""

    def __init__(self):
        super().__init__(_Discard(), protocol=pickle.HIGHEST_PROTOCOL)
        self.interactive = []

    def reducer_override(self, obj):
        if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == "__main__":
            self.interactive.append(getattr(obj, "__qualname__", repr(obj)))
        return NotImplemented


class _Discard:
    def write(self, data):
        return len(data)


def pickling_problem(obj) -> str | None:
    """Why ``obj`` cannot go to a spawned process (what did not pickle), or None if it can. Functions
    are pickled by their module and name: a lambda, a function defined inside another (a closure)
    or one of an interactive session's ``__main__`` cannot be found by another process."""
    checker = _Checker()
    try:
        checker.dump(obj)
    except Exception as err:  # noqa: BLE001  (pickle raises PicklingError, AttributeError, TypeError…)
        return f"{type(err).__name__}: {err}"
    main = sys.modules.get("__main__")
    if checker.interactive and not getattr(main, "__file__", None):
        return (f"{', '.join(sorted(set(checker.interactive)))} defined in an interactive session's __main__, which a "
                "spawned process cannot import")
    return None


def unguarded_main_script() -> str | None:
    """The path of the main script when this call comes from its top level outside an
    ``if __name__ == "__main__":`` block — a spawned worker, which imports the main script, would
    run that code again — else None (a guarded call, an interactive session, no script)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py") or not os.path.isfile(path):
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # not called from the script's top level (a thread, a callback of an event loop)
        return None
    guards = _main_guards(path, os.path.getmtime(path))
    return None if any(first <= frame.f_lineno <= last for first, last in guards) else path


@functools.lru_cache(maxsize=8)
def _main_guards(path, mtime):
    """The (first, last) lines of the module-level ``if __name__ == "__main__":`` blocks of a script."""
    def is_main_test(test):
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
            return False
        sides = (test.left, test.comparators[0])
        return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
                and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ()
    return tuple((node.lineno, node.end_lineno) for node in tree.body
                 if isinstance(node, ast.If) and is_main_test(node.test))


@contextlib.contextmanager
def _worker_environment():
    """``os.environ`` as a worker must inherit it, for the block (the processes are started in it):
    one thread per library, XLA's one-thread option, jax's computations on the calling thread,
    float64, the compilation cache."""
    saved = dict(os.environ)
    flags = os.environ.get("XLA_FLAGS", "")
    added = {**ONE_THREAD, **SYNCHRONOUS, WORKER_VARIABLE: "1", "JAX_ENABLE_X64": "1",
             "XLA_FLAGS": flags if "xla_cpu_multi_thread_eigen" in flags else f"{XLA_ONE_THREAD} {flags}".strip()}
    added[ENVIRONMENT_VARIABLE] = compilation_cache_directory() or "off"  # the parent's cache, or none
    os.environ.update(added)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _ignore_interrupts():
    """A worker's initializer: Ctrl-C reaches the whole process group; the parent handles it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: the pool kept for later calls: (its key, the executor), or None
_kept = None


def run_in_processes(fn, jobs, processes, on_result=None) -> list:
    """``[fn(*job) for job in jobs]``, each call in one of ``processes`` spawned processes (at
    most one per job), the results in the order of ``jobs``. ``on_result(index, result)`` is called
    in this process as each job finishes (in the order they finish). ``fn``, the jobs and the
    results must pickle (``fn`` a module-level function).

    The processes stay alive for later calls with as many processes (their imports and compiled
    programs kept: a later call starts nothing), until this process exits or :func:`shut_down`.
    An exception of a job, of ``on_result`` or Ctrl-C ends them and is raised here; a worker that
    died (killed, out of memory, or a script that starts simulations on import) raises
    :class:`~conserve.errors.ModelError`."""
    results = [None] * len(jobs)
    pool = _pool(max(1, min(processes, len(jobs))))
    try:
        with _worker_environment():  # workers start on submission (again if one was lost)
            futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=futures.get):
                i = futures[future]
                try:
                    results[i] = future.result()
                except BrokenProcessPool as err:
                    raise ModelError(
                        f"a worker process stopped before finishing its job ({err}). Common causes: the script runs "
                        "simulations on import — keep them under `if __name__ == \"__main__\":`, since a spawned "
                        "worker imports the main script —, or it ran out of memory; workers=1 runs in this "
                        "process.") from err
                if on_result is not None:
                    on_result(i, results[i])
    except BaseException:
        shut_down(now=True)
        raise
    return results


def _pool(processes):
    """The kept executor of ``processes`` spawned processes for this environment, made if needed
    (another count or environment: the old one is shut down first)."""
    global _kept
    import multiprocessing

    key = (processes, os.environ.get("XLA_FLAGS", ""), str(compilation_cache_directory()), tuple(sys.path))
    if _kept is not None and _kept[0] == key:
        return _kept[1]
    shut_down()
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_ignore_interrupts)
    _kept = (key, pool)
    return pool


def shut_down(now=False):
    """End the kept worker processes (idle ones at once; ``now``: running jobs too, by
    terminating them). The next call of :func:`run_in_processes` starts new ones."""
    global _kept
    if _kept is None:
        return
    pool, _kept = _kept[1], None
    if not now:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public way to end running jobs
    for p in processes:
        with contextlib.suppress(Exception):
            p.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(Exception):
            p.join(timeout=5)


atexit.register(shut_down)
