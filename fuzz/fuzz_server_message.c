/*
 * fuzz_server_message.c -- libFuzzer target: one multipart server request.
 *
 * Input layout (fuzz/make_seeds.c writes the same): byte 0 is the number
 * of frames (0..15, so more than LMC_PROTO_MAX_FRAMES is reachable), then
 * per frame a 2-byte big-endian length and that many bytes (cut to what is
 * left). Each frame is copied into its own exact-size heap block so ASan
 * sees any read past a frame. Decoded with lmc_request_decode, then freed
 * with lmc_request_free whether or not decoding succeeded.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/protocol.h"

#define MAX_FUZZ_FRAMES 15

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = data[0] % (MAX_FUZZ_FRAMES + 1);
    size_t pos = 1;
    void *frames[MAX_FUZZ_FRAMES];
    size_t lens[MAX_FUZZ_FRAMES];
    size_t got = 0;
    for (; got < n; got++) {
        size_t len = 0;
        if (pos + 2 <= size) {
            len = (size_t)data[pos] << 8 | data[pos + 1];
            pos += 2;
        } else {
            pos = size;
        }
        if (len > size - pos)
            len = size - pos;
        /* malloc(0) may return NULL; keep a valid pointer for empty frames. */
        frames[got] = malloc(len > 0 ? len : 1);
        if (frames[got] == NULL)
            break;
        memcpy(frames[got], data + pos, len);
        lens[got] = len;
        pos += len;
    }

    lmc_request req;
    memset(&req, 0, sizeof(req));
    lmc_error err;
    (void)lmc_request_decode((const void *const *)frames, lens, got, &req, &err);
    lmc_request_free(&req);

    for (size_t i = 0; i < got; i++)
        free(frames[i]);
    return 0;
}
