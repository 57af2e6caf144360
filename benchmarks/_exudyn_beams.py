"""Exudyn's side of the beam benchmark: the free-flying beam, the static cantilever and the right-angle
cantilever in Exudyn 1.13.6, so that a benchmark script can run conserve's beams beside them in the
same process (``benchmarks/`` on the path, as for ``_peers``).

SI units throughout. The section's principal axes are d1, d2 and the beam axis is d3; Exudyn's beam
element takes its local x as the axis, so each node frame is R = [d3 | d1 | d2] (columns), its
stiffness is diag(EA, GA1, GA2, GJ, EI1, EI2) and its rotary inertia diag(ρJ, ρI1, ρI2).

Problems and where their data come from
---------------------------------------
``free_beam``: the free-flying flexible beam ("flying spaghetti") of Simo & Vu-Quoc (1988), as
repeated by Romero & Armero (2002) and Betsch & Steinmann (2002/2003): a straight beam of length 10
from A = (6, 0, 0) to B = (0, 0, 8), EA = GA1 = GA2 = 1e4 N, EI1 = EI2 = GJ = 500 N m², ρA = 1 kg/m,
ρI1 = ρI2 = 10 kg m, ρJ = 20 kg m, no gravity; at end A a dead force F(t) = p(t) (20, 0, 0) N and a
dead moment M(t) = p(t) (0, 200, 100) N m, with p rising linearly 0 → 1 on [0, 2.5] s, falling
1 → 0 on [2.5, 5] s, zero after. The load vectors were found (the papers themselves were not
reachable) in two public implementations of this benchmark that agree up to a mirror image:

- AeroBeams.jl, ``test/examples/flyingSpaghetti3D.jl`` (github.com/luizpancini/AeroBeams.jl): the
  same beam in the x-z plane (pitched by atan(4/3), loaded end 8 m below the other), inertial-frame
  loads F1 = M2/10, M2 = 200 p(t), M3 = M2/2, i.e. exactly the F and M above once translated so that
  the loaded end is A = (6, 0, 0);
- StHante/crmS3R3, ``test/flying_spaghetti.lua`` (Hante & Arnold's Cosserat rod code): the beam in
  the x-y plane from (6, 0, 0) to (0, 8, 0), force 200 p(t) (1/10, 0, 0) and moment
  200 p(t) (0, -1/2, -1) at the (6, 0, 0) end, which is the mirror image (y ↔ z) of the above.

Both use "F = M/10" in the sense |F| = 200/10 with F along x, not F parallel to M; conserve's
``examples/flying_beam.py`` and ``tests/test_beams.py`` use the same loads.

``right_angle_cantilever``: Simo & Vu-Quoc's right-angle cantilever, with the geometry and load of
FinEtoolsFlexStructures.jl ``examples/beams/nonlin_transient/simo_vuquoc_examples.jl`` (which cites
the 1988 paper): legs of length 10 from the clamp (0, 10, 0) to the elbow (10, 10, 0) and on to the
tip (10, 0, 0), in the horizontal x-y plane; a dead out-of-plane force (0, 0, 50 q(t)) N at the
elbow with q rising 0 → 1 on [0, 1] s and falling 1 → 0 on [1, 2] s; EA = GA1 = GA2 = 1e6 N,
EI1 = EI2 = GJ = 1e3 N m², ρA = 1 kg/m, ρI1 = ρI2 = 10 kg m, ρJ = 20 kg m (the section data of this
problem statement; FinEtools uses a much smaller rotary inertia). ``n_elements`` counts per leg.

``cantilever_tip_load``: a straight cantilever along x clamped at x = 0, dead tip force (0, 0, -P),
solved statically; compared with Timoshenko's P L³/(3 EI) + P L/GA.

Exudyn's beam element (``ObjectBeamGeometricallyExact``, documented as under construction)
--------------------------------------------------------------------------------------
Two nodes (``NodeRigidBodyRotVecLG``: position, rotation vector, and velocities (v global, Ω local)).
An element of length L has the constant strain ε = (log_SE3(H0⁻¹ H1) − (L, 0, 0, 0, 0, 0))/L and the
strain energy (L/2) εᵀ C ε: this equals Exudyn's ``PotentialEnergy`` output, and its gradient equals
Exudyn's internal forces. Statically it is the reduced-integration linear Timoshenko element: in the
linear range the tip deflection is P L³/(3 EI) + P L/GA − P L³/(12 EI N²), second order in N. The mass
matrix is not lumped: Exudyn 1.13.6 uses a consistent one, ρA L/6 [[2, 1], [1, 2]] for the positions
and configuration-dependent rotational blocks coupling the two nodes (ρJ L/3 and ρJ L/6 for a straight
beam); ½ q̇ᵀ M(q) q̇ equals Exudyn's ``KineticEnergy`` output. Exudyn's equations of motion are not
exactly conservative for this kinetic energy: at 10 elements, with the step refined to zero, the free
beam loses 3.6e-4 of its energy over 25 s of free flight and its angular momentum changes by 9e-4;
both shrink with the mesh (9e-6 and 4e-5 at 40 elements). The numbers are in
``results/exudyn_beams_check.md``.

Energies and momentum are computed after the run from the node coordinates and velocities recorded at
every step (Exudyn sensors): the state is set back into the system, E = ½ q̇ᵀ M(q) q̇ (Exudyn's mass
matrix) + Σ elements' ``PotentialEnergy`` (Exudyn's output), and the angular momentum about the origin
is the Noether momentum of that kinetic energy, Σ_nodes x_i × p_i + R_i π_i with (p_i, π_i) = M q̇
split into each node's position and local-rotation parts. The energy change during the load equals the
loads' work, and the momentum change their moment impulse, up to the same mesh-dependent defect.

The solver is Exudyn's generalized-α (``SolveDynamic``, Chung-Hulbert parameters from ρ∞, Lie-group
update of the rotation vectors), fixed step (``adaptiveStep`` off: a failing step raises), modified
Newton with the element's analytic Jacobian (Exudyn's default; the Jacobian is approximate: full Newton
needs about 5 iterations a step), Eigen's sparse LU (as fast as the default dense solver at 10
elements, 2× faster at 40), one thread. Newton's absolute tolerance is raised from 1e-10 to 1e-8
(dynamics) and its relative one from 1e-8 to 1e-7 (statics) and to 1e-6 (the right-angle cantilever's
dynamics, ``RIGHT_ANGLE_RELATIVE_TOLERANCE``): with EA = 1e6 the residual's round-off floor is about
1e-9 N at 10 elements, higher for shorter elements, and the defaults stall against it at small steps or
loads. Timing:
``wall_setup`` builds the model and calls ``Assemble`` (Exudyn compiles nothing), ``wall_run`` is the
``SolveDynamic`` / ``SolveStatic`` call, sensor recording included (it costs under 1 %); the energy
post-processing is not timed.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.spatial.transform import Rotation

from _peers import import_exudyn

#: free beam: end A, end B (m), loads at A (N, N m) at p(t) = 1, load ramp half-duration (s)
FREE_BEAM_A, FREE_BEAM_B = (6.0, 0.0, 0.0), (0.0, 0.0, 8.0)
FREE_BEAM_FORCE, FREE_BEAM_MOMENT = (20.0, 0.0, 0.0), (0.0, 200.0, 100.0)
FREE_BEAM_RAMP = 2.5
#: free beam section: EA, GA1, GA2 (N), GJ, EI1, EI2 (N m²), ρA (kg/m), ρI1, ρI2, ρJ (kg m)
FREE_BEAM_SECTION = dict(EA=1e4, GA1=1e4, GA2=1e4, GJ=500.0, EI1=500.0, EI2=500.0,
                         rhoA=1.0, rhoI1=10.0, rhoI2=10.0, rhoJ=20.0)

#: right-angle cantilever: clamp, elbow, tip (m), elbow force at q(t) = 1 (N), load ramp half-duration (s)
RIGHT_ANGLE_CLAMP, RIGHT_ANGLE_ELBOW, RIGHT_ANGLE_TIP = (0.0, 10.0, 0.0), (10.0, 10.0, 0.0), (10.0, 0.0, 0.0)
RIGHT_ANGLE_FORCE = (0.0, 0.0, 50.0)
RIGHT_ANGLE_RAMP = 1.0
RIGHT_ANGLE_SECTION = dict(EA=1e6, GA1=1e6, GA2=1e6, GJ=1e3, EI1=1e3, EI2=1e3,
                           rhoA=1.0, rhoI1=10.0, rhoI2=10.0, rhoJ=20.0)

#: Newton tolerances raised above the residual's round-off floor (see the module docstring)
DYNAMIC_ABSOLUTE_TOLERANCE = 1e-8
STATIC_RELATIVE_TOLERANCE = 1e-7
#: the right-angle cantilever's dynamic relative tolerance (Exudyn's default 1e-8): with 16 or more
#: elements per leg Newton stalls at the first step (relative error 2e-8 at 32 per leg, Δt = 0.05),
#: with 64 per leg and Δt ≤ 0.025 at 1e-7 too; 1e-6 moves the tip at t = 10 s by 4e-6 m (16 per leg,
#: Δt = 0.0125, against 1e-7)
RIGHT_ANGLE_RELATIVE_TOLERANCE = 1e-6


def hat(t, ramp):
    """The load factor: t/ramp on [0, ramp], 2 − t/ramp on [ramp, 2 ramp], 0 after (t, ramp in s)."""
    return max(0.0, 1.0 - abs(t / ramp - 1.0)) if t < 2.0 * ramp else 0.0


def _exudyn():
    """Exudyn (its fast module, as the other benchmarks load it) and its item interface."""
    exu = import_exudyn()
    if exu is None:
        raise ImportError("Exudyn is not installed (pip install exudyn, or the [bench] extra)")
    import exudyn.itemInterface as items
    return exu, items


def _section(exu, EA, GA1, GA2, GJ, EI1, EI2, rhoA, rhoI1, rhoI2, rhoJ):
    """Exudyn's BeamSection for section data in d1, d2, d3 axes (Exudyn's local y, z, x)."""
    section = exu.BeamSection()
    section.stiffnessMatrix = np.diag([EA, GA1, GA2, GJ, EI1, EI2])
    section.inertia = np.diag([rhoJ, rhoI1, rhoI2])
    section.massPerLength = rhoA
    return section


def _straight_beam(mbs, items, start, end, d1, n_elements, section):
    """Add a straight beam of ``n_elements`` equal elements from ``start`` to ``end`` (m, (3,)), section
    axis d1 (unit, normal to the axis), undeformed and at rest. Returns node numbers (n_elements + 1),
    element numbers (n_elements) and the node frame R = [d3 | d1 | d2] (3, 3)."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    length = np.linalg.norm(end - start)
    d3 = (end - start) / length
    frame = np.column_stack([d3, d1, np.cross(d3, d1)])
    rotation_vector = list(Rotation.from_matrix(frame).as_rotvec())
    nodes = [mbs.AddNode(items.NodeRigidBodyRotVecLG(
        referenceCoordinates=list(start + (end - start) * k / n_elements) + rotation_vector))
        for k in range(n_elements + 1)]
    elements = [mbs.AddObject(items.ObjectBeamGeometricallyExact(nodeNumbers=[nodes[k], nodes[k + 1]],
                                                                 length=length / n_elements, sectionData=section))
                for k in range(n_elements)]
    return nodes, elements, frame


