/* main_path.c -- libFuzzer entry point for fuzz_path (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_path(data, n);
	return 0;
}
