#ifndef LSEGRAPH_MODELS_GMM_H
#define LSEGRAPH_MODELS_GMM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif
#endif /* LSEGRAPH_MODELS_GMM_H */
