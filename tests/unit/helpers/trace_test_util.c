/*
 * trace_test_util.c -- helpers for the trace tests (see trace_test_util.h).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "helpers/trace_test_util.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "trace/codec.h"
#include "trace/format.h"

uint8_t *tt_unhex(const char *hex, size_t *n)
{
    size_t len = strlen(hex);
    uint8_t *out = malloc(len / 2 + 1);
    assert_non_null(out);
    size_t k = 0;
    int hi = -1;
    for (size_t i = 0; i < len; i++) {
        if (hex[i] == ' ' || hex[i] == '\n')
            continue;
        int v = lmc_hex_digit(hex[i]);
        if (v < 0)
            fail_msg("bad hex character '%c' in test vector", hex[i]);
        if (hi < 0) {
            hi = v;
        } else {
            out[k++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    if (hi >= 0)
        fail_msg("odd number of hex digits in test vector");
    *n = k;
    return out;
}

char *tt_hex(const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *s = malloc(2 * n + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = digits[((const uint8_t *)p)[i] >> 4];
        s[2 * i + 1] = digits[((const uint8_t *)p)[i] & 0xf];
    }
    s[2 * n] = '\0';
    return s;
}

void tt_assert_hex(const void *p, size_t n, const char *hex)
{
    size_t wn;
    uint8_t *want = tt_unhex(hex, &wn);
    if (wn != n || memcmp(want, p, n) != 0) {
        char *got = tt_hex(p, n);
        char *exp = tt_hex(want, wn);
        print_error("bytes differ\n  got:  %s\n  want: %s\n", got, exp);
        free(got);
        free(exp);
        free(want);
        fail();
    }
    free(want);
}

void tt_encode(const lmc_tv *v, msgpack_sbuffer *sb)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = lmc_codec_encode_value(&pk, v, &err);
    if (st != LMC_OK)
        fail_msg("encode failed: %s", err.msg);
}

lmc_status tt_decode(const void *bytes, size_t n, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, bytes, n, &off) != MSGPACK_UNPACK_SUCCESS)
        fail_msg("test bytes are not msgpack");
    lmc_status st = lmc_codec_decode_value(&up.data, a, out, err);
    msgpack_unpacked_destroy(&up);
    return st;
}

lmc_tv tt_round_trip(const lmc_tv *v, lmc_arena *a)
{
    msgpack_sbuffer sb;
    tt_encode(v, &sb);
    lmc_tv out;
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = tt_decode(sb.data, sb.size, a, &out, &err);
    msgpack_sbuffer_destroy(&sb);
    if (st != LMC_OK)
        fail_msg("decode failed: %s", err.msg);
    return out;
}

lmc_object_key tt_key(const char *model, uint32_t hash, int64_t kv_rank, int64_t group,
                      const char *salt)
{
    uint8_t h[4] = {(uint8_t)(hash >> 24), (uint8_t)(hash >> 16), (uint8_t)(hash >> 8),
                    (uint8_t)hash};
    lmc_object_key key;
    lmc_error err;
    if (lmc_object_key_make(&key, h, sizeof(h), model, kv_rank, group, salt, &err) != LMC_OK)
        fail_msg("key: %s", err.msg);
    return key;
}

/* ---------------------------------------------------------------------- */

#define CAP_MAX 64
#define CAP_LEN 512

static pthread_mutex_t g_cap_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_cap[CAP_MAX][CAP_LEN];
static size_t g_cap_n;

static void capture_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)component;
    (void)ud;
    if (level < LMC_LOG_WARNING)
        return;
    pthread_mutex_lock(&g_cap_lock);
    if (g_cap_n < CAP_MAX)
        snprintf(g_cap[g_cap_n++], CAP_LEN, "%s", msg);
    pthread_mutex_unlock(&g_cap_lock);
}

void tt_log_capture_start(void)
{
    pthread_mutex_lock(&g_cap_lock);
    g_cap_n = 0;
    pthread_mutex_unlock(&g_cap_lock);
    lmc_log_set_sink(capture_sink, NULL);
}

void tt_log_capture_stop(void)
{
    lmc_log_set_sink(NULL, NULL);
}

size_t tt_log_count(void)
{
    pthread_mutex_lock(&g_cap_lock);
    size_t n = g_cap_n;
    pthread_mutex_unlock(&g_cap_lock);
    return n;
}

