/* main_sig.c -- libFuzzer entry point for fuzz_sig (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_sig(data, n);
	return 0;
}
