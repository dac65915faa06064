/* lsefit: the commands the dispatcher (lsefit.c) and the commands
 * themselves hand over to; private to tools/lsefit*.c. */
#ifndef LSEFIT_CMD_H
#define LSEFIT_CMD_H

/* ------------------------------------------------------------------ */
/* Commands                                                            */

int lsefit_gmm_main(int argc, char **argv);
/* lsefit_select.c: --covariance all or mclust's names (the model table) */
int lsefit_select_wanted(int argc, char **argv);
int lsefit_select_main(int argc, char **argv);
int lsefit_slds_main(int argc, char **argv);
/* lsefit_lslds.c: lsefit slds --latent-dim D and the latent model files */
int lsefit_lslds_wanted(int argc, char **argv);
int lsefit_lslds_main(int argc, char **argv);

#endif /* LSEFIT_CMD_H */
