/* main_range.c -- libFuzzer entry point for fuzz_range (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_range(data, n);
	return 0;
}
