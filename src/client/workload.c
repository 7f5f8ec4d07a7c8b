/*
 * workload.c -- Mooncake trace reading, token synthesis, the synthetic chat
 * workload and the KV byte pattern (see workload.h for the exact formulas).
 *
 * Threads: the reader belongs to one thread; a finished lmc_workload is
 * read-only and shared by the benchmark's threads. Tokens are synthesised on
 * demand rather than stored: the Mooncake trace averages 15 k tokens over
 * 4 k requests, which would be ~250 MB of token arrays, while its hash ids
 * are ~0.5 MB.
 *
 * Token values are 32-bit mixes, not vocabulary ids: the server only hashes
 * them, and a full-width mix makes accidental sharing between unrelated
 * blocks practically impossible.
 */
#include "client/workload.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Mixing                                                                  */
/* ---------------------------------------------------------------------- */

uint64_t lmc_splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint32_t lmc_mooncake_token(int64_t hash_id, size_t t)
{
    return (uint32_t)lmc_splitmix64(lmc_splitmix64((uint64_t)hash_id) ^
                                    (uint64_t)(t % LMC_MOONCAKE_BLOCK_TOKENS));
}

/* ---------------------------------------------------------------------- */
/* Mooncake records                                                        */
/* ---------------------------------------------------------------------- */

void lmc_mooncake_record_free(lmc_mooncake_record *rec)
{
    if (rec == NULL)
        return;
    free(rec->hash_ids);
    memset(rec, 0, sizeof(*rec));
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "real";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static lmc_status get_count(const json_t *obj, const char *name, uint64_t line_no, int64_t *out,
                            lmc_error *err)
{
    json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: missing '%s'",
                             (unsigned long long)line_no, name);
    if (!json_is_integer(v))
        return lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: '%s' must be an integer (got %s)",
                             (unsigned long long)line_no, name, json_kind(v));
    json_int_t i = json_integer_value(v);
    if (i < 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: '%s' is negative (%lld)",
                             (unsigned long long)line_no, name, (long long)i);
    *out = (int64_t)i;
    return LMC_OK;
}

lmc_status lmc_mooncake_parse_line(const char *line, size_t len, uint64_t line_no,
                                   lmc_mooncake_record *rec, lmc_error *err)
{
    memset(rec, 0, sizeof(*rec));
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: not JSON: %s (column %d)",
                             (unsigned long long)line_no, jerr.text, jerr.column);
    lmc_status st = LMC_OK;
    if (!json_is_object(root)) {
        st = lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: expected an object, got %s",
                           (unsigned long long)line_no, json_kind(root));
        goto fail;
    }
    if ((st = get_count(root, "timestamp", line_no, &rec->timestamp_ms, err)) != LMC_OK ||
        (st = get_count(root, "input_length", line_no, &rec->input_length, err)) != LMC_OK ||
        (st = get_count(root, "output_length", line_no, &rec->output_length, err)) != LMC_OK)
        goto fail;
    json_t *ids = json_object_get(root, "hash_ids");
    if (ids == NULL) {
        st = lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: missing 'hash_ids'",
                           (unsigned long long)line_no);
        goto fail;
    }
    if (!json_is_array(ids)) {
        st = lmc_error_set(err, LMC_ERR_FORMAT, "line %llu: 'hash_ids' must be an array (got %s)",
                           (unsigned long long)line_no, json_kind(ids));
        goto fail;
    }
    size_t n = json_array_size(ids);
    uint64_t need =
        ((uint64_t)rec->input_length + LMC_MOONCAKE_BLOCK_TOKENS - 1) / LMC_MOONCAKE_BLOCK_TOKENS;
    if (n != need) {
        st = lmc_error_set(err, LMC_ERR_FORMAT,
                           "line %llu: 'hash_ids' has %zu ids, but input_length %lld needs %llu "
                           "(one per %d tokens)",
                           (unsigned long long)line_no, n, (long long)rec->input_length,
                           (unsigned long long)need, LMC_MOONCAKE_BLOCK_TOKENS);
        goto fail;
    }
    if (n > 0) {
        rec->hash_ids = malloc(n * sizeof(*rec->hash_ids));
        if (rec->hash_ids == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "line %llu: out of memory",
                               (unsigned long long)line_no);
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v)) {
            st = lmc_error_set(err, LMC_ERR_FORMAT,
                               "line %llu: hash_ids[%zu] must be an integer (got %s)",
                               (unsigned long long)line_no, i, json_kind(v));
            goto fail;
        }
        rec->hash_ids[i] = (int64_t)json_integer_value(v);
    }
    rec->n_hash_ids = n;
    json_decref(root);
    return LMC_OK;
