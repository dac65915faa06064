/* lsefit gmm plot / lsefit slds plot (tools/lsefit_plot.c): the fit
 * plots, dispatched from lsefit_gmm.c and lsefit_slds.c. */
#ifndef LSEFIT_PLOT_H
#define LSEFIT_PLOT_H

int lsefit_gmm_plot_main(int argc, char **argv);
int lsefit_slds_plot_main(int argc, char **argv);

/* The posterior of a latent SLDS model file ("slds-latent") on a series,
 * for lsefit slds plot (tools/lsefit_lslds.c): the data, the mode path
 * (Viterbi of q(z), argmax for a mixture), q(z) and the smoothed latent
 * means and variances. */
#include "lsefit_data.h"
typedef struct lsefit_lslds_view {
    lsefit_data data;
    char **names;
    size_t K, D;
    int markov;
    size_t *path;           /* (T) */
    gsl_matrix *w, *x, *v;  /* (T, K) q(z); (T, D) E[x_t], Var[x_t] */
} lsefit_lslds_view;
/* 1 when @p model is a latent SLDS model file. */
int lsefit_lslds_is_latent(const char *model);
int lsefit_lslds_view_load(const char *model, lsefit_data_opts *dopt,
                           lsefit_lslds_view *v);
void lsefit_lslds_view_free(lsefit_lslds_view *v);

#endif
