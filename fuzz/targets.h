/* targets.h -- the fuzz targets, one function per parser.  Each takes any
 * bytes, runs them through the code under test and checks properties that
 * must hold for every input (round trips, bounds, agreement with a plain
 * reference implementation).  A broken property aborts with a message, so
 * libFuzzer counts it as a crash and check(1) as a failed test.
 *
 * The same functions run under libFuzzer (fuzz/main_<target>.c, built by
 * `make fuzz`) and in `make test`, which replays fuzz/corpus/<target>/ and
 * fuzz/regress/<target>/ through them (tests/check_fuzz.c: master and
 * common code; tests/check_volume_fuzz.c: the volume's). */
#ifndef MKV_FUZZ_TARGETS_H
#define MKV_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* key_decode, path_decode, placement_path, placement_volumes (targets_master.c) */
void fuzz_key(const uint8_t *data, size_t n);
/* record_parse / record_encode round trip (targets_master.c) */
void fuzz_record(const uint8_t *data, size_t n);
/* query_decode, url_escape, json_append_string (targets_master.c) */
void fuzz_query(const uint8_t *data, size_t n);
/* sig_check: the Authorization header (SigV4, SigV2) and the presigned
 * query parsers, common/sigv4.c (targets_master.c) */
void fuzz_sig(const uint8_t *data, size_t n);
/* vresp_feed, a volume's answer (common/vconn.c; targets_master.c) */
void fuzz_vresp(const uint8_t *data, size_t n);
/* range_parse, common/range.c (targets_volume.c) */
void fuzz_range(const uint8_t *data, size_t n);
/* vol_path_clean (targets_volume.c) */
void fuzz_path(const uint8_t *data, size_t n);

#endif