fail:
    json_decref(root);
    lmc_mooncake_record_free(rec);
    return st;
}

lmc_status lmc_mooncake_tokens(const lmc_mooncake_record *rec, uint32_t *out, size_t n,
                               lmc_error *err)
{
    if ((uint64_t)n > (uint64_t)rec->input_length)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "%zu tokens asked of a request with input_length %lld", n,
                             (long long)rec->input_length);
    for (size_t b = 0; b * LMC_MOONCAKE_BLOCK_TOKENS < n; b++) {
        uint64_t hb = lmc_splitmix64((uint64_t)rec->hash_ids[b]);
        size_t end = (b + 1) * LMC_MOONCAKE_BLOCK_TOKENS;
        if (end > n)
            end = n;
        for (size_t t = b * LMC_MOONCAKE_BLOCK_TOKENS; t < end; t++)
            out[t] = (uint32_t)lmc_splitmix64(hb ^ (uint64_t)(t % LMC_MOONCAKE_BLOCK_TOKENS));
    }
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Mooncake reader                                                         */
/* ---------------------------------------------------------------------- */

struct lmc_mooncake_reader {
    FILE *f;
    bool owns_f;
    char *name;
    char *line;
    size_t line_cap;
    uint64_t line_no;
    uint64_t skipped;
    char first_error[2 * LMC_ERROR_MSG_MAX];
};

lmc_status lmc_mooncake_reader_open_stream(FILE *f, const char *name, lmc_mooncake_reader **out,
                                           lmc_error *err)
{
    lmc_mooncake_reader *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->name = strdup(name)) == NULL) {
        free(r);
        return lmc_error_set(err, LMC_ERR_NOMEM, "trace '%s': out of memory", name);
    }
    r->f = f;
    *out = r;
    return LMC_OK;
}

lmc_status lmc_mooncake_reader_open(const char *path, lmc_mooncake_reader **out, lmc_error *err)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return lmc_error_set(err, LMC_ERR_IO, "trace '%s': cannot open: %s", path, strerror(errno));
    lmc_status st = lmc_mooncake_reader_open_stream(f, path, out, err);
    if (st != LMC_OK) {
        fclose(f);
        return st;
    }
    (*out)->owns_f = true;
    return LMC_OK;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

lmc_status lmc_mooncake_reader_next(lmc_mooncake_reader *r, lmc_mooncake_record *rec,
                                    lmc_error *err)
{
    for (;;) {
        errno = 0;
        ssize_t got = getline(&r->line, &r->line_cap, r->f);
        if (got < 0) {
            if (ferror(r->f))
                return lmc_error_set(err, LMC_ERR_IO, "trace '%s': read failed after line %llu: %s",
                                     r->name, (unsigned long long)r->line_no,
                                     strerror(errno ? errno : EIO));
            if (errno == ENOMEM)
                return lmc_error_set(err, LMC_ERR_NOMEM, "trace '%s': out of memory", r->name);
            return lmc_error_set(err, LMC_ERR_EOF, "trace '%s': end of file", r->name);
        }
        r->line_no++;
        size_t len = (size_t)got;
        while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r'))
            len--;
        if (blank(r->line, len))
            continue;
        lmc_error perr;
        lmc_status st = lmc_mooncake_parse_line(r->line, len, r->line_no, rec, &perr);
        if (st == LMC_OK)
            return LMC_OK;
        if (st == LMC_ERR_NOMEM)
            return lmc_error_set(err, st, "trace '%s': %s", r->name, perr.msg);
        if (r->skipped++ == 0)
            snprintf(r->first_error, sizeof(r->first_error), "trace '%s': %s", r->name, perr.msg);
    }
}

