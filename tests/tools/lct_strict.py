#!/usr/bin/env python3
"""An independent strict reader of .lct traces, and a corpus of damaged ones.

Written from the rules in docs/trace-format.md ("Reading rules") and
spec/trace-format.md, using only the standard library (no msgpack module is
installed here). It shares no code with the C reader: it decodes msgpack into
Python objects the way msgspec does for LMCache's Header and Record structs
(strs decoded as strict UTF-8, dict keys hashed, timestamps made into
datetimes), then applies the codecs' rules to the args of records that have a
handler, to count what LMCache's reader yields (records), what it rejects
(malformed frames) and what its replay skips (no handler, or args that do not
decode).

  lct_strict.py count FILE        prints: header-ok records malformed skipped
  lct_strict.py corpus DIR BASE   writes damaged variants of the trace BASE
  lct_strict.py check LMCACHE DIR runs `trace info` and `trace replay` on every
                                  file of DIR and compares their counts
  lct_strict.py many OUT N D [DIGEST]  N small records over D distinct qualnames
  lct_strict.py names OUT         qualnames and header strings that must print escaped
"""
import datetime
import json
import os
import random
import struct
import subprocess
import sys

MAX_DEPTH = 32  # the C reader's nesting limit (a documented difference from msgspec)
PREFIX = "lmcache.v1.distributed.storage_manager.StorageManager."
HANDLED = {PREFIX + m for m in (
    "reserve_write", "finish_write", "submit_prefetch_task", "finish_read_prefetched",
    "read_prefetched_results.__enter__", "read_prefetched_results.__exit__")}
DROPPED = "lmcache.trace.recorder.dropped_records"


class Malformed(Exception):
    """msgspec would reject the frame."""


class CodecError(Exception):
    """The codecs would reject the args (the replay skips the record)."""


class Ext:
    """msgspec.Ext: compares by value, not hashable."""
    __hash__ = None

    def __init__(self, code, data):
        self.code, self.data = code, data


# --------------------------------------------------------------------------
# msgpack, as msgspec decodes it
# --------------------------------------------------------------------------

class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise Malformed("truncated")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def byte(self):
        return self.take(1)[0]

    def uint(self, n):
        return int.from_bytes(self.take(n), "big")

    def sint(self, n):
        return int.from_bytes(self.take(n), "big", signed=True)

    def head(self):
        """The next item's kind and its scalar value, length or count."""
        b = self.byte()
        if b <= 0x7f:
            return "int", b
        if b >= 0xe0:
            return "int", b - 256
        if 0x80 <= b <= 0x8f:
            return "map", b & 0x0f
        if 0x90 <= b <= 0x9f:
            return "array", b & 0x0f
        if 0xa0 <= b <= 0xbf:
            return "str", self.take(b & 0x1f)
        if b == 0xc0:
            return "nil", None
        if b in (0xc2, 0xc3):
            return "bool", b == 0xc3
        if b in (0xc4, 0xc5, 0xc6):
            return "bin", self.take(self.uint(1 << (b - 0xc4)))
        if b in (0xc7, 0xc8, 0xc9):
            n = self.uint(1 << (b - 0xc7))
            code = self.sint(1)
            return "ext", (code, self.take(n))
        if b == 0xca:
            return "float", struct.unpack(">f", self.take(4))[0]
        if b == 0xcb:
            return "float", struct.unpack(">d", self.take(8))[0]
        if 0xcc <= b <= 0xcf:
            return "int", self.uint(1 << (b - 0xcc))
        if 0xd0 <= b <= 0xd3:
            return "int", self.sint(1 << (b - 0xd0))
        if 0xd4 <= b <= 0xd8:
            code = self.sint(1)
            return "ext", (code, self.take(1 << (b - 0xd4)))
        if b in (0xd9, 0xda, 0xdb):
            return "str", self.take(self.uint(1 << (b - 0xd9)))
        if b in (0xdc, 0xdd):
            return "array", self.uint(2 if b == 0xdc else 4)
        if b in (0xde, 0xdf):
            return "map", self.uint(2 if b == 0xde else 4)
        raise Malformed("invalid byte 0xc1")

    def skip(self, depth):
        """Structure only, as msgspec skips an unknown field."""
        kind, v = self.head()
        if kind in ("array", "map") and v > 0:
            if depth >= MAX_DEPTH:
                raise Malformed("too deep")
            for _ in range(v * (2 if kind == "map" else 1)):
                self.skip(depth + 1)

    def value(self, depth, key=False):
        """One value typed Any; depth counts the containers around it."""
        kind, v = self.head()
        if kind == "str":
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                raise Malformed("str not UTF-8")
        if kind == "ext":
            code, data = v
            if code == -1:
                return timestamp(data)
            return Ext(code, data)
        if kind in ("array", "map"):
            if v > 0 and depth >= MAX_DEPTH:
                raise Malformed("too deep")
            if kind == "array":
                items = [self.value(depth + 1, key) for _ in range(v)]
                return tuple(items) if key else items
            if key:
                raise Malformed("a dict cannot be a dict key")
            out = {}
            for _ in range(v):
                k = self.value(depth + 1, True)
                try:
                    hash(k)
                except TypeError:
                    raise Malformed("unhashable dict key")
                out[k] = self.value(depth + 1)
            return out
        return v


