#ifndef LSEGRAPH_MODELS_H
#define LSEGRAPH_MODELS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif
/* One header per model, each built only through the public graph API
 * (the models folder): users writing a new model follow exactly what they do. */
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>
#include <lsegraph/models/slds.h>
#include <lsegraph/models/lslds.h>
#include <lsegraph/models/lslds_decode.h>
#include <lsegraph/models/hopfield.h>
#include <lsegraph/models/attention.h>
#include <lsegraph/models/layernorm.h>
#include <lsegraph/models/predcoding.h>
#include <lsegraph/models/idwnet.h>
#include <lsegraph/models/daam.h>
#include <lsegraph/models/capsnet.h>
#include <lsegraph/models/stattn.h>
#include <lsegraph/models/dma.h>
#include <lsegraph/models/etransformer.h>
#endif /* LSEGRAPH_MODELS_H */
