"""loom_data - read loom's data from Python, standard library only.

Two readers, written from the format specs (formats/batch.md and
formats/tfrecord.md in the loom sources), checking what loom's own readers
check:

  read_frames(f)      loom-feed's batch frames (a pipe or a file): yields a
                      Frame per micro-batch, its records as rows of ids.
  read_tfrecord(path) TFRecord records (loom-shard's shards), CRC-32C
                      checked; parse_example() decodes a tf.train.Example,
                      read_ids() yields the input_ids of each record.

Every problem (a file that cannot be opened too) raises LoomDataError naming
the stream or file, the frame or record number and its byte offset, as
loom's tools do; read_ids refuses what loom-cat --ids refuses (a record
without the feature, or with floats or bytes in it).  No third-party module
is needed; with PyTorch, wrap read_frames in an IterableDataset:

    import torch
    from loom_data import feed_frames

    class LoomFeed(torch.utils.data.IterableDataset):
        def __init__(self, *feed_args):
            self.args = feed_args
        def __iter__(self):
            for fr in feed_frames(self.args):   # this worker's share
                x = torch.tensor(fr.rows(), dtype=torch.long)
                yield x[:, :-1], x[:, 1:]

    data = LoomFeed("--manifest", "data/wiki.manifest.json",
                    "--batch", "8", "--seq", "1024", "--seed", "1")
    for inputs, targets in torch.utils.data.DataLoader(data, batch_size=None,
                                                       num_workers=2):
        ...

Frames of a squad-features set (loom-squad prepare; version 2) carry their
features: fr.bert_inputs() is the dict of long tensors BertForQuestionAnswering
takes (model(**fr.bert_inputs())), fr.tensors() every feature by its name.
feed_frames runs the loom-feed on PATH, else the one of the checkout or
installation this file is in (find_feed); feed=PATH names another.

With num_workers=N the DataLoader runs N copies of the dataset; feed_frames
gives worker k of N every N-th frame (k, k+N, ...), so each batch comes
once, in the order of one loom-feed (the DataLoader takes the workers'
batches in turn).  Without workers (or without torch) it yields them all.

Without a subprocess: write_bin(manifest, "train.bin") writes the ids of
every record of a loom-shard manifest (in its shard order) as one flat
array, uint16 when every id fits, else uint32 (nanoGPT's train.bin), and
memmap_bin("train.bin") maps it with numpy (the only function that needs
numpy).

Command line (what the tests compare with loom-feed --text and loom-cat):

    python3 loom_data.py frames [FILE]      "SEQ EPOCH ROW: ids... [| FEATURE values]" lines
    python3 loom_data.py ids FILE...        the input_ids of each record
    python3 loom_data.py json FILE...       each record as JSON, like loom-cat
    python3 loom_data.py bin MANIFEST OUT   write_bin: OUT's dtype on stdout
"""

import array
import json
import os
import struct
import subprocess
import sys
from collections import namedtuple

__all__ = ["LoomDataError", "Frame", "crc32c", "read_frames", "read_tfrecord",
           "parse_example", "read_ids", "worker_share", "split_frames",
           "find_feed", "feed_frames", "manifest_shards", "write_bin", "memmap_bin"]


class LoomDataError(Exception):
    """Malformed, truncated or corrupted loom data."""


# ---- CRC-32C (Castagnoli, reflected 0x82F63B78) ------------------------------

def _table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_TABLE = _table()


