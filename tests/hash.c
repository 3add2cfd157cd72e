/* Unit tests for loom_hash against published digest vectors. */
#include <stdio.h>
#include <unistd.h>

#include "loom_file.h"
#include "loom_hash.h"
#include "tap.h"

int main(void)
{
	char hex[LOOM_HASH_HEX_MAX];
	struct loom_err err;

	ok(loom_hex_is("0aF9", 4) && !loom_hex_is("0aF9", 3) && !loom_hex_is("0aF", 4) &&
	   !loom_hex_is("0aG9", 4) && loom_hex_is("", 0), "loom_hex_is: n digits, either case");
	is_int(loom_hash_buf_hex("sha256", "abc", 3, hex, &err), 0, "sha256 abc");
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "sha256 vector");
	loom_hash_buf_hex("sha1", "abc", 3, hex, &err);
	is_str(hex, "a9993e364706816aba3e25717850c26c9cd0d89d", "sha1 vector");
	loom_hash_buf_hex("md5", "", 0, hex, &err);
	is_str(hex, "d41d8cd98f00b204e9800998ecf8427e", "md5 of empty");
	is_int(loom_hash_buf_hex("crc7", "a", 1, hex, &err), LOOM_EINVAL, "unknown algo");

	struct loom_hash *h = loom_hash_new("sha256");
	loom_hash_update(h, "a", 1);
	loom_hash_update(h, "bc", 2);
	loom_hash_final_hex(h, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "streaming equals one-shot");
	loom_hash_update(h, "abc", 3);
	loom_hash_final_hex(h, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "object restarts after final");
	loom_hash_free(h);
	loom_hash_free(NULL);

	char path[] = "/tmp/loom-hash-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	loom_write_file_atomic(path, "abc", 3, &err);
	is_int(loom_hash_file_hex("sha1", path, hex, &err), 0, "hash a file");
	is_str(hex, "a9993e364706816aba3e25717850c26c9cd0d89d", "file sha1");
	unlink(path);
	is_int(loom_hash_file_hex("sha1", path, hex, &err), LOOM_EIO, "missing file");
	ok(strstr(err.msg, path) != NULL, "message names the file");
	return done_testing();
}
