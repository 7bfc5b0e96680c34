/* main_query.c -- libFuzzer entry point for fuzz_query (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_query(data, n);
	return 0;
}