uint64_t lmc_mooncake_reader_skipped(const lmc_mooncake_reader *r)
{
    return r->skipped;
}

const char *lmc_mooncake_reader_first_error(const lmc_mooncake_reader *r)
{
    return r->first_error;
}

void lmc_mooncake_reader_close(lmc_mooncake_reader *r)
{
    if (r == NULL)
        return;
    if (r->owns_f)
        fclose(r->f);
    free(r->line);
    free(r->name);
    free(r);
}

/* ---------------------------------------------------------------------- */
/* Synthetic chat                                                          */
/* ---------------------------------------------------------------------- */

/* Segment kinds: distinct constants keep the token streams apart. */
enum { SEG_SYSTEM = 1, SEG_QUESTION = 2, SEG_ANSWER = 3 };

void lmc_chat_config_init(lmc_chat_config *cfg)
{
    *cfg = (lmc_chat_config){.users = 8,
                             .rounds = 4,
                             .groups = 2,
                             .system_len = 1024,
                             .prompt_len = 256,
                             .answer_len = 256,
                             .seed = 1,
                             .interval_ms = 0.0};
}

lmc_status lmc_chat_config_check(const lmc_chat_config *cfg, lmc_error *err)
{
    if (cfg->users < 1)
        return lmc_error_set(err, LMC_ERR_INVALID, "users: must be at least 1");
    if (cfg->rounds < 1)
        return lmc_error_set(err, LMC_ERR_INVALID, "rounds: must be at least 1");
    if (cfg->groups < 1 || cfg->groups > cfg->users)
        return lmc_error_set(err, LMC_ERR_INVALID, "groups: %u is not in [1, users=%u]",
                             cfg->groups, cfg->users);
    if (!isfinite(cfg->interval_ms) || cfg->interval_ms < 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "interval_ms: %g is not a finite value >= 0",
                             cfg->interval_ms);
    /* The longest prompt must fit comfortably in memory and in a message. */
    uint64_t longest = (uint64_t)cfg->system_len +
                       (uint64_t)(cfg->rounds - 1) * (cfg->prompt_len + (uint64_t)cfg->answer_len) +
                       cfg->prompt_len;
    if (longest > 4u * 1024 * 1024)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "the last round's prompt would be %llu tokens (at most 4194304)",
                             (unsigned long long)longest);
    if (longest == 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "every prompt would be empty");
    return LMC_OK;
}

size_t lmc_chat_prompt_len(const lmc_chat_config *cfg, uint32_t round)
{
    return (size_t)cfg->system_len + (size_t)round * (cfg->prompt_len + (size_t)cfg->answer_len) +
           cfg->prompt_len;
}

static uint32_t chat_token(uint64_t seed, uint64_t kind, uint64_t a, uint64_t b, uint64_t pos)
{
    uint64_t h = lmc_splitmix64(seed ^ (kind << 56));
    h = lmc_splitmix64(h ^ a);
    h = lmc_splitmix64(h ^ b);
    return (uint32_t)lmc_splitmix64(h ^ pos);
}

/* Append up to len tokens of one segment, stopping at n; returns the new count. */
static size_t put_segment(const lmc_chat_config *cfg, uint64_t kind, uint64_t a, uint64_t b,
                          size_t len, uint32_t *out, size_t at, size_t n)
{
    for (size_t i = 0; i < len && at < n; i++, at++)
        out[at] = chat_token(cfg->seed, kind, a, b, i);
    return at;
}

