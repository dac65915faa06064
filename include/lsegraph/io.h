#ifndef LSEGRAPH_IO_H
#define LSEGRAPH_IO_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif
/* CSV tables and JSON helpers: filled in by lib/io.c (see docs/io.md). */
#endif /* LSEGRAPH_IO_H */
