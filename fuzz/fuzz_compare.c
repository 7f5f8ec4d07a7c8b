/*
 * fuzz_compare.c -- libFuzzer target: trace compare on hostile results.
 *
 * The input is up to four parts separated by NUL bytes: a selector (for a
 * sweep), a --max-regression spec, and the base and new result files'
 * text (the new one defaults to the base). Whatever loads is compared
 * under the spec (when it parses) and a fixed threshold, and both reports
 * are rendered, so the figure walk, the spreads, the config diff, the
 * selectors and the renderers see every shape of JSON the parser accepts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "replay/compare.h"
#include "replay/compare_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next NUL-terminated part of [*p, end), copied; NULL when there is none. */
static char *part(const uint8_t **p, const uint8_t *end, size_t *len)
{
    if (*p >= end)
        return NULL;
    const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
    size_t n = nul != NULL ? (size_t)(nul - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, *p, n);
        s[n] = '\0';
    }
    *len = n;
    *p += n + (nul != NULL);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmc_log_set_level(LMC_LOG_OFF);
    const uint8_t *p = data, *end = data + size;
    size_t ls, lt, la, lb;
    char *sel = part(&p, end, &ls);
    char *spec = part(&p, end, &lt);
    char *a = part(&p, end, &la);
    char *b = part(&p, end, &lb);
    lmc_threshold th[2];
    size_t n_th = 0;
    lmc_error err;
    if (lmc_threshold_parse("*hit_rate=-0.01", &th[n_th], &err) == LMC_OK)
        n_th++;
    if (spec != NULL && lmc_threshold_parse(spec, &th[n_th], &err) == LMC_OK)
        n_th++;
    lmc_cmp_side base, new_;
    const char *select = sel != NULL && sel[0] != '\0' ? sel : NULL;
    if (a != NULL &&
        lmc_cmp_side_parse("base.json", a, la, select, false, &base, &err) == LMC_OK) {
        if (lmc_cmp_side_parse("new.json", b != NULL ? b : a, b != NULL ? lb : la, select, false,
                               &new_, &err) == LMC_OK) {
            lmc_compare c;
            if (lmc_compare_run(&base, &new_, th, n_th, &c, &err) == LMC_OK) {
                lmc_compare_report_opts o = {.all = true, .div_note = "fuzz"};
                free(lmc_compare_report_table(&c, &o));
                free(lmc_compare_report_json(&c, &o));
                (void)lmc_compare_exit_status(&c);
                lmc_compare_free(&c);
            }
            lmc_cmp_side_free(&new_);
        }
        lmc_cmp_side_free(&base);
    }
    for (size_t i = 0; i < n_th; i++)
        lmc_threshold_free(&th[i]);
    free(sel);
    free(spec);
    free(a);
    free(b);
    return 0;
}
