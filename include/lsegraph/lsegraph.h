#ifndef LSEGRAPH_LSEGRAPH_H
#define LSEGRAPH_LSEGRAPH_H

/**
 * @file lsegraph.h
 * @brief The only header users include: energy-based models on
 * log-sum-exp graphs. See README.md and docs/ for the mathematics.
 */

#define LSEGRAPH_INSIDE
#include <lsegraph/status.h>
#include <lsegraph/energy.h>
#include <lsegraph/sim.h>
#include <lsegraph/graph.h>
#include <lsegraph/solver.h>
#include <lsegraph/io.h>
#include <lsegraph/comm.h>
#include <lsegraph/kmeans.h>
#include <lsegraph/cov.h>
#include <lsegraph/covmodel.h>
#include <lsegraph/mstep.h>
#include <lsegraph/models.h>
#undef LSEGRAPH_INSIDE

#endif /* LSEGRAPH_LSEGRAPH_H */
