#ifndef LSEGRAPH_NUMPARSE_PRIVATE_H
#define LSEGRAPH_NUMPARSE_PRIVATE_H

#include <stddef.h>

/* Fast decimal-to-double conversion for the CSV reader (lib/numparse.c;
 * never installed). lse_parse_decimal(s, n, &v) returns 1 and stores in v
 * exactly what strtod(s) would return (correctly rounded, the C library's
 * round-to-nearest-even), when s[0..n) is a plain decimal number
 *   [+-] digits [. digits] [(e|E) [+-] digits]     (a digit on either side
 * of the point) of at most 19 significant digits whose value is a finite
 * double that is not rounded to 0 (the Eisel-Lemire method, integer
 * arithmetic only). Otherwise (other syntax: hex, inf, nan, text; more
 * digits; overflow or underflow; the rare products too close to a rounding
 * boundary, exact ties w 10^q with q < 0 among them) it returns 0 and the
 * caller must use strtod. It reads nothing outside s[0..n). */
int lse_parse_decimal(const char *s, size_t n, double *v);

#endif /* LSEGRAPH_NUMPARSE_PRIVATE_H */
