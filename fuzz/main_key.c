/* main_key.c -- libFuzzer entry point for fuzz_key (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_key(data, n);
	return 0;
}
