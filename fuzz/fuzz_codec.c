/*
 * fuzz_codec.c -- libFuzzer target: one msgpack value as a Record's args.
 *
 * The input bytes become the "args" value of an otherwise valid Record
 * body, which goes through the project's own msgpack parser and the codec
 * registry (lmc_trace_decode_record: the fast path for the recorder's
 * shape, then the general parse + lmc_codec_decode_args). Whatever decodes
 * is encoded again (lmc_trace_encode_record -> lmc_codec_encode_args) and
 * decoded once more, so the encoders see every value the decoders accept.
 */
#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/log.h"
#include "trace/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmc_log_set_level(LMC_LOG_OFF);
    msgpack_sbuffer body;
    msgpack_sbuffer_init(&body);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &body, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_str_with_body(&pk, "record", 6);
    msgpack_pack_str_with_body(&pk, "t_mono", 6);
    msgpack_pack_double(&pk, 0.5);
    msgpack_pack_str_with_body(&pk, "t_wall", 6);
    msgpack_pack_double(&pk, 1.5);
    msgpack_pack_str_with_body(&pk, "qualname", 8);
    msgpack_pack_str_with_body(&pk, "q", 1);
    msgpack_pack_str_with_body(&pk, "args", 4);
    msgpack_sbuffer_write(&body, (const char *)data, size);

    lmc_arena a;
    lmc_arena_init(&a, 4096);
    lmc_trace_record rec;
    if (lmc_trace_decode_record(body.data, body.size, &a, &rec, NULL) == LMC_OK) {
        msgpack_sbuffer again;
        msgpack_sbuffer_init(&again);
        if (lmc_trace_encode_record(&again, rec.t_mono, rec.t_wall, rec.qualname, rec.qualname_len,
                                    rec.args, rec.nargs, NULL) == LMC_OK &&
            again.size >= 4) {
            /* Skip the 4-byte frame length prefix. */
            lmc_arena b;
            lmc_arena_init(&b, 4096);
            lmc_trace_record rec2;
            (void)lmc_trace_decode_record(again.data + 4, again.size - 4, &b, &rec2, NULL);
            lmc_arena_free(&b);
        }
        msgpack_sbuffer_destroy(&again);
    }
    lmc_arena_free(&a);
    msgpack_sbuffer_destroy(&body);
    return 0;
}
