/*
 * sweep_run.c -- a sweep's configurations as child processes (see
 * sweep_run.h).
 *
 * The loop: start jobs while there is room (jobs in flight < o->jobs, an
 * exclusive job only when no other is running), then wait for SIGCHLD or
 * SIGINT with both blocked (sigwaitinfo), so that neither can slip in
 * between a check and the wait; reap every finished child with WNOHANG.
 * A finished job's result is read with the loader `trace compare` uses
 * (replay/compare.h), which checks it is a replay result this build reads.
 *
 * Owns: the children, the temporary directory and its files while they
 * run. Threads: the caller's only (fork is called with no other thread of
 * ours running: the sweep's front end starts none before the run).
 */
#include "replay/sweep_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "replay/compare.h"

extern char **environ;

#define TAIL_LINES 5
#define TAIL_BYTES 4096
#define CRASH_ENV "LMCACHE_SWEEP_TEST_CRASH"

typedef struct run_state {
    lmc_sweep_job *jobs;
    size_t n;
    const lmc_sweep_run_options *o;
    char dir[256];
    char **envp; /* environ, plus LMCACHE_LOG_LEVEL=WARNING when it is not set */
    long crash;  /* the test hook's job index, or -1 */
    sigset_t old_mask;
    size_t running, running_exclusive, done;
} run_state;

static void job_path(const run_state *r, size_t i, const char *ext, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%zu.%s", r->dir, i, ext);
}

/* The last TAIL_LINES lines of a file (at most TAIL_BYTES), trailing newline dropped. */
static char *read_tail(const char *path)
{
    char buf[TAIL_BYTES + 1];
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        off_t from = size > TAIL_BYTES ? size - TAIL_BYTES : 0;
        ssize_t got = size > 0 ? pread(fd, buf, (size_t)(size - from), from) : 0;
        n = got > 0 ? (size_t)got : 0;
        close(fd);
    }
    while (n > 0 && buf[n - 1] == '\n')
        n--;
    buf[n] = '\0';
    size_t start = n, lines = 0;
    while (start > 0 && lines < TAIL_LINES) {
        start--;
        if (buf[start] == '\n' && ++lines == TAIL_LINES) {
            start++;
            break;
        }
    }
    return strdup(buf + start);
}

/* What the child runs between fork and exec: only async-signal-safe calls. */
static void child(const run_state *r, size_t i, char *const *argv, const char *err_path,
                  pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* the sweep died before the line above */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGCHLD, &dfl, NULL);
    sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
    int null = open("/dev/null", O_RDWR);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (null < 0 || err < 0)
        _exit(127);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    if (r->crash >= 0 && (size_t)r->crash == i) {
        static const char msg[] = "forced crash (" CRASH_ENV ")\n";
        (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
        sigaction(SIGSEGV, &dfl, NULL); /* a sanitizer's handler would turn it into an exit */
        raise(SIGSEGV);
    }
    execve(r->o->exe != NULL ? r->o->exe : "/proc/self/exe", argv, r->envp);
    static const char msg[] = "lmcache trace sweep: cannot run the replay: exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
}

