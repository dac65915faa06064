# Reference values of mclust's model-based hierarchical agglomeration hcVVV
# (Mclust's default start: hc(modelName = "VVV", use = "SVD") on the data) on the bundled Faithful and Iris (columns
# 1-4), read by tests/test_hc.c. Run from the repository root (needs
# r-cran-mclust):
#   Rscript tests/ref/hcvvv_ref.R > tests/ref/hcvvv_ref.txt
# Lines:
#   data NAME n d
#   z ROW z_1 .. z_d        the transformed data (use = "SVD"), 17 digits
#   merge T A B             merge T (1-based):
#                           the clusters whose first rows (0-based) are
#                           A < B; the union keeps A
#   class G l_1 .. l_n      hclass(tree, G): the partition into G groups,
#                           labels numbered by first appearance (0-based)
suppressPackageStartupMessages(library(mclust))
sets <- list(
  faithful = as.matrix(read.csv("data/faithful.csv")),
  iris = as.matrix(read.csv("data/iris.csv")[, 1:4]))
f <- function(x) sprintf("%.17g", x)
cat("# mclust", as.character(packageVersion("mclust")), "R",
    R.version$major, R.version$minor, "\n")
relabel <- function(l) match(l, unique(l)) - 1
for (name in names(sets)) {
  X <- sets[[name]]
  dimnames(X) <- NULL
  n <- nrow(X); d <- ncol(X)
  tree <- hc(X, modelName = "VVV", use = "SVD")
  Z <- attr(tree, "data")
  cat("data", name, n, d, "\n")
  for (i in 1:n) cat("z", i - 1, f(Z[i, ]), "\n")
  # tree column t: label max(i, j) becomes min(i, j) (hclass); labels are
  # the initial groups, named here by their first row (0-based)
  part <- attr(tree, "initialPartition")
  first <- match(seq_len(max(part)), part) - 1
  for (t in seq_len(ncol(tree))) {
    ab <- sort(first[tree[, t]])
    cat("merge", t, ab, "\n")
  }
  for (G in 1:9) cat("class", G, relabel(hclass(tree, G)), "\n")
}
