#ifndef LSEGRAPH_NUMPARSE_PRIVATE_H
#define LSEGRAPH_NUMPARSE_PRIVATE_H

#include <stddef.h>

/* Fast decimal-to-double conversion for the CSV reader (lib/numparse.c;
 * never installed). lse_parse_decimal(s, n, &v) returns 1 and stores in v
 * exactly what strtod(s) would return (correctly rounded, the C library's
 * round-to-nearest-even), when s[0..n) is a plain decimal number
 *   [+-] digits [. digits] [(e|E) [+-] digits]     (a digit on either side
 * of the point) of at most 19 significant digits and a decimal exponent
 * small enough for an exact method (Clinger's with doubles; with the x87
 * 64-bit long double, one rounding and a midpoint check). Otherwise
 * (other syntax: hex, inf, nan, text; too many digits; a halfway case) it
 * returns 0 and the caller must use strtod. x87: lse_parse_decimal_x87(),
 * asked once by the caller for a batch of numbers (0: Clinger's path only). */
int lse_parse_decimal(const char *s, size_t n, double *v, int x87);

/* 1 when the x87 path can be used: x86 with 64-bit long double arithmetic
 * in this thread now (the precision control may have been lowered, and
 * valgrind emulates long doubles in double precision). */
int lse_parse_decimal_x87(void);

#endif /* LSEGRAPH_NUMPARSE_PRIVATE_H */
