/* loom_hash.c - see loom_hash.h */
#include "loom_hash.h"
#include "loom_file.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct loom_hash {
	EVP_MD_CTX *ctx;
	const EVP_MD *md;
	struct loom_err err;
};

struct loom_hash *loom_hash_new(const char *algo)
{
	const EVP_MD *md = strcmp(algo, "sha256") == 0 ? EVP_sha256()
			 : strcmp(algo, "sha1") == 0   ? EVP_sha1()
			 : strcmp(algo, "md5") == 0    ? EVP_md5()
						       : NULL;
	struct loom_hash *h;
	if (!md || !(h = calloc(1, sizeof *h)))
		return NULL;
	h->md = md;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, md, NULL) != 1) {
		loom_hash_free(h);
		return NULL;
	}
	return h;
}

void loom_hash_free(struct loom_hash *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int loom_hash_update(struct loom_hash *h, const void *data, size_t n)
{
	if (EVP_DigestUpdate(h->ctx, data, n) != 1)
		return loom_err_set(&h->err, LOOM_EIO, "digest update failed");
	return 0;
}

int loom_hash_final_hex(struct loom_hash *h, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(h->ctx, md, &n) != 1 ||
	    EVP_DigestInit_ex(h->ctx, h->md, NULL) != 1)
		return loom_err_set(&h->err, LOOM_EIO, "digest final failed");
	for (unsigned int i = 0; i < n; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[2 * n] = '\0';
	return 0;
}

const char *loom_hash_error(const struct loom_hash *h)
{
	return h->err.msg;
}

int loom_hash_buf_hex(const char *algo, const void *data, size_t n, char *hex,
		      struct loom_err *err)
{
	struct loom_hash *h = loom_hash_new(algo);
	int rc;
	if (!h)
		return loom_err_set(err, LOOM_EINVAL, "unknown digest '%s'", algo);
	rc = loom_hash_update(h, data, n);
	if (rc == 0)
		rc = loom_hash_final_hex(h, hex);
	if (rc < 0)
		*err = h->err;
	loom_hash_free(h);
	return rc;
}

static void hash_block(void *h, const void *block, size_t n)
{
	loom_hash_update(h, block, n);
}

int loom_hash_file_hex(const char *algo, const char *path, char *hex,
		       struct loom_err *err)
{
	struct loom_hash *h = loom_hash_new(algo);
	if (!h)
		return loom_err_set(err, LOOM_EINVAL, "unknown digest '%s'", algo);
	uint64_t size, bytes;
	int fd = loom_file_open_regular(path, UINT64_MAX, &size, err), rc = fd;
	if (fd >= 0) {
		rc = loom_fd_blocks(fd, path, UINT64_MAX, hash_block, h, &bytes, err);
		close(fd);
	}
	if (rc >= 0)
		rc = loom_hash_final_hex(h, hex);
	loom_hash_free(h);
	return rc;
}

int loom_hex_is(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdefABCDEF") == n;
}