void lmc_chat_tokens(const lmc_chat_config *cfg, uint32_t user, uint32_t round, uint32_t *out,
                     size_t n)
{
    size_t at = put_segment(cfg, SEG_SYSTEM, user % cfg->groups, 0, cfg->system_len, out, 0, n);
    for (uint32_t r = 0; r < round && at < n; r++) {
        at = put_segment(cfg, SEG_QUESTION, user, r, cfg->prompt_len, out, at, n);
        at = put_segment(cfg, SEG_ANSWER, user, r, cfg->answer_len, out, at, n);
    }
    put_segment(cfg, SEG_QUESTION, user, round, cfg->prompt_len, out, at, n);
}

/* ---------------------------------------------------------------------- */
/* Workload                                                                */
/* ---------------------------------------------------------------------- */

typedef enum { WL_MOONCAKE, WL_CHAT } wl_kind;

struct lmc_workload {
    wl_kind kind;
    size_t n;
    lmc_mooncake_record *recs; /* WL_MOONCAKE */
    lmc_chat_config chat;      /* WL_CHAT */
    uint64_t skipped;
    char first_error[2 * LMC_ERROR_MSG_MAX];
};

lmc_status lmc_workload_load_mooncake(const char *path, size_t max_requests, lmc_workload **out,
                                      lmc_error *err)
{
    lmc_mooncake_reader *r;
    lmc_status st = lmc_mooncake_reader_open(path, &r, err);
    if (st != LMC_OK)
        return st;
    lmc_workload *w = calloc(1, sizeof(*w));
    size_t cap = 0;
    if (w == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "trace '%s': out of memory", path);
        goto fail;
    }
    w->kind = WL_MOONCAKE;
    while (max_requests == 0 || w->n < max_requests) {
        lmc_mooncake_record rec;
        st = lmc_mooncake_reader_next(r, &rec, err);
        if (st == LMC_ERR_EOF)
            break;
        if (st != LMC_OK)
            goto fail;
        if (w->n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            lmc_mooncake_record *nv = realloc(w->recs, ncap * sizeof(*nv));
            if (nv == NULL) {
                lmc_mooncake_record_free(&rec);
                st = lmc_error_set(err, LMC_ERR_NOMEM, "trace '%s': out of memory", path);
                goto fail;
            }
            w->recs = nv;
            cap = ncap;
        }
        w->recs[w->n++] = rec;
    }
    w->skipped = lmc_mooncake_reader_skipped(r);
    snprintf(w->first_error, sizeof(w->first_error), "%s", lmc_mooncake_reader_first_error(r));
    if (w->n == 0) {
        if (w->skipped > 0)
            st = lmc_error_set(err, LMC_ERR_FORMAT,
                               "no valid record (%llu malformed lines skipped; first: %s)",
                               (unsigned long long)w->skipped, w->first_error);
        else
            st = lmc_error_set(err, LMC_ERR_FORMAT, "trace '%s': no records", path);
        goto fail;
    }
    lmc_mooncake_reader_close(r);
    *out = w;
    return LMC_OK;
fail:
    lmc_mooncake_reader_close(r);
    lmc_workload_destroy(w);
    return st;
}

lmc_status lmc_workload_chat(const lmc_chat_config *cfg, size_t max_requests, lmc_workload **out,
                             lmc_error *err)
{
    lmc_status st = lmc_chat_config_check(cfg, err);
    if (st != LMC_OK)
        return st;
    lmc_workload *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "chat workload: out of memory");
    w->kind = WL_CHAT;
    w->chat = *cfg;
    w->n = (size_t)cfg->users * cfg->rounds;
    if (max_requests != 0 && max_requests < w->n)
        w->n = max_requests;
    *out = w;
    return LMC_OK;
}

void lmc_workload_destroy(lmc_workload *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n && w->recs != NULL; i++)
        lmc_mooncake_record_free(&w->recs[i]);
    free(w->recs);
    free(w);
}

size_t lmc_workload_count(const lmc_workload *w)
{
    return w->n;
}

