/* Shared by the fuzz targets: a check that holds in release builds too
 * (NDEBUG turns assert off) and that libFuzzer reports as a crash. */
#ifndef AB_FUZZ_H
#define AB_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
