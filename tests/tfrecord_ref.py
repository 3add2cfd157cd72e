#!/usr/bin/env python3
"""Independent reference for loom's TFRecord tests (Python standard library only).

Written from the format rules in formats/tfrecord.md and formats/index.md, not
from loom's C code, so the shell tests can check loom against it:

  tfrecord_ref.py write OUT HEX-PAYLOAD...   frame payloads into a TFRecord file
  tfrecord_ref.py idx FILE                   index as tfrecord2idx writes it
  tfrecord_ref.py verify FILE                check every CRC; print "N records"
  tfrecord_ref.py ids FILE                   decode Example{"input_ids"} per record
  tfrecord_ref.py example KEY=int:1,2 KEY=float:0.5 KEY=bytes:hex ...
                                             print a hand-encoded Example as hex
  tfrecord_ref.py windows L S KEEP_TAIL < ids  expected samples, one per line
"""
import struct
import sys

POLY = 0x82F63B78
TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    head = struct.pack("<Q", len(payload))
    return (head + struct.pack("<I", masked(head)) + payload
            + struct.pack("<I", masked(payload)))


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        (lc,) = struct.unpack_from("<I", data, pos + 8)
        if lc != masked(data[pos:pos + 8]):
            raise SystemExit("length crc mismatch at %d" % pos)
        payload = data[pos + 12:pos + 12 + n]
        (pc,) = struct.unpack_from("<I", data, pos + 12 + n)
        if pc != masked(payload):
            raise SystemExit("payload crc mismatch at %d" % pos)
        yield pos, payload
        pos += 16 + n


def tfrecord2idx(path):
    """The loop of the tfrecord package's tfrecord2idx, as documented."""
    out = []
    with open(path, "rb") as f:
        while True:
            current = f.tell()
            byte_len = f.read(8)
            if len(byte_len) == 0:
                break
            f.read(4)
            proto_len = struct.unpack("q", byte_len)[0]
            f.read(proto_len)
            f.read(4)
            out.append("%d %d\n" % (current, f.tell() - current))
    return "".join(out)


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_varint(b, i):
    shift = v = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def ld(field, body):
    return varint(field << 3 | 2) + varint(len(body)) + body


def example(features):
    """features: list of (key, kind, values); kind int|float|bytes."""
    entries = b""
    for key, kind, values in features:
        if kind == "int":
            lst = ld(1, b"".join(varint(v) for v in values)) if values else b""
            feat = ld(3, lst)
        elif kind == "float":
            lst = ld(1, b"".join(struct.pack("<f", v) for v in values)) if values else b""
            feat = ld(2, lst)
        else:
            feat = ld(1, b"".join(ld(1, v) for v in values))
        entries += ld(1, ld(1, key.encode()) + ld(2, feat))
    return ld(1, entries)


def decode_ids(p):
    """Example -> input_ids values (only the exact single-feature layout)."""
    _, i = read_varint(p, 0)           # 0a
    _, i = read_varint(p, i)           # len
    _, i = read_varint(p, i)           # 0a entry
    _, i = read_varint(p, i)
    _, i = read_varint(p, i)           # 0a key
    kl, i = read_varint(p, i)
    key = p[i:i + kl]
    i += kl
    assert key == b"input_ids", key
    _, i = read_varint(p, i)           # 12
    _, i = read_varint(p, i)
    _, i = read_varint(p, i)           # 1a
    ll, i = read_varint(p, i)
    if ll == 0:
        return []
    _, i = read_varint(p, i)           # 0a
    pl, i = read_varint(p, i)
    end = i + pl
    vals = []
    while i < end:
        v, i = read_varint(p, i)
        vals.append(v)
    return vals


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        with open(sys.argv[2], "wb") as f:
            for h in sys.argv[3:]:
                f.write(frame(bytes.fromhex(h)))
    elif cmd == "idx":
        sys.stdout.write(tfrecord2idx(sys.argv[2]))
    elif cmd == "verify":
        print("%d records" % sum(1 for _ in records(sys.argv[2])))
    elif cmd == "ids":
        for _, p in records(sys.argv[2]):
            print(" ".join(str(v) for v in decode_ids(p)))
    elif cmd == "example":
        feats = []
        for arg in sys.argv[2:]:
            key, rest = arg.split("=", 1)
            kind, vals = rest.split(":", 1)
            if kind == "int":
                v = [int(x) for x in vals.split(",")] if vals else []
            elif kind == "float":
                v = [float(x) for x in vals.split(",")] if vals else []
            else:
                v = [bytes.fromhex(x) for x in vals.split(",")] if vals else []
            feats.append((key, kind, v))
        print(example(feats).hex())
    elif cmd == "windows":
        L, S, keep = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
        toks = sys.stdin.read().split()
        n = len(toks)
        start = 0
        while start < n - L:
            print(" ".join(toks[start:start + L]))
            start += S
        if keep and start < n and (n - start) * 2 >= L:
            print(" ".join(toks[start:]))
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