def timestamp(data):
    if len(data) == 4:
        secs, nanos = int.from_bytes(data, "big"), 0
    elif len(data) == 8:
        x = int.from_bytes(data, "big")
        secs, nanos = x & 0x3ffffffff, x >> 34
    elif len(data) == 12:
        nanos = int.from_bytes(data[:4], "big")
        secs = int.from_bytes(data[4:], "big", signed=True)
    else:
        raise Malformed("bad timestamp")
    if nanos > 999999999:
        raise Malformed("bad timestamp")
    try:
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return epoch + datetime.timedelta(seconds=secs, microseconds=nanos // 1000)
    except OverflowError:
        raise Malformed("timestamp out of range")


def is_number(kind):
    return kind in ("int", "float")


def decode_struct(body, tag, fields):
    """A tagged msgspec Struct from a map: {field: value} for the fields given.

    fields maps a name to a function(reader) -> value that reads and checks
    the field's value. A repeated field is decoded each time, the last kept.
    """
    r = Reader(body)
    kind, n = r.head()
    if kind != "map":
        raise Malformed("not a map")
    out = {}
    for _ in range(n):
        kind, k = r.head()
        if kind != "str":
            raise Malformed("key not a str")
        name = k.decode("latin-1")  # compared as bytes, never decoded, as msgspec does
        if k == b"type":
            kind, v = r.head()
            if kind != "str" or v != tag:
                raise Malformed("bad tag")
        elif name in fields and name.encode("latin-1") == k:
            out[name] = fields[name](r)
        else:
            r.skip(1)
    if r.pos != len(body):
        raise Malformed("trailing bytes")
    return out


def f_float(r):
    kind, v = r.head()
    if not is_number(kind):
        raise Malformed("not a float")
    return float(v)


def f_int(r):
    kind, v = r.head()
    if kind != "int":
        raise Malformed("not an int")
    return v


def f_str(r):
    kind, v = r.head()
    if kind != "str":
        raise Malformed("not a str")
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("str not UTF-8")


def f_bytes(r):
    kind, v = r.head()
    if kind != "bin":
        raise Malformed("not bytes")
    return v


def f_dict_str_any(r):
    kind, n = r.head()
    if kind != "map":
        raise Malformed("not a map")
    out = {}
    for _ in range(n):
        k = f_str(r)  # before the value: Python evaluates the right side first
        out[k] = r.value(2)
    return out


RECORD_FIELDS = {"t_mono": f_float, "t_wall": f_float, "qualname": f_str,
                 "args": f_dict_str_any}
HEADER_FIELDS = {"magic": f_bytes, "format_version": f_int, "level": f_str,
                 "trace_schema_version": f_int, "t_mono_start": f_float,
                 "t_wall_start": f_float, "sm_config_json": f_str,
                 "sm_config_digest": f_str, "level_meta": f_dict_str_any}


# --------------------------------------------------------------------------
# The codecs' rules (what makes LMCache's replay skip a record)
# --------------------------------------------------------------------------

DTYPES = {"torch." + n for n in (
    "float16 bfloat16 float32 float64 int8 uint8 int16 uint16 int32 uint32 int64 uint64 bool "
    "complex32 complex64 complex128 float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz "
    "qint8 quint8 qint32 half float double short int long cfloat cdouble chalf").split()}
ITEMSIZE = {"torch.float16": 2, "torch.bfloat16": 2, "torch.float32": 4, "torch.float64": 8}
INT64 = (-(1 << 63), (1 << 63) - 1)


def int64(v):
    if isinstance(v, bool) or not isinstance(v, int) or not INT64[0] <= v <= INT64[1]:
        raise CodecError("not an int64")
    return v


def object_key(p):
    if not isinstance(p, dict):
        raise CodecError("ObjectKey payload not a map")
    if not isinstance(p.get("chunk_hash"), bytes) or not isinstance(p.get("model_name"), str):
        raise CodecError("ObjectKey fields")
    if "kv_rank" not in p:
        raise CodecError("no kv_rank")
    int64(p["kv_rank"])
    if int64(p.get("object_group_id", 0)) < 0:
        raise CodecError("negative group")
    model = p["model_name"]
    if "@" in model or "\0" in model or len(model.encode()) > 1024:
        raise CodecError("bad model name")
    salt = p.get("cache_salt", "")
    if not isinstance(salt, str) or any(c in salt for c in "@/\\\0") or len(salt) > 128:
        raise CodecError("bad salt")
    return ("key", p["chunk_hash"], model, p["kv_rank"], p.get("object_group_id", 0), salt)


def shape(v):
    if not isinstance(v, list) or len(v) > 8:
        raise CodecError("bad shape")
    return [int64(x) for x in v]


def layout(p):
    if not isinstance(p, dict):
        raise CodecError("layout payload not a map")
    shapes, dtypes = p.get("shapes"), p.get("dtypes")
    if not isinstance(shapes, list) or not isinstance(dtypes, list):
        raise CodecError("layout fields")
    if len(shapes) != len(dtypes) or len(shapes) > 8:
        raise CodecError("layout lengths")
    total = 0
    for s, d in zip(shapes, dtypes):
        dims = shape(s)
        if not isinstance(d, str) or d not in DTYPES:
            raise CodecError("unknown dtype")
        if any(x < 0 for x in dims):
            raise CodecError("negative dim")
        size = ITEMSIZE.get(d, 1)
        if 0 not in dims:
            for x in dims:
                size *= x
        else:
            size = 0
        if size >= 1 << 64:
            raise CodecError("layout too large")
        total += size
        if total >= 1 << 64:
            raise CodecError("layout too large")
    return ("layout",)


def named(names):
    def dec(p):
        if not isinstance(p, str) or p not in names:
            raise CodecError("unknown name")
        return p
    return dec


CODECS = {
    "ObjectKey": object_key,
    "MemoryLayoutDesc": layout,
    "TrimPolicy": named({"PREFIX", "SEGMENTED_PREFIX", "SPARSE"}),
    "torch.dtype": named(DTYPES),
    "torch.Size": shape,
}


def decode_value(v):
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if isinstance(v, dict):
        if "__t__" in v:
            tag = v["__t__"]
            if not isinstance(tag, str):
                raise CodecError("tag not a str")
            if tag != "tuple" and tag != "set" and tag not in CODECS:
                raise CodecError("unknown tag")
            if "v" not in v:
                raise CodecError("no v")
            p = v["v"]
            if tag in ("tuple", "set"):
                if not isinstance(p, list):
                    raise CodecError("not a list")
                return [decode_value(x) for x in p]
            if tag == "PrefetchHandle":
                raise CodecError("not modelled")
            return CODECS[tag](p)
        return {k: decode_value(x) for k, x in v.items()}
    if isinstance(v, (Ext, datetime.datetime)):
        raise CodecError("an ext value")  # the C codecs have no ext value (documented)
    return v


# --------------------------------------------------------------------------
# A file
# --------------------------------------------------------------------------

def count(path):
    """(header_ok, records, malformed, skipped) as LMCache's reader and replay see them."""
    data = open(path, "rb").read()
    pos = 0
    frames = []
    while True:
        if pos == len(data):
            break
        if len(data) - pos < 4:
            break  # truncated prefix
        n = int.from_bytes(data[pos:pos + 4], "big")
        if len(data) - pos - 4 < n:
            break  # truncated body
        frames.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    if not frames:
        return False, 0, 0, 0
    try:
        h = decode_struct(frames[0], b"header", HEADER_FIELDS)
        for f in ("magic", "format_version", "level", "trace_schema_version", "t_mono_start",
                  "t_wall_start", "sm_config_json", "sm_config_digest"):
            if f not in h:
                raise Malformed("missing " + f)
        if h["magic"] != b"LMCT" or h["format_version"] != 1:
            raise Malformed("magic or version")
        if h["trace_schema_version"] not in (1, 2):
            raise Malformed("schema")
    except (Malformed, RecursionError):
        return False, 0, 0, 0
    records = malformed = skipped = 0
    for body in frames[1:]:
        try:
            rec = decode_struct(body, b"record", RECORD_FIELDS)
            for f in ("t_mono", "t_wall", "qualname", "args"):
                if f not in rec:
                    raise Malformed("missing " + f)
        except (Malformed, RecursionError):
            malformed += 1
            continue
        q = rec["qualname"]
        if q == DROPPED:
            continue  # the C commands show it as a dropped-records count, not a record
        records += 1
        if q not in HANDLED:
            skipped += 1
            continue
        try:
            decode_value(rec["args"])
        except CodecError:
            skipped += 1
    return True, records, malformed, skipped


# --------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------

def pack(v):
    """msgpack in msgspec's forms (enough for the crafted records)."""
    if v is None:
        return b"\xc0"
    if v is True or v is False:
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if 0 <= v < 1 << 32:
            return b"\xce" + v.to_bytes(4, "big")
        if v >= 0:
            return b"\xcf" + v.to_bytes(8, "big")
        return b"\xd3" + v.to_bytes(8, "big", signed=True)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, Raw):
        return v.b
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, str):
        b = v.encode("utf-8", "surrogatepass")
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(pack(x) for x in v)
    if isinstance(v, Pairs):
        return bytes([0x80 | len(v.items)]) + b"".join(pack(k) + pack(x) for k, x in v.items)
    raise TypeError(v)