def _clamp(exu, mbs, items, node, position, frame):
    """Fix ``node`` (at ``position``, frame ``frame``) rigidly to the ground: a generic joint, 6 rows."""
    ground = mbs.AddObject(items.ObjectGround())
    marker_ground = mbs.AddMarker(items.MarkerBodyRigid(bodyNumber=ground,
                                                        localHT=exu.HT(rotation=frame, translation=list(position))))
    marker_node = mbs.AddMarker(items.MarkerNodeRigid(nodeNumber=node))
    mbs.AddObject(items.GenericJoint(markerNumbers=[marker_ground, marker_node]))


def _record(exu, mbs, items, nodes):
    """Sensors storing each node's coordinates and velocities at every step; returns their numbers."""
    kinds = (exu.OutputVariableType.Coordinates, exu.OutputVariableType.Coordinates_t)
    return [[mbs.AddSensor(items.SensorNode(nodeNumber=node, outputVariableType=kind, storeInternal=True,
                                            writeToFile=False)) for kind in kinds] for node in nodes]


def _solve_dynamic(exu, mbs, dt, t_end, rho_inf, relative_tolerance=None):
    """Generalized-α with spectral radius ``rho_inf`` at the fixed step dt (s) to t_end (s), settings as in
    the module docstring (``relative_tolerance``: Newton's, None for Exudyn's default 1e-8). Returns wall
    time (s), steps, Newton iterations and Jacobians per step."""
    steps = int(round(t_end / dt))
    if steps < 1 or abs(steps * dt - t_end) > 1e-9 * t_end:
        raise ValueError(f"t_end = {t_end:g} s is not a whole number of steps dt = {dt:g} s")
    settings = exu.SimulationSettings()
    integration = settings.timeIntegration
    integration.numberOfSteps, integration.endTime = steps, t_end
    integration.verboseMode, integration.adaptiveStep = 0, False
    integration.generalizedAlpha.spectralRadius = rho_inf
    integration.newton.absoluteTolerance = DYNAMIC_ABSOLUTE_TOLERANCE
    if relative_tolerance is not None:
        integration.newton.relativeTolerance = relative_tolerance
    settings.solution.file.write = False
    settings.solution.sensors.writePeriod = 0.5 * dt  # one record per step
    settings.linearSolver.solverType = exu.LinearSolverType.EigenSparse
    settings.parallel.numberOfThreads = 1
    tic = time.perf_counter()
    try:
        ok = mbs.SolveDynamic(settings, solverType=exu.DynamicSolverType.GeneralizedAlpha)
    except exu.SolverError:
        ok = False
    wall = time.perf_counter() - tic
    it = mbs.sys["dynamicSolver"].it
    if not ok or abs(it.currentTime - t_end) > 0.5 * dt:
        raise RuntimeError(f"Exudyn generalized-α (dt = {dt:g} s, ρ∞ = {rho_inf:g}) failed at t = {it.currentTime:g} s")
    return {"wall_run": wall, "steps": steps, "newton_per_step": it.newtonStepsCount / steps,
            "jacobians_per_step": it.newtonJacobiCount / steps}


