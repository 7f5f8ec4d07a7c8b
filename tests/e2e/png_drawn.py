#!/usr/bin/env python3
# png_drawn.py FILE WIDTH HEIGHT: exit 0 when FILE is a PNG of that size with
# something drawn on it (more than 40 distinct colours), for the e2e tests
# that render an HTML report in headless Chromium. Not a test itself.
import struct
import sys
import zlib

d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
i, idat = 8, b""
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    if t == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", d[i + 8:i + 18])
    elif t == b"IDAT":
        idat += d[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4}[ctype]
stride = w * bpp
# Colours of unfiltered bytes are enough to tell a blank page from a drawn one: sample every row's
# filter-0 pixels and the raw bytes of the others.
colours = set()
for y in range(0, h, 4):
    row = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
    for x in range(0, stride - bpp, bpp * 3):
        colours.add(row[x:x + 3])
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), (w, h)
assert len(colours) > 40, "blank screenshot: %d distinct values" % len(colours)
