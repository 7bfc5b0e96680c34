/* main_vresp.c -- libFuzzer entry point for fuzz_vresp (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_vresp(data, n);
	return 0;
}