def _states(mbs, sensors, steps):
    """The recorded states: times (n_t,), coordinates and velocities (n_t, nodes, 6)."""
    data = [[np.asarray(mbs.GetSensorStoredData(s)) for s in pair] for pair in sensors]
    if any(len(d) != steps + 1 for pair in data for d in pair):
        raise RuntimeError("a sensor did not record every step")
    q = np.stack([pair[0][:, 1:] for pair in data], axis=1)
    v = np.stack([pair[1][:, 1:] for pair in data], axis=1)
    return data[0][0][:, 0], q, v


def _energy_momentum(exu, mbs, nodes, elements, reference, q, v):
    """Kinetic and strain energy (J, (n_t,) each) and angular momentum about the origin (kg m²/s, (n_t, 3))
    of the recorded states q, v ((n_t, nodes, 6)) of the beam ``elements`` on ``nodes``; ``reference``:
    the nodes' reference coordinates (nodes, 6). Sets each state back into the system (the run is over)
    and uses Exudyn's mass matrix and its elements' PotentialEnergy output, as in the module docstring."""
    settings = exu.SimulationSettings()
    settings.solution.file.write = False
    solver = exu.MainSolverImplicitSecondOrder()
    solver.InitializeSolver(mbs, settings)
    energy = exu.OutputVariableType.PotentialEnergy
    index = np.concatenate([mbs.GetNodeODE2Index(node) + np.arange(6) for node in nodes])
    n_ode2 = len(mbs.systemData.GetODE2Coordinates())
    kinetic, strain, momentum = np.empty(len(q)), np.empty(len(q)), np.empty((len(q), 3))
    qs = np.zeros(n_ode2)
    for k in range(len(q)):
        qs[index] = q[k].ravel()
        mbs.systemData.SetODE2Coordinates(qs)
        solver.ComputeMassMatrix(mbs)
        mass = np.asarray(solver.GetSystemMassMatrix())[np.ix_(index, index)]
        p = (mass @ v[k].ravel()).reshape(-1, 6)
        kinetic[k] = 0.5 * v[k].ravel() @ mass @ v[k].ravel()
        strain[k] = sum(mbs.GetObjectOutputBody(b, energy, localPosition=[0.0, 0.0, 0.0]) for b in elements)
        total = reference + q[k]
        frames = Rotation.from_rotvec(total[:, 3:]).as_matrix()
        momentum[k] = np.cross(total[:, :3], p[:, :3]).sum(axis=0) + np.einsum("nij,nj->i", frames, p[:, 3:])
    return kinetic, strain, momentum