class Raw:
    def __init__(self, b):
        self.b = b


class Pairs:
    """A map written pair by pair (so keys may repeat or be of any type)."""

    def __init__(self, *items):
        self.items = list(items)


def frame(body):
    return len(body).to_bytes(4, "big") + body


def key(i):
    return Pairs(("__t__", "ObjectKey"), ("v", Pairs(("chunk_hash", bytes([i] * 4)),
                                                     ("model_name", "m"), ("kv_rank", 0),
                                                     ("object_group_id", 0),
                                                     ("cache_salt", ""))))


def record(q, args, t=0.5, extra=()):
    return pack(Pairs(("type", "record"), ("t_mono", t), ("t_wall", 1.0), ("qualname", q),
                      ("args", args), *extra))


def crafted():
    """Frames for the damage a mutation rarely hits by chance, one file each."""
    keys = [key(1), key(2)]
    fw = PREFIX + "finish_write"
    ok = record(fw, Pairs(("keys", keys)))
    return {
        "wrong-types": [pack(Pairs(("t_mono", "x"), ("t_wall", 1.0), ("qualname", fw),
                                   ("args", Pairs()))),
                        record(fw, [1, 2]),
                        pack(Pairs(("t_mono", True), ("t_wall", 1.0), ("qualname", fw),
                                   ("args", Pairs()))),
                        record(7, Pairs()), record(fw, Pairs((1, 2))), ok],
        "duplicate-keys": [
            record(fw, Pairs(("keys", keys)), extra=(("t_mono", 9.0),)),
            record(fw, Pairs(("keys", keys)), extra=(("t_mono", "late"),)),
            record(fw, Pairs(("keys", [1])), extra=(("args", Pairs(("keys", keys))),)),
            record(fw, [1], extra=(("args", Pairs(("keys", keys))),)),
            record(fw, Pairs(("keys", keys)), extra=(("type", "header"),)),
            record(fw, Pairs(("keys", keys), ("keys", [key(3)])))],
        "trailing-bytes": [ok + b"\xc0", ok + b"\x00\x00", ok],
        "utf8-and-keys": [record(fw, Pairs(("keys", keys), ("x", Raw(b"\xa2\xc3\x28")))),
                          record(Raw(b"\xa3q\xed\xa0"), Pairs()),
                          record(fw, Pairs(("keys", keys), ("d", Pairs((Pairs(), 1))))),
                          record(fw + "\0x", Pairs(("keys", keys))),
                          record("qa\x1b[2J", Pairs()), ok],
        "codec-tags": [record(fw, Pairs(("keys", [Pairs(("__t__", "Nope"), ("v", 1))]))),
                       record(fw, Pairs(("keys", [Pairs(("__t__", "ObjectKey"))]))),
                       record(fw, Pairs(("keys", [Pairs(("__t__", "tuple"), ("v", 5))]))),
                       record(fw, Pairs(("keys", keys), ("when", Raw(b"\xd6\xff\x00\x00\x00\x01")))),
                       record("not.handled", Pairs(("x", Pairs(("__t__", "Nope"))))), ok],
        "lmcache-limits": [
            record(fw, Pairs(("keys", [Pairs(("__t__", "ObjectKey"), ("v", Pairs(
                ("chunk_hash", bytes(range(100))), ("model_name", "m"), ("kv_rank", 0))))]))),
            record("big.int", Pairs(("n", (1 << 64) - 1))),
            pack(Pairs(("type", "record"), ("t_mono", (1 << 64) - 1), ("t_wall", 1.0),
                       ("qualname", fw), ("args", Pairs(("keys", keys))))), ok],
        "times": [record(fw, Pairs(("keys", keys)), t=t) for t in
                  (0.0, 1e9, float("nan"), float("inf"), -3.0, 1e300, 0.1)],
    }


