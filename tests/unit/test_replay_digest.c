/*
 * test_replay_digest.c -- what a replay's outcome digest promises (issue 15):
 *
 *   - in virtual time, five replays of one trace (one of them with the
 *     second core kept busy) give one outcome digest, in mode calls and in
 *     mode engine, with an L2 adapter of one worker (fs) or several (resp
 *     with four connections, against a private redis-server);
 *   - one changed byte of one key changes the digest;
 *   - on the Mooncake fixture, the engine-mode hit rate and the calls-mode
 *     agreement in virtual time are those of the same replay in realtime,
 *     within a generous bound (realtime depends on the host's timing).
 *
 * The trace is the Mooncake-derived fixture (replay/synth.h: the first
 * requests of ../shared/traces, the synthetic chat workload when that is
 * missing), written as the calls a server makes, with a small L1 so that
 * eviction, L2 stores and L2 loads all happen.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/workload.h"
#include "core/log.h"
#include "helpers/file_test_util.h"
#include "helpers/redis_test_util.h"
#include "helpers/sm_test_util.h"
#include "helpers/trace_test_util.h"
#include "replay/driver.h"
#include "replay/synth.h"
#include "trace/reader.h"

#define RUNS 5
/* 4 MiB of L1: 256 of the fixture's 16 KiB chunks, so L2 serves some lookups. */
#define SM "--l1-size-gb 0.00390625 --eviction-policy LRU"

static char g_dir[64];
static char g_trace[128];

/* The first `requests` requests of the Mooncake trace (or the chat workload) at scale. */
static void write_fixture(const char *path, size_t requests, double time_scale)
{
    char src[1024];
    lmc_workload *w = NULL;
    lmc_error err;
    if (lmc_replay_synth_mooncake_path(src, sizeof(src))) {
        assert_int_equal(lmc_workload_load_mooncake(src, requests, &w, &err), LMC_OK);
    } else {
        lmc_chat_config chat;
        lmc_chat_config_init(&chat);
        chat.users = 16;
        chat.interval_ms = 200;
        assert_int_equal(lmc_workload_chat(&chat, 0, &w, &err), LMC_OK);
    }
    lmc_replay_synth_options o = {.max_requests = requests, .time_scale = time_scale};
    assert_int_equal(lmc_replay_synth_workload(w, path, &o, NULL, &err), LMC_OK);
    lmc_workload_destroy(w);
}

static int setup(void **state)
{
    (void)state;
    lmc_log_set_level(LMC_LOG_ERROR);
    tt_tmpdir(g_dir);
    snprintf(g_trace, sizeof(g_trace), "%s/fixture.lct", g_dir);
    write_fixture(g_trace, 150, 1.0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tt_rmtree(g_dir);
    redis_test_stop();
    return 0;
}

/* One replay's result; fails the test on an error. */
static void replay(const char *path, const char *flags, const char *l2, lmc_replay_mode mode,
                   lmc_replay_pace pace, double time_scale, lmc_replay_result *res)
{
    lmc_sm_config cfg = sm_test_config(flags, l2);
    lmc_replay_options opt = {.time_scale = time_scale, .pace = pace, .mode = mode};
    lmc_error err;
    if (lmc_replay_run(&cfg, path, &opt, res, &err) != LMC_OK)
        fail_msg("replay: %s", err.msg);
    lmc_sm_config_free(&cfg);
    assert_int_equal(res->failed, 0);
}

/* An L2 adapter that starts empty: an fs base_path of its own, or a flushed Redis. */
typedef struct l2_kind {
    const char *name;
    char json[256];
    bool redis;
} l2_kind;

static void l2_reset(const l2_kind *k)
{
    if (k->redis) {
        assert_true(redis_test_flushall());
    } else if (strstr(k->json, "\"fs\"") != NULL) {
        char dir[128];
        snprintf(dir, sizeof(dir), "%s/fs", g_dir);
        tt_rmtree(dir);
        assert_int_equal(mkdir(dir, 0700), 0);
    }
}

/* The outcome digest of a virtual replay with an empty L2 (a busy second core when busy). */
static void digest_of(const char *path, const l2_kind *k, lmc_replay_mode mode, bool busy,
                      char hex[65], lmc_replay_figures *fig)
{
    pid_t pid = -1;
    if (busy) {
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (freopen("/dev/null", "w", stdout) == NULL)
                _exit(127);
            execlp("yes", "yes", (char *)NULL);
            _exit(127);
        }
    }
    l2_reset(k);
    lmc_replay_result res;
    replay(path, SM, k->json, mode, LMC_REPLAY_PACE_VIRTUAL, 1.0, &res);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    memcpy(hex, res.outcome_digest, 65);
    if (fig != NULL)
        *fig = lmc_replay_figures_of(&res.totals);
    lmc_replay_result_free(&res);
}

