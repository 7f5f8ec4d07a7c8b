/*
 * marker.c -- the table of reserved marker qualnames (see marker.h).
 */
#include "trace/marker.h"

#include <string.h>

#include "trace/recorder.h"

static const lmc_trace_marker markers[] = {
    {LMC_TRACE_DROPPED_QUALNAME, "dropped_records"},
    {LMC_TRACE_SLICE_QUALNAME, "slice"},
};

const lmc_trace_marker *lmc_trace_marker_find(const char *q, size_t len)
{
    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
        if (strlen(markers[i].qualname) == len && memcmp(markers[i].qualname, q, len) == 0)
            return &markers[i];
    }
    return NULL;
}