def write_corpus(out, base):
    data = open(base, "rb").read()
    os.makedirs(out, exist_ok=True)
    header_len = 4 + int.from_bytes(data[:4], "big")
    header = data[:header_len]
    rng = random.Random(13)
    names = []
    for i in range(12):  # truncated anywhere
        cut = rng.randrange(header_len, len(data))
        names.append(("truncated-%02d" % i, data[:cut]))
    for i in range(60):  # one bit flipped anywhere past the header's length prefix
        b = bytearray(data)
        at = rng.randrange(4, len(b))
        b[at] ^= 1 << rng.randrange(8)
        names.append(("bitflip-%02d" % i, bytes(b)))
    for i in range(10):  # one bit flipped in the header
        b = bytearray(data)
        at = rng.randrange(4, header_len)
        b[at] ^= 1 << rng.randrange(8)
        names.append(("header-bitflip-%02d" % i, bytes(b)))
    for i in range(20):  # two flips in the records
        b = bytearray(data)
        for _ in range(2):
            at = rng.randrange(header_len + 4, len(b))
            b[at] ^= 1 << rng.randrange(8)
        names.append(("bitflip2-%02d" % i, bytes(b)))
    for name, bodies in crafted().items():
        names.append((name, header + b"".join(frame(x) for x in bodies)))
    names.append(("intact", data))
    for name, content in names:
        with open(os.path.join(out, name + ".lct"), "wb") as f:
            f.write(content)
    return len(names)


