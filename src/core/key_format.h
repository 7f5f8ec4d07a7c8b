/*
 * key_format.h -- the fields of an ObjectKey's string form, for the other
 * spellings of a key that share them.
 *
 * Owns nothing: the formatting lives in types.c beside lmc_object_key_format
 * (types.h). The fs adapter's file names spell the model name their own way
 * but the rest of the key as lmc_object_key_format does; this lets them write
 * those fields into their own lmc_fixbuf, so that rule is written once.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_CORE_KEY_FORMAT_H
#define LMC_CORE_KEY_FORMAT_H

#include "core/strbuf.h"
#include "lmcache/types.h"

/* Append "@0x<rank>@<group>@<hash hex>[@<salt>]": all of the form after the model name. */
void lmc_object_key_put_fields(lmc_fixbuf *o, const lmc_object_key *key);

#endif