def _reference(mbs, nodes):
    """The nodes' reference coordinates (nodes, 6): position (m) and rotation vector."""
    return np.array([mbs.GetNode(node)["referenceCoordinates"] for node in nodes], float)


def free_beam(dt, t_end, n_elements, rho_inf=0.8, *, force=FREE_BEAM_FORCE, moment=FREE_BEAM_MOMENT, energies=True):
    """The free-flying beam (``FREE_BEAM_*``, module docstring) in Exudyn: ``n_elements`` elements,
    generalized-α with spectral radius ``rho_inf`` at the fixed step ``dt`` (s) to ``t_end`` (s);
    ``force`` (N) and ``moment`` (N m): the dead loads at end A at p(t) = 1, (3,) each.

    Returns a dict of numpy arrays (n_t = steps + 1 records, t = 0 included): ``t`` (n_t,) s;
    ``energy`` = ``kinetic_energy`` + ``strain_energy`` (n_t,) J; ``angular_momentum`` (n_t, 3)
    kg m²/s about the origin; ``position_A``, ``position_B`` (n_t, 3) m, the two ends; and floats
    ``wall_setup``, ``wall_run`` (s), ``steps``, ``newton_per_step``, ``jacobians_per_step``.
    ``energies=False`` skips the energy and momentum post-processing (a dense mass matrix per record);
    those keys are then absent."""
    exu, items = _exudyn()
    tic = time.perf_counter()
    mbs = exu.SystemContainer().AddSystem()
    section = _section(exu, **FREE_BEAM_SECTION)
    nodes, elements, _ = _straight_beam(mbs, items, FREE_BEAM_A, FREE_BEAM_B, (0.0, 1.0, 0.0), n_elements, section)
    marker = mbs.AddMarker(items.MarkerNodeRigid(nodeNumber=nodes[0]))
    force, moment = np.asarray(force, float), np.asarray(moment, float)
    mbs.AddLoad(items.Force(markerNumber=marker,
                            loadVectorUserFunction=lambda mbs, t, load: list(hat(t, FREE_BEAM_RAMP) * force)))
    mbs.AddLoad(items.Torque(markerNumber=marker,
                             loadVectorUserFunction=lambda mbs, t, load: list(hat(t, FREE_BEAM_RAMP) * moment)))
    sensors = _record(exu, mbs, items, nodes)
    mbs.Assemble()
    wall_setup = time.perf_counter() - tic
    stats = _solve_dynamic(exu, mbs, dt, t_end, rho_inf)
    t, q, v = _states(mbs, sensors, stats["steps"])
    reference = _reference(mbs, nodes)
    out = {"t": t, "position_A": reference[0, :3] + q[:, 0, :3], "position_B": reference[-1, :3] + q[:, -1, :3],
           "wall_setup": wall_setup, **stats}
    if energies:
        kinetic, strain, momentum = _energy_momentum(exu, mbs, nodes, elements, reference, q, v)
        out.update(energy=kinetic + strain, kinetic_energy=kinetic, strain_energy=strain, angular_momentum=momentum)
    return out


