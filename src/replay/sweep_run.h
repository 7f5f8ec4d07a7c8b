/*
 * sweep_run.h -- runs a sweep's configurations, one child process each.
 *
 * Owns: the child processes while they run, their output and stderr files
 * (in a temporary directory made and removed by lmc_sweep_run), and what
 * each job left: its parsed result, or why it failed.
 *
 * A job is one `trace replay` of this same binary (/proc/self/exe), so a
 * crash, an abort or a hang killed from outside in one configuration is
 * that configuration's failure -- its exit status or signal and the tail of
 * its stderr -- and the others complete. At most `jobs` run at once;
 * exclusive jobs (whose L2 adapters keep their objects outside the process:
 * parallel replays would see each other's) never run beside another
 * exclusive one. Jobs start in index order.
 *
 * Each child gets its own process group, so a Ctrl-C at the terminal
 * reaches the sweep only; the sweep then starts nothing more, sends
 * SIGTERM to the running children, waits for them, and returns with
 * *interrupted set. A child also dies with the sweep (PR_SET_PDEATHSIG).
 * Children log at WARNING unless LMCACHE_LOG_LEVEL is set, so a stderr
 * tail holds the warnings and the error, not the progress lines.
 *
 * Test hook: LMCACHE_SWEEP_TEST_CRASH=N makes job N's child write a line
 * to its stderr and die of SIGSEGV before it runs the replay (the e2e
 * test's crashing configuration).
 *
 * Threads: the caller's; SIGINT and SIGCHLD are blocked during the run and
 * taken with sigwaitinfo, and the caller's mask and handlers are restored.
 */
#ifndef LMC_REPLAY_SWEEP_RUN_H
#define LMC_REPLAY_SWEEP_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/json.h"
#include "lmcache/status.h"

typedef enum lmc_sweep_job_state {
    LMC_SWEEP_JOB_NOT_RUN = 0, /* never started (the sweep was interrupted first) */
    LMC_SWEEP_JOB_RUNNING,
    LMC_SWEEP_JOB_DONE,   /* exit 0 and a replay result */
    LMC_SWEEP_JOB_FAILED, /* anything else: see exit_status, signal, error */
} lmc_sweep_job_state;

typedef struct lmc_sweep_job {
    /* Given: the child's arguments after the program name, NULL-terminated (borrowed). */
    char **args;
    bool exclusive;

    /* Filled by the run. */
    lmc_sweep_job_state state;
    bool interrupted;  /* killed by the sweep after a Ctrl-C */
    int exit_status;   /* when it exited (-1 otherwise) */
    int signal;        /* the signal that ended it (0: none) */
    double wall_s;     /* start to end, measured by the sweep */
    char *stderr_tail; /* the last lines of its stderr ("" when none); malloc'd */
    char *error;       /* FAILED: one line saying why; malloc'd */
    lmc_json *result;  /* DONE: the replay result it wrote; owned */

    pid_t pid;
    uint64_t start_ns;
} lmc_sweep_job;

/* Called in the order jobs finish; done counts the finished ones, this one included. */
typedef void (*lmc_sweep_on_done)(size_t index, const lmc_sweep_job *job, size_t done, void *ud);

typedef struct lmc_sweep_run_options {
    size_t jobs;     /* >= 1 */
    const char *exe; /* NULL: /proc/self/exe */
    lmc_sweep_on_done on_done;
    void *ud;
} lmc_sweep_run_options;

/*
 * Run every job: each child is `exe ARGS... --output TMP/N.json`. Errors
 * only for the sweep itself (LMC_ERR_IO for the temporary directory or a
 * fork, LMC_ERR_NOMEM); a job's failure is in the job.
 */
lmc_status lmc_sweep_run(lmc_sweep_job *jobs, size_t n, const lmc_sweep_run_options *o,
                         bool *interrupted, lmc_error *err);

/* Free what a job holds after a run (not args). */
void lmc_sweep_job_free(lmc_sweep_job *job);

#endif
