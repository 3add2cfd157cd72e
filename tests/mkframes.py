#!/usr/bin/python3
"""Write loom batch frames (formats/batch.md) for the loom-train tests.

Records follow a learnable rule (next = (3*prev + 1) mod V, random start),
so a model's loss falls fast.  --corrupt breaks one frame on purpose.
usage: mkframes.py B SEQ(T+1) COUNT VOCAB SEED [--start N] [--corrupt KIND@FRAME]
       [--no-end] [--noise P] > frames
"""
import random
import struct
import sys

def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t

TAB = crc32c_table()

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TAB[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def header(dtype, flags, b, s, seq, payload, seed, corrupt=None):
    h = bytearray(struct.pack('<4sHHHHIIIQIHHQQI', b'LMBF', 1, 64, dtype, flags, b, s, 0,
                              seq, 0, 0, 1, len(payload), seed, crc32c(payload)))
    if corrupt == 'magic':
        h[0:4] = b'XXXX'
    h += struct.pack('<I', crc32c(bytes(h)))
    return bytes(h)

def main():
    a = sys.argv[1:]
    b, s, count, vocab, seed = (int(x) for x in a[:5])
    start, corrupt, end, noise = 0, None, True, 0.0
    i = 5
    while i < len(a):
        if a[i] == '--start':
            start = int(a[i + 1]); i += 2
        elif a[i] == '--corrupt':
            corrupt = a[i + 1].split('@'); corrupt[1] = int(corrupt[1]); i += 2
        elif a[i] == '--no-end':
            end = False; i += 1
        elif a[i] == '--noise':
            noise = float(a[i + 1]); i += 2
        else:
            sys.exit('mkframes.py: bad argument ' + a[i])
    rng = random.Random(seed)
    out = sys.stdout.buffer
    for f in range(count):
        toks = []
        for _ in range(b):
            x = rng.randrange(vocab)
            for _ in range(s):
                toks.append(x)
                x = (3 * x + 1) % vocab if rng.random() >= noise else rng.randrange(vocab)
        payload = struct.pack('<%dH' % len(toks), *toks)
        kind = corrupt[0] if corrupt and corrupt[1] == f else None
        bb = b + 1 if kind == 'shape' else b
        if kind == 'shape':
            payload += payload[: 2 * s]
        h = header(1, 0, bb, s, start + f, payload, seed, 'magic' if kind == 'magic' else None)
        if kind == 'crc':
            payload = bytes([payload[0] ^ 1]) + payload[1:]
        out.write(h + payload)
    if end:
        out.write(header(1, 1, b, s, start + count, b'', seed))

main()