def c_counts(lmcache, path):
    """(header_ok, records, malformed, skipped) from `trace info` and `trace replay`."""
    env = dict(os.environ, LMCACHE_LOG_LEVEL="error")
    info = subprocess.run([lmcache, "trace", "info", path], capture_output=True, env=env,
                          timeout=120)
    if info.returncode != 0:
        return False, 0, 0, 0, None
    rows = {}
    for line in info.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("  ") and not line.startswith("    ") and ":" in line:
            k, _, v = line.strip().partition(":")
            rows[k] = v.strip()
    replay = subprocess.run(
        [lmcache, "trace", "replay", path, "--l1-size-gb", "0.0625", "--eviction-policy", "LRU",
         "--time-scale", "1e-9", "--format", "json", "--no-csv",
         "--output-dir", os.path.dirname(path) or "."],
        capture_output=True, env=env, timeout=120)
    if replay.returncode not in (0, 1):
        return True, None, None, None, "replay exit %d: %s" % (replay.returncode, replay.stderr)
    overall = json.loads(replay.stdout)["trace"]["records"]
    total = int(rows.get("total_records", "-1"))
    malformed = int(rows.get("malformed_records", "0"))
    if overall["replayed"] + overall["skipped"] + overall["failed"] != total:
        return True, None, None, None, "replay and info disagree on records: %s vs %d" % (
            overall, total)
    if overall.get("malformed", 0) != malformed:
        return True, None, None, None, "replay and info disagree on malformed: %s vs %d" % (
            overall, malformed)
    return True, total, malformed, overall["skipped"], None