size_t tt_log_count_containing(const char *needle)
{
    size_t hits = 0;
    pthread_mutex_lock(&g_cap_lock);
    for (size_t i = 0; i < g_cap_n; i++)
        hits += strstr(g_cap[i], needle) != NULL;
    pthread_mutex_unlock(&g_cap_lock);
    return hits;
}

const char *tt_log_message(size_t i)
{
    return i < g_cap_n ? g_cap[i] : "";
}

/* ---------------------------------------------------------------------- */

void tt_tmpdir(char *buf)
{
    strcpy(buf, "/tmp/lmc-trace-test-XXXXXX");
    assert_non_null(mkdtemp(buf));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tt_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tt_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n > 0)
        assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The Header frame of a storage-level trace of the given schema and config digest into sb. */
static void storage_header(msgpack_sbuffer *sb, int64_t schema, const char *digest,
                           double t_mono_start, double t_wall_start)
{
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, LMC_TRACE_MAGIC, 4);
    h.magic_len = 4;
    h.format_version = LMC_TRACE_FORMAT_VERSION;
    h.level = "storage";
    h.trace_schema_version = schema;
    h.t_mono_start = t_mono_start;
    h.t_wall_start = t_wall_start;
    h.sm_config_json = "";
    h.sm_config_digest = (char *)digest;
    assert_int_equal(lmc_trace_encode_header(sb, &h, NULL), LMC_OK);
}

void tt_trace_file_init(tt_trace_file *f, const char *digest)
{
    memset(f, 0, sizeof(*f));
    tt_tmpdir(f->dir);
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    msgpack_sbuffer_init(&f->sb);
    storage_header(&f->sb, 2, digest, 0, 0);
}

void tt_trace_file_write(const tt_trace_file *f)
{
    tt_write_file(f->path, f->sb.data, f->sb.size);
}

void tt_trace_file_free(tt_trace_file *f)
{
    msgpack_sbuffer_destroy(&f->sb);
    tt_rmtree(f->dir);
}

int tt_trace_file_setup(void **state)
{
    tt_trace_file *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    tt_trace_file_init(f, "abc");
    tt_log_capture_start();
    *state = f;
    return 0;
}

int tt_trace_file_teardown(void **state)
{
    tt_log_capture_stop();
    tt_trace_file_free(*state);
    free(*state);
    return 0;
}

void tt_trace_begin(tt_trace *t, int64_t schema)
{
    msgpack_sbuffer_init(&t->buf);
    storage_header(&t->buf, schema, "", 100.0, 1700000000.0);
}

static void keys_record(tt_trace *t, double t_mono, const char *qualname,
                        const lmc_object_key *keys, size_t n, const lmc_layout_desc *lay,
                        const char *mode, int64_t extra_count)
{
    lmc_tv *items = calloc(n ? n : 1, sizeof(*items));
    assert_non_null(items);
    for (size_t i = 0; i < n; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    lmc_trace_arg args[4];
    size_t na = 0;
    args[na++] = (lmc_trace_arg){"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, n}}};
    if (lay)
        args[na++] = (lmc_trace_arg){"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = lay}};
    if (mode)
        args[na++] = (lmc_trace_arg){"mode", 4, lmc_tv_str(mode, strlen(mode))};
    if (extra_count >= 0)
        args[na++] = (lmc_trace_arg){"extra_count", 11, {.kind = LMC_TV_INT, .u.i = extra_count}};
    assert_int_equal(lmc_trace_encode_record(&t->buf, t_mono, 1700000000.0 + t_mono, qualname,
                                             strlen(qualname), args, na, NULL),
                     LMC_OK);
    free(items);
}

void tt_trace_keys_record(tt_trace *t, double t_mono, const char *qualname,
                          const lmc_object_key *keys, size_t n, const lmc_layout_desc *lay,
                          const char *mode)
{
    keys_record(t, t_mono, qualname, keys, n, lay, mode, -1);
}

void tt_trace_keys_record_extra(tt_trace *t, double t_mono, const char *qualname,
                                const lmc_object_key *keys, size_t n, const lmc_layout_desc *lay,
                                int64_t extra_count)
{
    keys_record(t, t_mono, qualname, keys, n, lay, NULL, extra_count);
}

void tt_trace_end(tt_trace *t, const char *path)
{
    tt_write_file(path, t->buf.data, t->buf.size);
    msgpack_sbuffer_destroy(&t->buf);
}
