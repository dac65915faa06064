#ifndef LSEGRAPH_MODELS_H
#define LSEGRAPH_MODELS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif
/* One header per model in include/lsegraph/models/, built only through
 * the public graph API (models/). */
#endif /* LSEGRAPH_MODELS_H */
