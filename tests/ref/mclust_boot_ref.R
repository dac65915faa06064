# Reference standard errors of mclust's parametric bootstrap
# (MclustBootstrap, type "pb", 999 replicates) on the bundled Faithful,
# K = 2, full covariances (VVV), read by tests/test_gmm_starts.c. Run from
# the repository root (needs r-cran-mclust):
#   Rscript tests/ref/mclust_boot_ref.R > tests/ref/mclust_boot_ref.txt
# Lines: "pro" K values; "mean" K x d (by component); "var" K x d x d (by
# component, row-major); all standard errors. Components are ordered by
# their mean eruption time.
suppressPackageStartupMessages(library(mclust))
set.seed(1)
X <- as.matrix(read.csv("data/faithful.csv"))
fit <- Mclust(X, G = 2, modelNames = "VVV", verbose = FALSE)
b <- MclustBootstrap(fit, nboot = 999, type = "pb", verbose = FALSE)
se <- summary(b, what = "se")
o <- order(fit$parameters$mean[1, ])
f <- function(x) sprintf("%.10g", x)
cat("# mclust", as.character(packageVersion("mclust")), "nboot 999 type pb\n")
cat("pro", f(se$pro[o]), "\n")
cat("mean", f(se$mean[, o]), "\n")
cat("var", unlist(lapply(o, function(k) f(t(se$variance[, , k])))), "\n")
