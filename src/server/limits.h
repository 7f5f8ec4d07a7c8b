/*
 * limits.h -- what one client may make `lmcache server` hold: the one
 * table of the server's resource limits, each with its flag and default.
 *
 * Owns: the table (LMC_SERVER_LIMITS) and the struct derived from it. The
 * flags, their help and their ranges (config.c), the checks (engine.c,
 * sessions.c, server.c) and docs/security.md's table all follow these
 * rows; a limit that is hit gives the request an error reply naming the
 * flag. Threads: none.
 */
#ifndef LMC_SERVER_LIMITS_H
#define LMC_SERVER_LIMITS_H

#include <stdint.h>

#include "server/protocol.h"

/*
 * X(field, "--flag", default, min, max, "help"). Every value is a count in
 * the unit its help names.
 */
#define LMC_SERVER_LIMITS(X)                                                                       \
    X(max_lookup_tokens, "--max-lookup-tokens", 1048576, 1, LMC_PROTO_MAX_TOKENS,                  \
      "tokens in one request's key (lookup, store, retrieve)")                                     \
    X(max_sessions, "--max-sessions", 16384, 1, 1 << 24,                                           \
      "sessions open at once (a lookup starts one; end_session ends it)")                          \
    X(max_session_keys, "--max-session-keys", 1048576, 1, 1 << 30,                                 \
      "keys (chunks x world size) all open sessions hold together, ~150 B each")                   \
    X(session_ttl_s, "--session-ttl-s", 600, 1, 86400, "seconds before an unused session ends")    \
    X(max_cache_salts, "--max-cache-salts", 4096, 0, 1 << 20,                                      \
      "distinct non-empty cache_salt values accepted (each is kept until exit)")                   \
    X(max_model_names, "--max-model-names", 1024, 1, 1 << 20,                                      \
      "distinct model names used in keys (each is kept until exit)")                               \
    X(max_connections, "--max-connections", 1024, 1, 1 << 20,                                      \
      "client connections at once; more are closed at once")                                       \
    X(max_message_bytes, "--max-message-bytes", LMC_PROTO_MAX_FRAME, 1024, LMC_PROTO_MAX_FRAME,    \
      "bytes of one request, all its frames")                                                      \
    X(max_buffered_mb, "--max-buffered-mb", 256, 1, 1 << 20,                                       \
      "MiB of requests received and not yet answered, all connections together")                   \
    X(max_requests_per_connection, "--max-requests-per-connection", 256, 1, 1 << 20,               \
      "requests of one connection waiting to be answered; more are answered 'busy'")               \
    X(message_timeout_s, "--message-timeout-s", 30, 1, 3600,                                       \
      "seconds a client may take to send one request once it started")

typedef struct lmc_server_limits {
#define LMC_LIMIT_FIELD(field, flag, def, lo, hi, help) uint64_t field;
    LMC_SERVER_LIMITS(LMC_LIMIT_FIELD)
#undef LMC_LIMIT_FIELD
} lmc_server_limits;

/* Every limit at its default. */
void lmc_server_limits_init(lmc_server_limits *l);

#endif