def cantilever_tip_load(P, n_elements, L=1.0, EI=1e3, EA=1e6, GA=1e5, GJ=1e3):
    """Static cantilever: a straight beam along x of length ``L`` (m) clamped at x = 0, ``n_elements``
    elements, dead tip force (0, 0, −P) (P in N), section EA, GA (both shear directions) (N), EI (both
    bending directions), GJ (N m²); solved by Exudyn's static solver in one load step.

    Returns a dict: ``tip_displacement`` (3,) m; ``timoshenko`` = P L³/(3 EI) + P L/GA (m), the linear
    tip deflection; ``relative_error`` = (−u_z − timoshenko)/timoshenko (valid for P small enough that
    the response is linear); ``wall_setup``, ``wall_run`` (s)."""
    exu, items = _exudyn()
    tic = time.perf_counter()
    mbs = exu.SystemContainer().AddSystem()
    section = _section(exu, EA, GA, GA, GJ, EI, EI, rhoA=1.0, rhoI1=1.0, rhoI2=1.0, rhoJ=2.0)  # inertia unused
    nodes, _, frame = _straight_beam(mbs, items, (0.0, 0.0, 0.0), (L, 0.0, 0.0), (0.0, 1.0, 0.0), n_elements, section)
    _clamp(exu, mbs, items, nodes[0], (0.0, 0.0, 0.0), frame)
    mbs.AddLoad(items.Force(markerNumber=mbs.AddMarker(items.MarkerNodeRigid(nodeNumber=nodes[-1])),
                            loadVector=[0.0, 0.0, -P]))
    mbs.Assemble()
    wall_setup = time.perf_counter() - tic
    settings = exu.SimulationSettings()
    settings.solution.file.write = False
    settings.staticSolver.verboseMode = 0
    settings.staticSolver.newton.relativeTolerance = STATIC_RELATIVE_TOLERANCE
    settings.linearSolver.solverType = exu.LinearSolverType.EigenSparse
    settings.parallel.numberOfThreads = 1
    tic = time.perf_counter()
    try:
        ok = mbs.SolveStatic(settings)
    except exu.SolverError:
        ok = False
    wall_run = time.perf_counter() - tic
    if not ok:
        raise RuntimeError(f"Exudyn's static solver failed (P = {P:g} N, {n_elements} elements)")
    u = np.asarray(mbs.GetNodeOutput(nodes[-1], exu.OutputVariableType.Displacement))
    timoshenko = P * L**3 / (3 * EI) + P * L / GA
    return {"tip_displacement": u, "timoshenko": timoshenko, "relative_error": (-u[2] - timoshenko) / timoshenko,
            "wall_setup": wall_setup, "wall_run": wall_run}


