# Reference values of mclust's 14 covariance models on the bundled Faithful
# and Iris (columns 1-4) for K = 1..4, read by tests/test_mclust.c.
# Run from the repository root (needs r-cran-mclust):
#   Rscript tests/ref/mclust_ref.R > tests/ref/mclust_ref.txt
# For every (data, model, K): Mclust's default fit (hierarchical start, its
# default tolerances), then that fit polished to convergence with me() from
# its own posteriors (tol 1e-13 on the log-likelihood and the inner
# iterations), so that a test can start EM at the polished parameters and
# demand the same optimum. Lines:
#   data model K df loglik_default bic_default loglik bic
#   pro(K) mean(K x d, by component) sigma(K x d x d, by component, row-major)
# bic is mclust's: 2 loglik - df log n (larger is better). NA: mclust found
# no fit (singular covariance).
suppressPackageStartupMessages(library(mclust))
sets <- list(
  faithful = as.matrix(read.csv("data/faithful.csv")),
  iris = as.matrix(read.csv("data/iris.csv")[, 1:4]))
models <- c("EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE", "VEE", "EVE",
            "VVE", "EEV", "VEV", "EVV", "VVV")
f <- function(x) sprintf("%.17g", x)
cat("# mclust", as.character(packageVersion("mclust")), "R",
    R.version$major, R.version$minor, "\n")
for (name in names(sets)) {
  X <- sets[[name]]
  n <- nrow(X); d <- ncol(X)
  for (m in models) for (K in 1:4) {
    fit <- tryCatch(Mclust(X, G = K, modelNames = m, verbose = FALSE),
                    error = function(e) NULL)
    if (is.null(fit)) { cat(name, m, K, "NA\n"); next }
    pol <- me(X, modelName = m, z = fit$z,
              control = emControl(tol = c(1e-13, 1e-13),
                                  itmax = c(100000L, 100000L)))
    if (is.null(pol$loglik) || !is.finite(pol$loglik)) {
      cat(name, m, K, "NA\n"); next
    }
    df <- nMclustParams(m, d, K)
    bic <- 2 * pol$loglik - df * log(n)
    sig <- pol$parameters$variance$sigma
    cat(name, m, K, df, f(fit$loglik), f(fit$bic), f(pol$loglik), f(bic),
        f(pol$parameters$pro),
        f(pol$parameters$mean),
        unlist(lapply(1:K, function(k) f(t(sig[, , k])))), "\n")
  }
}