double lmc_workload_arrival_ms(const lmc_workload *w, size_t i)
{
    if (w->kind == WL_MOONCAKE)
        return (double)w->recs[i].timestamp_ms;
    return (double)i * w->chat.interval_ms;
}

size_t lmc_workload_prompt_len(const lmc_workload *w, size_t i)
{
    if (w->kind == WL_MOONCAKE)
        return (size_t)w->recs[i].input_length;
    return lmc_chat_prompt_len(&w->chat, (uint32_t)(i / w->chat.users));
}

lmc_status lmc_workload_tokens(const lmc_workload *w, size_t i, size_t align, uint32_t **tokens,
                               size_t *n, lmc_error *err)
{
    *tokens = NULL;
    *n = 0;
    if (i >= w->n)
        return lmc_error_set(err, LMC_ERR_INVALID, "request %zu of a workload of %zu", i, w->n);
    size_t len = lmc_workload_prompt_len(w, i);
    if (align > 1)
        len -= len % align;
    if (len == 0)
        return LMC_OK;
    uint32_t *t = malloc(len * sizeof(*t));
    if (t == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "request %zu: out of memory for %zu tokens", i,
                             len);
    if (w->kind == WL_MOONCAKE) {
        lmc_status st = lmc_mooncake_tokens(&w->recs[i], t, len, err);
        if (st != LMC_OK) {
            free(t);
            return st;
        }
    } else {
        lmc_chat_tokens(&w->chat, (uint32_t)(i % w->chat.users), (uint32_t)(i / w->chat.users), t,
                        len);
    }
    *tokens = t;
    *n = len;
    return LMC_OK;
}

uint64_t lmc_workload_skipped_lines(const lmc_workload *w)
{
    return w->skipped;
}

const char *lmc_workload_first_error(const lmc_workload *w)
{
    return w->first_error;
}

/* ---------------------------------------------------------------------- */
/* KV byte pattern                                                         */
/* ---------------------------------------------------------------------- */

uint64_t lmc_kv_chunk_seed(uint64_t prev_seed, const uint32_t *chunk_tokens, size_t n)
{
    uint64_t h = prev_seed;
    for (size_t i = 0; i < n; i++)
        h = lmc_splitmix64(h ^ chunk_tokens[i]);
    return h;
}

static inline uint64_t xorshift64star(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void lmc_kv_pattern_init(lmc_kv_pattern *p, uint64_t seed)
{
    p->state = seed != 0 ? seed : LMC_KV_PATTERN_SEED0;
    p->word = 0;
    p->used = 8;
}

static inline void put_le64(uint8_t *d, uint64_t w)
{
    for (int i = 0; i < 8; i++)
        d[i] = (uint8_t)(w >> (8 * i));
}

void lmc_kv_pattern_fill(lmc_kv_pattern *p, uint8_t *dst, size_t len)
{
    size_t i = 0;
    /* Finish a partly consumed word, then whole words, then a tail. */
    while (i < len && p->used < 8)
        dst[i++] = (uint8_t)(p->word >> (8 * p->used++));
    for (; len - i >= 8; i += 8)
        put_le64(dst + i, xorshift64star(&p->state));
    if (i < len) {
        p->word = xorshift64star(&p->state);
        p->used = 0;
        while (i < len)
            dst[i++] = (uint8_t)(p->word >> (8 * p->used++));
    }
}

bool lmc_kv_pattern_check(lmc_kv_pattern *p, const uint8_t *src, size_t len)
{
    bool ok = true;
    size_t i = 0;
    while (i < len && p->used < 8)
        ok &= src[i++] == (uint8_t)(p->word >> (8 * p->used++));
    for (; len - i >= 8; i += 8) {
        uint8_t w[8];
        put_le64(w, xorshift64star(&p->state));
        ok &= memcmp(w, src + i, 8) == 0;
    }
    if (i < len) {
        p->word = xorshift64star(&p->state);
        p->used = 0;
        while (i < len)
            ok &= src[i++] == (uint8_t)(p->word >> (8 * p->used++));
    }
    return ok;
}
