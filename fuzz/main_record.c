/* main_record.c -- libFuzzer entry point for fuzz_record (see targets.h). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_record(data, n);
	return 0;
}
