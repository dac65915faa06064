#ifndef LSEGRAPH_CORE_H
#define LSEGRAPH_CORE_H

/**
 * @file core.h
 * @brief The core alone: graphs, similarities, solvers, I/O and the verbs
 * models are built from (collectives, k-means, covariance layouts, term
 * M-steps), without any model. <lsegraph/lsegraph.h> is this plus every
 * model (<lsegraph/models.h>); the library's own core files include only
 * this header, so the core cannot call a model.
 */

#ifndef LSEGRAPH_INSIDE
#define LSEGRAPH_INSIDE
#define LSEGRAPH_CORE_SET_INSIDE
#endif
#include <lsegraph/status.h>
#include <lsegraph/energy.h>
#include <lsegraph/sim.h>
#include <lsegraph/compose.h>
#include <lsegraph/graph.h>
#include <lsegraph/solver.h>
#include <lsegraph/io.h>
#include <lsegraph/comm.h>
#include <lsegraph/kmeans.h>
#include <lsegraph/cov.h>
#include <lsegraph/covmodel.h>
#include <lsegraph/hc.h>
#include <lsegraph/mstep.h>
#include <lsegraph/ode.h>
#include <lsegraph/optim.h>
#include <lsegraph/loss.h>
#include <lsegraph/heads.h>
#include <lsegraph/stream.h>
#include <lsegraph/kalman.h>
#ifdef LSEGRAPH_CORE_SET_INSIDE
#undef LSEGRAPH_INSIDE
#undef LSEGRAPH_CORE_SET_INSIDE
#endif

#endif /* LSEGRAPH_CORE_H */