def right_angle_cantilever(dt, t_end, n_elements, rho_inf=0.8, *, energies=True):
    """Simo & Vu-Quoc's right-angle cantilever (``RIGHT_ANGLE_*``, module docstring) in Exudyn:
    ``n_elements`` elements per leg, the clamp and the elbow as generic joints (6 rows each, index 3),
    generalized-α with spectral radius ``rho_inf`` at the fixed step ``dt`` (s) to ``t_end`` (s).

    Returns a dict of numpy arrays (n_t = steps + 1 records, t = 0 included): ``t`` (n_t,) s;
    ``elbow_displacement``, ``tip_displacement`` (n_t, 3) m; ``energy`` = ``kinetic_energy`` +
    ``strain_energy`` (n_t,) J, as for ``free_beam``; and floats ``wall_setup``, ``wall_run`` (s),
    ``steps``, ``newton_per_step``, ``jacobians_per_step``, ``n_elements_total``. ``energies=False``
    skips the energy post-processing (a dense mass matrix per record: seconds for fine meshes and
    long runs); the energy keys are then absent."""
    exu, items = _exudyn()
    tic = time.perf_counter()
    mbs = exu.SystemContainer().AddSystem()
    section = _section(exu, **RIGHT_ANGLE_SECTION)
    normal = (0.0, 0.0, 1.0)
    leg1, elements1, frame1 = _straight_beam(mbs, items, RIGHT_ANGLE_CLAMP, RIGHT_ANGLE_ELBOW, normal,
                                             n_elements, section)
    leg2, elements2, frame2 = _straight_beam(mbs, items, RIGHT_ANGLE_ELBOW, RIGHT_ANGLE_TIP, normal,
                                             n_elements, section)
    _clamp(exu, mbs, items, leg1[0], RIGHT_ANGLE_CLAMP, frame1)
    elbow = mbs.AddMarker(items.MarkerNodeRigid(nodeNumber=leg1[-1]))
    elbow2 = mbs.AddMarker(items.MarkerNodeRigid(nodeNumber=leg2[0], localHT=exu.HT(rotation=frame2.T @ frame1)))
    mbs.AddObject(items.GenericJoint(markerNumbers=[elbow, elbow2]))
    peak = np.asarray(RIGHT_ANGLE_FORCE)
    mbs.AddLoad(items.Force(markerNumber=elbow,
                            loadVectorUserFunction=lambda mbs, t, load: list(hat(t, RIGHT_ANGLE_RAMP) * peak)))
    nodes = leg1 + leg2
    sensors = _record(exu, mbs, items, nodes)
    mbs.Assemble()
    wall_setup = time.perf_counter() - tic
    stats = _solve_dynamic(exu, mbs, dt, t_end, rho_inf, RIGHT_ANGLE_RELATIVE_TOLERANCE)
    t, q, v = _states(mbs, sensors, stats["steps"])
    out = {"t": t, "elbow_displacement": q[:, len(leg1) - 1, :3], "tip_displacement": q[:, -1, :3],
           "wall_setup": wall_setup, "n_elements_total": 2 * n_elements, **stats}
    if energies:
        kinetic, strain, _ = _energy_momentum(exu, mbs, nodes, elements1 + elements2, _reference(mbs, nodes), q, v)
        out.update(energy=kinetic + strain, kinetic_energy=kinetic, strain_energy=strain)
    return out