def crc32c(data, crc=0):
    """CRC-32C of bytes `data`; crc32c(b"123456789") == 0xE3069283."""
    t = _CRC_TABLE
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _read_exact(f, n):
    """Up to n bytes (fewer only at the end of the input)."""
    parts, got = [], 0
    while got < n:
        b = f.read(n - got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _open(path):
    """open(path, "rb"), or LoomDataError naming the file and the reason."""
    try:
        return open(path, "rb")
    except OSError as e:
        raise LoomDataError("cannot open '%s': %s" % (path, e.strerror or e)) from e


def _name(f, default):
    n = getattr(f, "name", None)
    return n if isinstance(n, str) and not n.startswith("<") else default


# ---- batch frames (formats/batch.md) -----------------------------------------

_HDR = struct.Struct("<4sHHHHIIIQIHHQQII")
_END, _PAD, _FEATURES = 1, 2, 4
# feature dtypes of version 2: code -> (bytes, array typecode wanted, signed)
_FDTYPES = {1: (2, "H"), 2: (4, "I"), 3: (1, "B"), 4: (4, "i"), 5: (8, "q")}
_PER_TOKEN, _PER_RECORD = 0, 1
# BertForQuestionAnswering's argument names for the squad-features ones
_BERT_NAMES = (("input_ids", "input_ids"), ("token_type_ids", "segment_ids"),
               ("attention_mask", "input_mask"), ("start_positions", "start_positions"),
               ("end_positions", "end_positions"))


def _array(code, width, data):
    """data (little-endian values of `width` bytes) as an array.array."""
    a = array.array(code)
    if a.itemsize != width:  # a platform whose "I"/"i" is not 4 bytes
        a = array.array({"I": "L", "i": "l"}.get(code, code))
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


class Frame(namedtuple("Frame", "seq epoch rank world batch seq_len pad_id seed ids features",
                       defaults=(None,))):
    """One micro-batch: `batch` records of `seq_len` ids, row-major in `ids`
    (an array.array); pad_id is None unless the frame says PAD.  A token
    frame (version 1) has seq_len T+1 ids a record and features None; a
    frame with features (version 2: a squad-features set, formats/batch.md)
    has seq_len tokens a record and features {name: (per_token, length,
    array of batch x length values)} in the frame's order."""

    __slots__ = ()

    def rows(self):
        """The records as lists of ints: inputs row[:-1], targets row[1:]."""
        n = self.seq_len
        return [self.ids[i * n:(i + 1) * n].tolist() for i in range(self.batch)]

    def feature(self, name):
        """Feature `name` as rows: a list of `batch` lists (per-token, or
        per-record of several values), or of `batch` ints (per-record of
        one value, as start_positions).  KeyError if the frame lacks it."""
        per_token, n, vals = (self.features or {})[name]
        rows = [vals[i * n:(i + 1) * n].tolist() for i in range(self.batch)]
        return rows if per_token or n > 1 else [r[0] for r in rows]

    def tensors(self, make=None):
        """{"input_ids": rows, each feature: its rows} made into tensors by
        make(rows) (default: torch.tensor(rows, dtype=torch.long))."""
        make = make or _torch_long
        out = {"input_ids": make(self.rows())}
        for name in self.features or {}:
            out[name] = make(self.feature(name))
        return out

    def bert_inputs(self, make=None):
        """The tensors of a squad-features frame under the argument names of
        HuggingFace's BertForQuestionAnswering (input_ids, token_type_ids,
        attention_mask, start_positions, end_positions): model(**inputs)."""
        if not self.features:
            raise LoomDataError("frame %d: a token frame (version 1) has no BERT features"
                                % self.seq)
        make = make or _torch_long
        missing = [ours for _, ours in _BERT_NAMES[1:] if ours not in self.features]
        if missing:
            raise LoomDataError("frame %d: no feature %s" % (self.seq, ", ".join(missing)))
        return {hf: make(self.rows() if ours == "input_ids" else self.feature(ours))
                for hf, ours in _BERT_NAMES}


def _torch_long(rows):
    import torch
    return torch.tensor(rows, dtype=torch.long)


def _features(payload, batch, seq_len, width, where):
    """A version-2 payload -> (ids bytes, {name: (per_token, length, array)}),
    checked as formats/batch.md says (LoomDataError naming the frame)."""
    if len(payload) < 8:
        raise LoomDataError("%s: no room for a feature table" % where)
    nf, esize, reserved = struct.unpack_from("<HHI", payload)
    if esize != 32 or reserved or not 1 <= nf <= 64 or 8 + 32 * nf > len(payload):
        raise LoomDataError("%s: bad feature table: %d features of %d bytes, reserved %d"
                            % (where, nf, esize, reserved))
    table, names = [], set()
    for k in range(nf):
        e = payload[8 + 32 * k:8 + 32 * (k + 1)]
        raw, shape, dtype, res2, length = struct.unpack("<24sBBHI", e)
        name = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        what = None
        if b"\0" not in raw or not name:
            what = "name not NUL-terminated or empty"
        elif shape not in (_PER_TOKEN, _PER_RECORD) or res2:
            what = "unknown shape or reserved bytes not 0"
        elif dtype not in _FDTYPES:
            what = "unknown dtype"
        elif (length != seq_len) if shape == _PER_TOKEN else not 1 <= length <= 65535:
            what = "length does not fit its shape"
        elif name in names:
            what = "name repeats"
        if what:
            raise LoomDataError('%s: feature %d "%s": %s (shape %d, dtype %d, length %d)'
                                % (where, k, name, what, shape, dtype, length))
        names.add(name)
        table.append((name, shape == _PER_TOKEN, dtype, length))
    pad8 = lambda n: (n + 7) & ~7  # noqa: E731
    off = 8 + 32 * nf
    ids = payload[off:off + batch * seq_len * width]
    need = pad8(off + batch * seq_len * width)
    at = need
    for _, _, dtype, length in table:
        need += pad8(batch * length * _FDTYPES[dtype][0])
    if need != len(payload):
        raise LoomDataError("%s: payload_bytes %d, the feature table needs %d"
                            % (where, len(payload), need))
    feats = {}
    for name, per_token, dtype, length in table:
        w, code = _FDTYPES[dtype]
        n = batch * length * w
        feats[name] = (per_token, length, _array(code, w, payload[at:at + n]))
        at = pad8(at + n)
    return ids, feats


def read_frames(f, name=None, verify=True):
    """Yield the data frames of a loom-feed stream read from binary file
    object `f` (e.g. sys.stdin.buffer or a Popen's stdout), checking the
    stream rules of formats/batch.md; stops after the end-of-stream frame.
    Token frames (version 1) and frames with features (version 2, from a
    squad-features manifest: Frame.features, .tensors(), .bert_inputs()).
    verify=False skips the payload CRC (the header CRC is always checked)."""
    name = name or _name(f, "stream")
    off, k, shape, next_seq, stream_version = 0, 0, None, None, None
    while True:
        where = "%s: frame %d at byte %d" % (name, k, off)
        h = _read_exact(f, 64)
        if not h:
            raise LoomDataError("%s: the stream ended without an end-of-stream frame "
                                "(did the feeder die?)" % where)
        if len(h) < 64:
            raise LoomDataError("%s: truncated header (%d of 64 bytes)" % (where, len(h)))
        (magic, version, hsize, dtype, flags, batch, seq_len, pad_id, seq, epoch,
         rank, world, nbytes, seed, pcrc, hcrc) = _HDR.unpack(h)
        if magic != b"LMBF":
            raise LoomDataError("%s: bad magic %r (not a loom batch frame)" % (where, magic))
        if version not in (1, 2) or hsize != 64:
            raise LoomDataError("%s: version %d, header size %d (want 1 or 2, 64)"
                                % (where, version, hsize))
        c = crc32c(h[:60])
        if c != hcrc:
            raise LoomDataError("%s: header checksum mismatch (stored %08x, computed %08x)"
                                % (where, hcrc, c))
        known = _END | _PAD | (_FEATURES if version == 2 else 0)
        if dtype not in (1, 2) or flags & ~known:
            raise LoomDataError("%s: unknown dtype %d or flags %#x" % (where, dtype, flags))
        if rank >= world:
            raise LoomDataError("%s: rank %d is not below world %d" % (where, rank, world))
        if flags & _END:
            if nbytes:
                raise LoomDataError("%s: end-of-stream frame with %d payload bytes"
                                    % (where, nbytes))
            if next_seq is not None and seq != next_seq:
                raise LoomDataError("%s: end-of-stream frame has seq %d, want %d"
                                    % (where, seq, next_seq))
            if f.read(1):
                raise LoomDataError("%s: data after the end-of-stream frame" % where)
            return
        if version == 2 and not flags & _FEATURES:
            raise LoomDataError("%s: a version-2 frame without features (flag FEATURES): "
                                "token frames are version 1" % where)
        if stream_version is not None and version != stream_version:
            raise LoomDataError("%s: version %d frame in a stream of version %d frames"
                                % (where, version, stream_version))
        width = 2 if dtype == 1 else 4
        if batch < 1 or seq_len < 2 or batch * seq_len > 1 << 28 or \
                (nbytes != batch * seq_len * width if version == 1 else nbytes > 1 << 31):
            raise LoomDataError("%s: bad shape %d x %d with %d payload bytes"
                                % (where, batch, seq_len, nbytes))
        if shape is None:
            shape = (batch, seq_len)
        elif shape != (batch, seq_len):
            raise LoomDataError("%s: shape %d x %d differs from the first frame's %d x %d"
                                % ((where, batch, seq_len) + shape))
        if next_seq is not None and seq != next_seq:
            raise LoomDataError("%s: seq %d, want %d (frames lost or reordered)"
                                % (where, seq, next_seq))
        payload = _read_exact(f, nbytes)
        if len(payload) < nbytes:
            raise LoomDataError("%s: truncated payload (%d of %d bytes)"
                                % (where, len(payload), nbytes))
        if verify:
            c = crc32c(payload)
            if c != pcrc:
                raise LoomDataError("%s: payload checksum mismatch (stored %08x, computed %08x)"
                                    % (where, pcrc, c))
        feats = None
        if version == 2:
            payload, feats = _features(payload, batch, seq_len, width, where)
        ids = _array("H" if width == 2 else "I", width, payload)
        yield Frame(seq, epoch, rank, world, batch, seq_len,
                    pad_id if flags & _PAD else None, seed, ids, feats)
        off += 64 + nbytes
        k += 1
        next_seq = seq + 1
        stream_version = version


# ---- TFRecord (formats/tfrecord.md) ------------------------------------------

def read_tfrecord(path, verify=True):
    """Yield the payload (bytes) of each record of a TFRecord file (a path or
    a binary file object), checking both masked CRC-32Cs (verify=False skips
    the payload's)."""
    f = _open(path) if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__") \
        else path
    name = str(path) if f is not path else _name(f, "stream")
    try:
        off, k = 0, 0
        while True:
            where = "%s: record %d at byte %d" % (name, k, off)
            h = _read_exact(f, 12)
            if not h:
                return
            if len(h) < 12:
                raise LoomDataError("%s: truncated record header" % where)
            n, lcrc = struct.unpack("<QI", h)
            if _masked(crc32c(h[:8])) != lcrc:
                raise LoomDataError("%s: length CRC mismatch" % where)
            if n > 1 << 30:
                raise LoomDataError("%s: record of %d bytes is too large" % (where, n))
            body = _read_exact(f, n + 4)
            if len(body) < n + 4:
                raise LoomDataError("%s: truncated record (%d bytes, %d present)"
                                    % (where, n, max(len(body) - 4, 0)))
            payload = body[:n]
            if verify and _masked(crc32c(payload)) != struct.unpack("<I", body[n:])[0]:
                raise LoomDataError("%s: payload CRC mismatch" % where)
            yield payload
            off += n + 16
            k += 1
    finally:
        if f is not path:
            f.close()


def _varint(b, i):
    r = s = 0
    while True:
        if i >= len(b) or s > 63:
            raise ValueError("bad varint")
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return r, i


def _fields(b):
    """(field number, wire type, value) of a protobuf message: value is an
    int for varint / fixed, bytes for length-delimited."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        fn, wt = key >> 3, key & 7
        if fn == 0:
            raise ValueError("field number 0")
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            if i + 8 > len(b):
                raise ValueError("truncated fixed64")
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            if i + 4 > len(b):
                raise ValueError("truncated fixed32")
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield fn, wt, v


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _feature(b):
    """Feature -> ("int64" | "float" | "bytes" | None, list); None for a
    Feature that holds no list at all."""
    kind, vals = None, []
    for fn, wt, v in _fields(b):
        if fn not in (1, 2, 3) or wt != 2:
            raise ValueError("not a Feature")
        kind, vals = ("bytes", "float", "int64")[fn - 1], []
        for gn, gt, g in _fields(v):
            if gn != 1:
                raise ValueError("unknown field %d in a list" % gn)
            if fn == 1 and gt == 2:
                vals.append(bytes(g))
            elif fn == 2 and gt == 5:
                vals.append(struct.unpack("<f", g)[0])
            elif fn == 2 and gt == 2 and len(g) % 4 == 0:
                vals.extend(struct.unpack("<%df" % (len(g) // 4), g))
            elif fn == 3 and gt == 0:
                vals.append(_signed(g))
            elif fn == 3 and gt == 2:
                j = 0
                while j < len(g):
                    x, j = _varint(g, j)
                    vals.append(_signed(x))
            else:
                raise ValueError("bad list value")
    return kind, vals


def parse_example(payload):
    """A serialized tf.train.Example -> {feature name: list of values}
    (ints, floats or bytes).  Raises ValueError on anything else."""
    return {key: vals for key, (_, vals) in _parse_example(payload).items()}


def _parse_example(payload):
    """parse_example, with the kind of each feature: {name: (kind, list)}."""
    out = {}
    for fn, wt, features in _fields(payload):
        if fn != 1 or wt != 2:
            raise ValueError("not an Example")
        for gn, gt, entry in _fields(features):
            if gn != 1 or gt != 2:
                raise ValueError("not a Features map")
            key, value = "", b""
            for hn, ht, v in _fields(entry):
                if hn == 1 and ht == 2:
                    key = bytes(v).decode("utf-8")
                elif hn == 2 and ht == 2:
                    value = v
                else:
                    raise ValueError("bad map entry")
            out[key] = _feature(value)
    return out


_KINDS = {None: "an empty feature", "bytes": "a bytes list", "float": "a float list"}


def read_ids(path, feature="input_ids", verify=True):
    """Yield the int64 list `feature` of each record of a loom shard; a
    record without it, or where it holds floats or bytes, raises
    LoomDataError (as loom-cat --ids refuses it)."""
    off = 0
    for k, payload in enumerate(read_tfrecord(path, verify)):
        where = "%s: record %d at byte %d" % (path, k, off)
        try:
            ex = _parse_example(payload)
        except ValueError as e:
            raise LoomDataError("%s: not a tf.train.Example: %s" % (where, e))
        if feature not in ex:
            raise LoomDataError("%s: no feature '%s'" % (where, feature))
        kind, ids = ex[feature]
        if kind != "int64":
            raise LoomDataError("%s: feature '%s' is %s, not an int64 list"
                                % (where, feature, _KINDS[kind]))
        yield ids
        off += len(payload) + 16


# ---- several workers ---------------------------------------------------------

def worker_share(get_worker_info=None):
    """(k, n): this process is worker k of n of a torch DataLoader, from
    get_worker_info() (torch.utils.data.get_worker_info when torch can be
    imported and none is given); (0, 1) outside a worker or without torch."""
    if get_worker_info is None:
        try:
            from torch.utils.data import get_worker_info
        except ImportError:
            return 0, 1
    info = get_worker_info()
    if info is None:
        return 0, 1
    return info.id, info.num_workers


def split_frames(frames, share=None):
    """Every n-th item of `frames` from the k-th, for share = (k, n)
    (default worker_share()): n workers together yield each item once."""
    k, n = share if share is not None else worker_share()
    if not 0 <= k < n:
        raise ValueError("worker %d of %d" % (k, n))
    for i, fr in enumerate(frames):
        if i % n == k:
            yield fr


def find_feed():
    """The loom-feed to run: the one on PATH, else the one of the loom this
    file belongs to: build/bin/loom-feed of its checkout (share/python/ ->
    ../../build/bin) or bin/loom-feed of its installation
    (share/loom/python/ -> ../../../bin).  LoomDataError when none is."""
    import shutil
    found = shutil.which("loom-feed")
    if found:
        return found
    here = os.path.dirname(os.path.realpath(__file__))
    tried = [os.path.join(here, "..", "..", "build", "bin", "loom-feed"),
             os.path.join(here, "..", "..", "..", "bin", "loom-feed")]
    for p in tried:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.normpath(p)
    raise LoomDataError("loom-feed is not on PATH, nor at %s: build loom (make) or give "
                        "feed=PATH" % " or ".join(os.path.normpath(p) for p in tried))


def feed_frames(feed_args, share=None, feed=None):
    """Run `feed -q *feed_args` (feed: a path or name; default find_feed())
    and yield this worker's share of its frames (split_frames); the process
    is ended when the generator is closed early, and waited for when its
    stream has ended."""
    feed = feed or find_feed()
    ended = False
    with subprocess.Popen([feed, "-q", *feed_args], stdout=subprocess.PIPE) as p:
        try:
            for fr in split_frames(read_frames(p.stdout, feed), share):
                yield fr
            ended = True
        finally:
            if not ended and p.poll() is None:
                p.kill()
    if ended and p.returncode:  # the stream ended cleanly but the feeder failed
        raise LoomDataError("%s exited with status %d" % (feed, p.returncode))


# ---- flat token files (nanoGPT's train.bin) ------------------------------------

def manifest_shards(manifest):
    """The shard paths a loom-shard manifest names, in its order."""
    try:
        with open(manifest, "rb") as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise LoomDataError("%s: %s" % (manifest, e))
    shards = m.get("shards") if isinstance(m, dict) else None
    if not isinstance(shards, list) or not shards:
        raise LoomDataError("%s: no \"shards\" list" % manifest)
    d = os.path.dirname(manifest)
    out = []
    for i, e in enumerate(shards):
        name = e.get("file") if isinstance(e, dict) else e
        if not isinstance(name, str):
            raise LoomDataError("%s: shards[%d]: no file name" % (manifest, i))
        out.append(os.path.join(d, name))
    return out


def write_bin(manifest, out_path, feature="input_ids"):
    """Write the ids of every record of the manifest's shards, in order, to
    out_path as one flat little-endian array (written to a temporary name,
    renamed when complete): uint16 when every id is below 65536, else
    uint32.  Returns the dtype's name ("uint16" or "uint32")."""
    ids = array.array("Q")
    for path in manifest_shards(manifest):
        for rec in read_ids(path, feature):
            ids.extend(rec)
    code, name = ("H", "uint16") if not ids or max(ids) < 65536 else ("I", "uint32")
    if ids and max(ids) >= 1 << 32:
        raise LoomDataError("%s: an id above 2^32" % manifest)
    out = array.array(code, ids)
    if sys.byteorder != "little":
        out.byteswap()
    tmp = "%s.tmp-%d" % (out_path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            out.tofile(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name


def memmap_bin(path, dtype="uint16"):
    """A read-only numpy memmap of a write_bin file (numpy is needed)."""
    import numpy as np
    return np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r")


# ---- command line ------------------------------------------------------------

def _main(argv):
    usage = "usage: loom_data.py frames [FILE] | ids FILE... | json FILE... | bin MANIFEST OUT"
    if len(argv) < 2 or argv[1] not in ("frames", "ids", "json", "bin") or \
            (argv[1] != "frames" and len(argv) < 3) or (argv[1] == "bin" and len(argv) != 4):
        print(usage, file=sys.stderr)
        return 2
    out = sys.stdout
    try:
        if argv[1] == "frames":
            f = _open(argv[2]) if len(argv) > 2 else sys.stdin.buffer
            for fr in read_frames(f, argv[2] if len(argv) > 2 else "stdin"):
                feats = [(n, fr.feature(n)) for n in fr.features or {}]
                for r, row in enumerate(fr.rows()):
                    extra = "".join(" | %s %s" % (n, " ".join(map(str, v[r])) if isinstance(
                        v[r], list) else v[r]) for n, v in feats)
                    out.write("%d %d %d: %s%s\n" % (fr.seq, fr.epoch, r, " ".join(map(str, row)),
                                                    extra))
        elif argv[1] == "bin":
            out.write(write_bin(argv[2], argv[3]) + "\n")
        elif argv[1] == "ids":
            for p in argv[2:]:
                for ids in read_ids(p):
                    out.write(" ".join(map(str, ids)) + "\n")
        else:
            for p in argv[2:]:
                for k, payload in enumerate(read_tfrecord(p)):
                    try:
                        ex = parse_example(payload)
                    except ValueError as e:
                        raise LoomDataError("%s: record %d: not a tf.train.Example: %s"
                                            % (p, k, e))
                    ex = {key: [v.hex() if isinstance(v, bytes) else v for v in vals]
                          for key, vals in ex.items()}
                    out.write(json.dumps(ex, separators=(",", ":")) + "\n")
    except LoomDataError as e:
        print("loom_data.py: %s" % e, file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as e:  # a read error: one line, as loom's tools print
        print("loom_data.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