/*
 * The L2 adapters to check: resp with one and with four workers (their own
 * connections) when a redis-server can be started, else fs (one worker;
 * slower, since every object is a file).
 */
static size_t l2_kinds(l2_kind *out)
{
    size_t n = 0;
    char why[256];
    if (redis_test_port() == 0 && !redis_test_start(0, why, sizeof(why))) {
        print_message("no redis-server (%s): checking fs instead of resp\n", why);
        out[n] = (l2_kind){.name = "fs, one worker"};
        snprintf(out[n++].json, sizeof(out[0].json), "{\"type\": \"fs\", \"base_path\": \"%s/fs\"}",
                 g_dir);
        return n;
    }
    for (int c = 1; c <= 4; c += 3) {
        out[n] =
            (l2_kind){.name = c == 1 ? "resp, one worker" : "resp, four workers", .redis = true};
        snprintf(out[n++].json, sizeof(out[0].json),
                 "{\"type\": \"resp\", \"port\": %d, \"connections\": %d}", redis_test_port(), c);
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

static void test_five_virtual_replays_give_one_digest_in_both_modes_and_any_l2(void **state)
{
    (void)state;
    l2_kind kinds[2];
    size_t nk = l2_kinds(kinds);
    for (int mode = LMC_REPLAY_MODE_CALLS; mode <= LMC_REPLAY_MODE_ENGINE; mode++) {
        char first_of_mode[65] = "";
        for (size_t k = 0; k < nk; k++) {
            char d[RUNS][65];
            lmc_replay_figures fig;
            for (int r = 0; r < RUNS; r++)
                digest_of(g_trace, &kinds[k], (lmc_replay_mode)mode, r == 2, d[r],
                          r == 0 ? &fig : NULL);
            print_message("mode %s, %s: digest %.16s, L2 loaded %llu keys\n",
                          lmc_replay_mode_names[mode], kinds[k].name, d[0],
                          (unsigned long long)fig.l2_hit_keys);
            /* The workload did what the test is about: hits from L2 too. */
            assert_true(fig.l2_hit_keys > 0);
            for (int r = 1; r < RUNS; r++)
                assert_string_equal(d[0], d[r]);
            /* Workers run no differently in virtual time: one worker or four, one result. */
            if (first_of_mode[0] != '\0')
                assert_string_equal(first_of_mode, d[0]);
            memcpy(first_of_mode, d[0], 65);
        }
    }
}

/* The offset of the first record's first chunk hash in the trace file. */
static long first_hash_offset(const char *path, const uint8_t **bytes, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    lmc_trace_reader *rd;
    assert_int_equal(lmc_trace_reader_open(path, &rd, NULL), LMC_OK);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    const lmc_trace_arg *a = lmc_trace_args_find(rec.args, rec.nargs, "keys");
    assert_non_null(a);
    const lmc_object_key *k = a->value.u.list.items[0].u.key;
    uint8_t hash[64];
    size_t hl = k->chunk_hash_len;
    memcpy(hash, k->chunk_hash, hl);
    lmc_trace_reader_close(rd);
    uint8_t *at = memmem(buf, (size_t)size, hash, hl);
    assert_non_null(at);
    *bytes = buf;
    *len = (size_t)size;
    return at - buf;
}

static void test_one_changed_byte_of_one_key_changes_the_digest(void **state)
{
    (void)state;
    const uint8_t *bytes;
    size_t len;
    long off = first_hash_offset(g_trace, &bytes, &len);
    uint8_t *changed = malloc(len);
    assert_non_null(changed);
    memcpy(changed, bytes, len);
    changed[off + 5] ^= 0x01;
    char path[160];
    snprintf(path, sizeof(path), "%s/changed.lct", g_dir);
    tt_write_file(path, changed, len);
    l2_kind mock = {.name = "mock",
                    .json = "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 10}"};
    for (int mode = LMC_REPLAY_MODE_CALLS; mode <= LMC_REPLAY_MODE_ENGINE; mode++) {
        char a[65], b[65], c[65];
        digest_of(g_trace, &mock, (lmc_replay_mode)mode, false, a, NULL);
        digest_of(path, &mock, (lmc_replay_mode)mode, false, b, NULL);
        digest_of(g_trace, &mock, (lmc_replay_mode)mode, false, c, NULL);
        assert_string_not_equal(a, b);
        assert_string_equal(a, c);
    }
    free(changed);
    free((void *)bytes);
}

/*
 * Realtime and virtual time give the same figures, within a generous bound:
 * a realtime replay's eviction passes and completions fall where the host
 * puts them. The fixture is 1,500 requests time-compressed x 0.01 and
 * replayed x 0.25 (about 1 s each; an eviction pass every 0.25 s), with an
 * L1 that holds about a third of what the requests store.
 */
static void test_virtual_time_gives_the_hit_rates_of_realtime(void **state)
{
    (void)state;
    char path[160];
    snprintf(path, sizeof(path), "%s/short.lct", g_dir);
    write_fixture(path, 1500, 0.01);
    const char *sm = "--l1-size-gb 0.4 --eviction-policy LRU";
    const double bound = 0.05;
    lmc_replay_result v, r;
    replay(path, sm, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, 0.25, &v);
    replay(path, sm, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_REALTIME, 0.25, &r);
    lmc_replay_figures fv = lmc_replay_figures_of(&v.totals);
    lmc_replay_figures fr = lmc_replay_figures_of(&r.totals);
    print_message("engine hit rate: virtual %.4f, realtime %.4f (recorded %.4f); evicted %llu, "
                  "%llu keys\n",
                  fv.engine_hit_rate, fr.engine_hit_rate, fv.recorded_hit_rate,
                  (unsigned long long)v.totals.sm.l1_evicted_keys,
                  (unsigned long long)r.totals.sm.l1_evicted_keys);
    /* Eviction shaped it: below what the recording (unlimited) found, well above nothing. */
    assert_true(fv.engine_hit_rate > 0.05 && fv.engine_hit_rate < fv.recorded_hit_rate - 0.02);
    assert_true(fabs(fv.engine_hit_rate - fr.engine_hit_rate) <= bound);
    lmc_replay_result_free(&v);
    lmc_replay_result_free(&r);
    replay(path, sm, NULL, LMC_REPLAY_MODE_CALLS, LMC_REPLAY_PACE_VIRTUAL, 0.25, &v);
    replay(path, sm, NULL, LMC_REPLAY_MODE_CALLS, LMC_REPLAY_PACE_REALTIME, 0.25, &r);
    fv = lmc_replay_figures_of(&v.totals);
    fr = lmc_replay_figures_of(&r.totals);
    print_message("calls agreement: virtual %.4f, realtime %.4f (keys %.4f, %.4f)\n",
                  fv.read_agreement, fr.read_agreement, fv.key_agreement, fr.key_agreement);
    assert_true(fv.read_agreement < 0.99);
    assert_true(fabs(fv.read_agreement - fr.read_agreement) <= bound);
    assert_true(fabs(fv.key_agreement - fr.key_agreement) <= bound);
    lmc_replay_result_free(&v);
    lmc_replay_result_free(&r);
}

/* The synthetic traces the tests and benches write report a failed write
 * in the outputs' words (core/file.h), whether fwrite or the final close
 * finds the disk full. */
static void test_a_synthetic_trace_into_a_full_device_is_an_error_naming_it(void **state)
{
    (void)state;
    file_test_need_dev_full();
    lmc_error err;
    assert_int_equal(lmc_replay_synth_store_pairs("/dev/full", 4, 2, 0.001, 4, &err), LMC_ERR_IO);
    assert_string_equal(err.msg,
                        "cannot write synthetic trace '/dev/full': No space left on device");
    assert_int_equal(lmc_replay_synth_lookups("/dev/full", 2000, 16, 0.001, 8, &err), LMC_ERR_IO);
    assert_string_equal(err.msg,
                        "cannot write synthetic trace '/dev/full': No space left on device");
    file_test_assert_dev_full_kept();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_five_virtual_replays_give_one_digest_in_both_modes_and_any_l2),
        cmocka_unit_test(test_one_changed_byte_of_one_key_changes_the_digest),
        cmocka_unit_test(test_virtual_time_gives_the_hit_rates_of_realtime),
        cmocka_unit_test(test_a_synthetic_trace_into_a_full_device_is_an_error_naming_it),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