def check(lmcache, directory):
    bad = 0
    files = sorted(f for f in os.listdir(directory) if f.endswith(".lct"))
    for name in files:
        path = os.path.join(directory, name)
        want = count(path)
        h, rec, mal, sk, problem = c_counts(lmcache, path)
        got = (h, rec, mal, sk)
        if problem is not None or got != want:
            bad += 1
            print("MISMATCH %s: independent reader %s, lmcache %s %s" % (
                name, want, got, problem or ""))
    print("%d files, %d mismatches" % (len(files), bad))
    return 1 if bad else 0


def write_many(out, n, distinct, digest=""):
    """A header (with digest) and n small records over `distinct` qualnames."""
    with open(out, "wb") as f:
        f.write(frame(pack(Pairs(
            ("type", "header"), ("magic", b"LMCT"), ("format_version", 1), ("level", "storage"),
            ("trace_schema_version", 2), ("t_mono_start", 1.0), ("t_wall_start", 2.0),
            ("sm_config_json", "{}" if digest else ""), ("sm_config_digest", digest)))))
        names = [pack("op.%06d" % i) for i in range(distinct)]
        head = pack("type") + pack("record") + pack("t_mono")
        tail = pack("t_wall") + pack(1.0) + pack("qualname")
        chunk = []
        for i in range(n):
            body = b"\x85" + head + pack(i * 1e-6) + tail + names[i % distinct] + \
                pack("args") + b"\x80"
            chunk.append(frame(body))
            if len(chunk) == 65536:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))


def write_names(out):
    """Qualnames that must print escaped, one row per distinct name."""
    qs = ["a\0b", "a\0b", "a\0c", "\x1b[2J", "x\n    forged: 9", "bidi\u202eevil", "plain"]
    header = frame(pack(Pairs(
        ("type", "header"), ("magic", b"LMCT"), ("format_version", 1), ("level", "stor\x1bage"),
        ("trace_schema_version", 2), ("t_mono_start", 1.0), ("t_wall_start", 2.0),
        ("sm_config_json", ""), ("sm_config_digest", "d\rx"))))
    with open(out, "wb") as f:
        f.write(header + b"".join(frame(record(q, Pairs())) for q in qs))


def main(argv):
    if len(argv) == 3 and argv[1] == "count":
        print(*count(argv[2]))
        return 0
    if len(argv) == 4 and argv[1] == "corpus":
        print(write_corpus(argv[2], argv[3]), "files")
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) in (5, 6) and argv[1] == "many":
        write_many(argv[2], int(argv[3]), int(argv[4]), argv[5] if len(argv) == 6 else "")
        return 0
    if len(argv) == 3 and argv[1] == "names":
        write_names(argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
