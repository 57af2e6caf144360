"""The joint catalogue at work: P6 Thompson's pendulum, P7 the double four-bar (redundant
constraints), a spatial double pendulum and a driven slider-crank loop.

    python examples/mechanisms.py           # prints each assembly report and conservation summary,
                                            # writes mechanisms_*.png
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import conserve as cs  # noqa: E402
from conserve import problems  # noqa: E402
from conserve.results.plotting import plot_conservation  # noqa: E402

# P6: revolute pivot + rotary spring-damper, against the reduced equation
pendulum = problems.ThompsonPendulum()
sol = cs.simulate(pendulum.system(), t_end=5.0, dt=2.5e-3)
print("P6 Thompson's pendulum:", sol.summary(), sep="\n")
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(sol.t, pendulum.beta(sol), label="conserve (director EM), Δt = 2.5e-3")
ax.plot(sol.t, pendulum.reference(sol.t), "--", label="reduced equation (scipy DOP853)")
ax.set_xlabel("t [s]")
ax.set_ylabel("β [rad]")
ax.legend()
fig.tight_layout()
fig.savefig("mechanisms_pendulum.png", dpi=110)

# P7: the planar loops are redundant in 3-D; assembly finds and drops 6 equations
four_bar = problems.double_four_bar().assemble()
print("\nP7 double four-bar:", four_bar.report(), sep="\n")
sol = cs.simulate(four_bar, t_end=10.0, dt=1e-3)
print(sol.summary())
plot_conservation(sol, "mechanisms_four_bar.png", title="P7 double four-bar", momentum_components=(2,))

# a spatial double pendulum: spherical + revolute
sol = cs.simulate(problems.double_pendulum(), t_end=10.0, dt=5e-3)
print("\nDouble pendulum:", sol.summary(), sep="\n")
plot_conservation(sol, "mechanisms_double_pendulum.png", title="Spatial double pendulum", momentum_components=(2,))

# a closed loop driven by a crank motor: the energy changes by exactly the motor's work
crank = problems.slider_crank(motor=lambda t, crank: 0.2 * (1.0 - crank.rate / 5.0))
sol = cs.simulate(crank, t_end=2.0, dt=1e-3)
print("\nSlider-crank with motor:", sol.summary(), sep="\n")
plot_conservation(sol, "mechanisms_slider_crank.png", title="Slider-crank: energy balance with motor work",
                  momentum_components=())
print("\nwrote mechanisms_pendulum.png, mechanisms_four_bar.png, mechanisms_double_pendulum.png, "
      "mechanisms_slider_crank.png")
