#!/usr/bin/python3
"""Reference values for the Markov-switching SLDS from statsmodels.

Run from the source root:  /usr/bin/python3 tests/ref/slds_statsmodels.py
(Debian's python3-statsmodels; it writes tests/ref/slds_statsmodels.txt,
which tests/test_statsmodels.c reads).

Model: lsefit's Markov SLDS with d = 1, L = 1 is statsmodels'
MarkovRegression of y_t on the regressor y_(t-1) with every part
switching (intercept, slope, variance): y_t = const[k] + x1[k] y_(t-1)
+ e_t, e_t ~ N(0, sigma2[k]), conditioned on the first value. lsefit fits
the initial mode distribution p0 too and its maximum puts all mass on one
mode, so statsmodels is initialized with a known p0 (initialize_known)
rather than its default steady state. statsmodels 0.13's filter moves
its p0 by the transition matrix twice before the first step (its
predicted probabilities of step 0 are (P^T)^2 p0); the test gives lsefit
that (P^T)^2 p0 as its first-step p0. statsmodels fits by EM then BFGS from the
start below (near lsefit's fit, so that both find the same maximum and
number the modes alike); its default covariance ('approx') is the inverse
of the numerical Hessian of the log-likelihood. Written per data set: the
maximum log-likelihood, the parameters with standard errors, and the
filtered and smoothed mode probabilities at the maximum.
"""
import os
import sys
import warnings

import numpy as np
import pandas as pd
import statsmodels
import statsmodels.api as sm

warnings.simplefilter("ignore")
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "..", "data")

# name, file, column, p0, start (p[0->0], p[1->0], const, x1, sigma2 per mode)
SETS = [
    ("gdp", "gdp_growth.csv", "growth_pct", [1.0, 0.0],
     [0.96, 0.05, 0.5, 0.7, 0.3, 0.13, 1.0, 0.16]),
    ("dax", "dax_returns.csv", "logret_pct", [0.0, 1.0],
     [0.97, 0.013, -0.05, 0.11, 0.0, -0.02, 2.5, 0.55]),
]

out = open(os.path.join(here, "slds_statsmodels.txt"), "w")
out.write("# Markov-switching regression on the lagged value, every part\n"
          "# switching; statsmodels %s, numpy %s; made by\n"
          "# tests/ref/slds_statsmodels.py (read by tests/test_statsmodels.c)\n"
          % (statsmodels.__version__, np.__version__))
for name, fname, col, p0, start in SETS:
    y = pd.read_csv(os.path.join(data, fname))[col].to_numpy(float)
    m = sm.tsa.MarkovRegression(y[1:], k_regimes=2, exog=y[:-1],
                                switching_variance=True)
    m.initialize_known(np.array(p0))
    r = m.fit(start_params=np.array(start), maxiter=5000, disp=False)
    r2 = m.fit(start_params=r.params, maxiter=5000, disp=False,
               method="nm")  # polish, then BFGS again from there
    r3 = m.fit(start_params=r2.params, maxiter=5000, disp=False)
    best = max([r, r2, r3], key=lambda q: q.llf)
    out.write("set %s %s %s %d\n" % (name, fname, col, len(y) - 1))
    out.write("p0 %.17g %.17g\n" % tuple(p0))
    out.write("llf %.17g\n" % best.llf)
    for pn, est, se in zip(m.param_names, best.params, best.bse):
        out.write("param %s %.17g %.17g\n" % (pn, est, se))
    f = best.filtered_marginal_probabilities
    s = best.smoothed_marginal_probabilities
    for t in range(len(y) - 1):
        out.write("prob %d %.17g %.17g %.17g %.17g\n"
                  % (t, f[t, 0], f[t, 1], s[t, 0], s[t, 1]))
    out.write("end\n")
    print(name, best.llf, best.params, best.bse, file=sys.stderr)
out.close()
