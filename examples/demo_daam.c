/* Multi-head DAAM on the four iris measurements (docs/models/daam.md):
 * three heads start at three random flowers, the density fit learns the
 * head offsets delta and widths c, and the importance factor of each
 * feature is printed (axis "rows": each feature standardized over the
 * 150 flowers).
 * Usage: demo_daam [HEADS] [SEED] [features|rows] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

int main(int argc, char **argv)
{
    const size_t heads = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 3;
    const unsigned long seed = argc > 2 ? strtoul(argv[2], NULL, 10) : 1;
    const lse_daam_axis axis = argc > 3 && strcmp(argv[3], "features") == 0
                                   ? LSE_DAAM_FEATURES
                                   : LSE_DAAM_ROWS;
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    const size_t cols[4] = {0, 1, 2, 3}; /* species (column 5) is text */
    if (lse_table_read(LSE_DATA_DIR "/iris.csv", NULL, &t, &err) != LSE_OK ||
        lse_table_to_matrix(t, cols, 4, LSE_MISSING_ERROR, &x, NULL, &err) !=
            LSE_OK) {
        fprintf(stderr, "demo_daam: %s\n", err.message);
        lse_table_free(t);
        return 1;
    }
    lse_daam *m = NULL;
    if (lse_daam_new(heads, 4, axis, 1e-5, x, &m, &err) != LSE_OK) {
        fprintf(stderr, "demo_daam: %s\n", err.message);
        lse_table_free(t);
        gsl_matrix_free(x);
        return 1;
    }
    gsl_vector *da0 = gsl_vector_alloc(4), *if0 = gsl_vector_alloc(4);
    gsl_vector *da = gsl_vector_alloc(4), *imp = gsl_vector_alloc(4);
    lse_daam_fit_report rep;
    lse_status st = lse_daam_init(m, seed, &model_err);
    if (st == LSE_OK)
        st = lse_daam_importance(m, da0, if0, &model_err);
    if (st == LSE_OK)
        st = lse_daam_fit(m, 2000, 1e-9, &rep, &model_err);
    if (st == LSE_OK)
        st = lse_daam_importance(m, da, imp, &model_err);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_daam: %s\n", model_err.message);
    } else {
        printf("DAAM on iris: %zu rows, %zu heads, axis %s\n", x->size1, heads,
               axis == LSE_DAAM_ROWS ? "rows" : "features");
        printf("density fit: E_fit %.4f -> %.4f in %zu steps (%s)\n",
               rep.energy_before, rep.energy_after, rep.n_iter,
               rep.converged ? "converged" : "step limit");
        if (rep.n_collapsed > 0)
            printf("warning: %zu head%s collapsed onto the width floor %g "
                   "(too few rows per head; use fewer heads)\n",
                   rep.n_collapsed, rep.n_collapsed == 1 ? "" : "s",
                   lse_daam_min_width(m));
        const gsl_matrix *c = lse_node_value(lse_daam_width(m));
        const gsl_matrix *d = lse_node_value(lse_daam_delta(m));
        for (size_t h = 0; h < heads; h++)
            printf("head %zu: c = %.4f, delta = [%.3f %.3f %.3f %.3f]\n", h,
                   gsl_matrix_get(c, h, 0), gsl_matrix_get(d, h, 0),
                   gsl_matrix_get(d, h, 1), gsl_matrix_get(d, h, 2),
                   gsl_matrix_get(d, h, 3));
        printf("%-13s %10s %8s %10s %8s\n", "feature", "DA (init)", "IF",
               "DA (fit)", "IF");
        for (size_t j = 0; j < 4; j++)
            printf("%-13s %10.4f %8.4f %10.4f %8.4f\n",
                   lse_table_column_name(t, j), gsl_vector_get(da0, j),
                   gsl_vector_get(if0, j), gsl_vector_get(da, j),
                   gsl_vector_get(imp, j));
    }
    gsl_vector_free(da0);
    gsl_vector_free(if0);
    gsl_vector_free(da);
    gsl_vector_free(imp);
    lse_daam_free(m);
    lse_table_free(t);
    gsl_matrix_free(x);
    return st == LSE_OK ? 0 : 1;
}
