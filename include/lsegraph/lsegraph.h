#ifndef LSEGRAPH_LSEGRAPH_H
#define LSEGRAPH_LSEGRAPH_H

/**
 * @file lsegraph.h
 * @brief The header users include: energy-based models on log-sum-exp
 * graphs, the core (<lsegraph/core.h>) and every model
 * (<lsegraph/models.h>). See README.md and docs/ for the mathematics.
 */

#define LSEGRAPH_INSIDE
#include <lsegraph/core.h>
#include <lsegraph/models.h>
#undef LSEGRAPH_INSIDE

#endif /* LSEGRAPH_LSEGRAPH_H */