static lmc_status start(run_state *r, size_t i, lmc_error *err)
{
    lmc_sweep_job *j = &r->jobs[i];
    size_t n_args = 0;
    while (j->args[n_args] != NULL)
        n_args++;
    char out[300], errp[300];
    job_path(r, i, "json", out, sizeof(out));
    job_path(r, i, "err", errp, sizeof(errp));
    char **argv = calloc(n_args + 4, sizeof(*argv));
    if (argv == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    argv[0] = "lmcache";
    memcpy(argv + 1, j->args, n_args * sizeof(*argv));
    argv[n_args + 1] = "--output";
    argv[n_args + 2] = out;
    pid_t parent = getpid();
    j->start_ns = lmc_mono_ns();
    pid_t pid = fork();
    if (pid == 0)
        child(r, i, argv, errp, parent);
    free(argv);
    if (pid < 0)
        return lmc_error_set(err, LMC_ERR_IO, "cannot start a replay: fork: %s", strerror(errno));
    setpgid(pid, pid); /* as the child does: whichever runs first */
    j->pid = pid;
    j->state = LMC_SWEEP_JOB_RUNNING;
    r->running++;
    r->running_exclusive += j->exclusive;
    return LMC_OK;
}

static void finish(run_state *r, size_t i, int status)
{
    lmc_sweep_job *j = &r->jobs[i];
    j->wall_s = (double)(lmc_mono_ns() - j->start_ns) / 1e9;
    r->running--;
    r->running_exclusive -= j->exclusive;
    char out[300], errp[300];
    job_path(r, i, "json", out, sizeof(out));
    job_path(r, i, "err", errp, sizeof(errp));
    j->stderr_tail = read_tail(errp);
    j->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    j->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    j->state = LMC_SWEEP_JOB_FAILED;
    char why[600] = "";
    if (j->interrupted) {
        snprintf(why, sizeof(why), "stopped by the sweep (Ctrl-C)");
    } else if (j->signal != 0) {
        snprintf(why, sizeof(why), "killed by signal %d (%s)", j->signal, strsignal(j->signal));
    } else if (j->exit_status != 0) {
        snprintf(why, sizeof(why), "exit status %d", j->exit_status);
    } else {
        lmc_cmp_side side;
        lmc_error e;
        if (lmc_cmp_side_load(out, NULL, false, &side, &e) == LMC_OK) {
            j->result = side.doc;
            side.doc = NULL;
            lmc_cmp_side_free(&side);
            j->state = LMC_SWEEP_JOB_DONE;
        } else {
            snprintf(why, sizeof(why), "exit 0 but no usable result: %s", e.msg);
        }
    }
    if (j->state == LMC_SWEEP_JOB_FAILED)
        j->error = strdup(why);
    unlink(out);
    unlink(errp);
    r->done++;
    if (r->o->on_done != NULL)
        r->o->on_done(i, j, r->done, r->o->ud);
}

/* environ with LMCACHE_LOG_LEVEL=WARNING added when it is not set. */
static char **child_env(void)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **e = calloc(n + 2, sizeof(*e));
    if (e == NULL)
        return NULL;
    memcpy(e, environ, n * sizeof(*e));
    if (getenv("LMCACHE_LOG_LEVEL") == NULL)
        e[n] = "LMCACHE_LOG_LEVEL=WARNING";
    return e;
}

static bool can_start(const run_state *r, size_t i)
{
    return r->running < r->o->jobs && !(r->jobs[i].exclusive && r->running_exclusive > 0);
}

lmc_status lmc_sweep_run(lmc_sweep_job *jobs, size_t n, const lmc_sweep_run_options *o,
                         bool *interrupted, lmc_error *err)
{
    *interrupted = false;
    run_state r = {.jobs = jobs, .n = n, .o = o, .crash = -1};
    for (size_t i = 0; i < n; i++) {
        jobs[i].state = LMC_SWEEP_JOB_NOT_RUN;
        jobs[i].exit_status = -1;
    }
    const char *crash = getenv(CRASH_ENV);
    if (crash != NULL && crash[0] != '\0')
        r.crash = strtol(crash, NULL, 10);
    const char *tmp = getenv("TMPDIR");
    snprintf(r.dir, sizeof(r.dir), "%s/lmcache-sweep-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(r.dir) == NULL)
        return lmc_error_set(err, LMC_ERR_IO, "cannot make a temporary directory '%s': %s", r.dir,
                             strerror(errno));
    lmc_status st = LMC_OK;
    if ((r.envp = child_env()) == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        goto out_dir;
    }

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGCHLD);
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old_chld;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &old_chld); /* SIG_IGN would reap the children for us */
    sigprocmask(SIG_BLOCK, &mask, &r.old_mask);

    size_t next = 0;
    bool stop = false;
    for (;;) {
        while (!stop && st == LMC_OK && next < n && can_start(&r, next))
            st = start(&r, next++, err);
        if (st != LMC_OK)
            stop = true; /* a fork failed: finish what runs, then report it */
        /* An exclusive job waits for the running one; a plain one behind it waits too (order). */
        if (r.running == 0)
            break;
        siginfo_t info;
        int sig = sigwaitinfo(&mask, &info);
        if (sig == SIGINT && !stop) {
            stop = true;
            *interrupted = true;
            for (size_t i = 0; i < n; i++)
                if (jobs[i].state == LMC_SWEEP_JOB_RUNNING) {
                    jobs[i].interrupted = true;
                    kill(jobs[i].pid, SIGTERM);
                }
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (size_t i = 0; i < n; i++)
                if (jobs[i].state == LMC_SWEEP_JOB_RUNNING && jobs[i].pid == pid) {
                    finish(&r, i, status);
                    break;
                }
        }
    }

    sigprocmask(SIG_SETMASK, &r.old_mask, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    free(r.envp);
out_dir:
    rmdir(r.dir);
    return st;
}

void lmc_sweep_job_free(lmc_sweep_job *job)
{
    free(job->stderr_tail);
    free(job->error);
    lmc_json_free(job->result);
    job->stderr_tail = NULL;
    job->error = NULL;
    job->result = NULL;
}
