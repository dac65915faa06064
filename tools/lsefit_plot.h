/* lsefit gmm plot / lsefit slds plot (tools/lsefit_plot.c): the fit
 * plots, dispatched from lsefit_gmm.c and lsefit_slds.c. */
#ifndef LSEFIT_PLOT_H
#define LSEFIT_PLOT_H

int lsefit_gmm_plot_main(int argc, char **argv);
int lsefit_slds_plot_main(int argc, char **argv);

#endif
