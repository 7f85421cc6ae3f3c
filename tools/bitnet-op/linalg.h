/* linalg.h (bitnet-op) - the linear-algebra ops of bitnet-op. */
#ifndef BITNET_OP_LINALG_H
#define BITNET_OP_LINALG_H

#include "../common.h"

/* FILE[:TENSOR] as f64 when it is f64, else converted to f32. */
int la_load(const char *spec, bitnet_tensor *t);
/* EXIT_FAIL with a message unless the last two axes of a are equal. */
int la_square(const char *op, const bitnet_tensor *a);
/* code: 0 cholesky, 1 qr, 2 svd, 3 solve, 4 lstsq.  Fills out[0..*nout)
 * (release them even on failure).  Returns an exit status. */
int la_run(bitnet_backend *be, int code, int vectors, const bitnet_tensor *a, const bitnet_tensor *b,
           bitnet_tensor *out, int *nout);

#endif
