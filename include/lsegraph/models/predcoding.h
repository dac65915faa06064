#ifndef LSEGRAPH_MODELS_PREDCODING_H
#define LSEGRAPH_MODELS_PREDCODING_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif
#endif /* LSEGRAPH_MODELS_PREDCODING_H */
