#!/usr/bin/python3
"""Reference values for the Markov-switching SLDS with exogenous regressors
and shared (non-switching) parts, from statsmodels.

Run from the source root:  /usr/bin/python3 tests/ref/slds_statsmodels_exog.py
(Debian's python3-statsmodels; it writes tests/ref/slds_statsmodels_exog.txt,
which tests/test_statsmodels_exog.c reads).

Model: lsefit's Markov SLDS with d = 1, L = 1 and p regressors u_t is
statsmodels' MarkovRegression of y_t on [y_(t-1), u_t] (its exog columns
x1, x2, ...), y_t = const[k] + x1[k] y_(t-1) + x2[k] u_t + e_t,
e_t ~ N(0, sigma2[k]), conditioned on the first value; a part that does
not switch (switching_trend / switching_exog / switching_variance False)
is lsefit's shared part (lse_slds_config.shared; the variance: covariance
type tied). As in tests/ref/slds_statsmodels.py, statsmodels is
initialized with a known p0 and the test gives lsefit (P^T)^2 p0. On GDP
that p0 matters: lsefit's family frees the first step's mode
probabilities and its maximum (log-likelihood -242.68, the recession
mode less persistent) is not statsmodels' (-243.14, with p0 on the
recession mode; -243.60 with p0 on the expansion), so the test checks
lsefit's fit against the GDP reference by log-likelihood only.

Sets:
  gdp-mean: US GDP growth, only the intercept switches (Hamilton 1989's
      switching mean; the AR(1) slope and the variance are shared).
  dax-exog: DAX daily log returns with the regressor abs_prev_pct =
      |log return of the previous day| (data/dax_vol.csv, derived from
      data/dax_returns.csv), every part switching.
  dax-shared: the same regressor, the lag and regressor slopes shared,
      intercept and variance switching.

statsmodels fits from several starts (its own EM + BFGS from the given
start and from a perturbed one, then Nelder-Mead and BFGS again) and the
best maximum is kept. Written per set: the maximum log-likelihood, the
parameters with standard errors (statsmodels' default 'approx': inverse of
the numerical Hessian), the filtered and smoothed mode probabilities.
"""
import os
import sys
import warnings

try:
    import numpy as np
    import pandas as pd
    import statsmodels
    import statsmodels.api as sm
except ImportError as e:  # the stored references stay; nothing to redo
    print("skip: %s (Debian: python3-statsmodels)" % e, file=sys.stderr)
    sys.exit(77)

warnings.simplefilter("ignore")
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "..", "data")

# name, file, column, exog column or None, switching (trend, [exog...],
# variance), p0, start
SETS = [
    ("gdp-mean", "gdp_growth.csv", "growth_pct", None,
     (True, [False], False), [1.0, 0.0],
     [0.7, 0.05, -0.38, 0.84, 0.14, 0.52]),
    ("dax-exog", "dax_vol.csv", "logret_pct", "abs_prev_pct",
     (True, [True, True], True), [0.0, 1.0],
     [0.97, 0.013, -0.1, 0.1, 0.0, -0.02, 0.1, 0.0, 2.5, 0.55]),
    ("dax-shared", "dax_vol.csv", "logret_pct", "abs_prev_pct",
     (True, [False, False], True), [0.0, 1.0],
     [0.97, 0.013, -0.1, 0.1, 0.0, 0.0, 2.5, 0.55]),
]


def fit_best(m, start):
    rs = []
    for s in (np.array(start), np.array(start) * 1.05):
        try:
            r = m.fit(start_params=s, maxiter=5000, disp=False)
            r2 = m.fit(start_params=r.params, maxiter=5000, disp=False,
                       method="nm")
            r3 = m.fit(start_params=r2.params, maxiter=5000, disp=False)
            rs += [r, r2, r3]
        except Exception as e:  # a start statsmodels cannot use
            print("start failed:", e, file=sys.stderr)
    return max(rs, key=lambda q: q.llf)


out = open(os.path.join(here, "slds_statsmodels_exog.txt"), "w")
out.write("# Markov-switching regression on the lagged value and regressors,\n"
          "# some parts shared; statsmodels %s, numpy %s; made by\n"
          "# tests/ref/slds_statsmodels_exog.py (read by "
          "tests/test_statsmodels_exog.c)\n"
          % (statsmodels.__version__, np.__version__))
for name, fname, col, xcol, (sw_trend, sw_exog, sw_var), p0, start in SETS:
    df = pd.read_csv(os.path.join(data, fname))
    y = df[col].to_numpy(float)
    X = [y[:-1]]
    if xcol is not None:
        X.append(df[xcol].to_numpy(float)[1:])
    X = np.column_stack(X)
    m = sm.tsa.MarkovRegression(y[1:], k_regimes=2, exog=X,
                                switching_trend=sw_trend,
                                switching_exog=sw_exog,
                                switching_variance=sw_var)
    m.initialize_known(np.array(p0))
    best = fit_best(m, start)
    shared = []
    if not sw_trend:
        shared.append("intercept")
    if not sw_exog[0]:
        shared.append("ar")
    if len(sw_exog) > 1 and not sw_exog[1]:
        shared.append("exog")
    out.write("set %s %s %s %d\n" % (name, fname, col, len(y) - 1))
    out.write("exog %s\n" % (xcol if xcol is not None else "-"))
    out.write("shared %s\n" % (",".join(shared) if shared else "-"))
    out.write("variance %s\n" % ("switching" if sw_var else "shared"))
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
    print(name, best.llf, dict(zip(m.param_names, best.params)),
          best.bse, file=sys.stderr)
out.close()
