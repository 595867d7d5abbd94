/* The proxy's TLS (netsecret.h): a CA made per sandbox at start (an EC
 * P-256 key that lives only in the launcher's memory), a leaf certificate
 * it signs for each terminated host, the server context the sandbox's
 * clients talk to (ALPN: http/1.1 only, so HTTP/2 clients fall back) and
 * the client context for the upstream (the host's CA store plus --net
 * ca=FILE, the peer verified, its name checked). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/ossl.h"
#include "net/netsecret.h"
#include "util/error.h"
#include "util/util.h"

struct net_tls {
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca;
	SSL_CTX *server, *upstream;
};

static int add_ext(X509 *issuer, X509 *cert, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return -1;
	int ok = X509_add_ext(cert, e, -1);
	X509_EXTENSION_free(e);
	return ok ? 0 : -1;
}

/* A certificate for key, signed by issuer_key (issuer NULL: itself). */
static X509 *make_cert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, const char *cn, long days)
{
	X509 *c = X509_new();
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	if (!c || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) || !X509_set_version(c, 2) ||
	    !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(c), days * 86400) || !X509_set_pubkey(c, key))
		goto fail;
	X509_NAME *name = X509_get_subject_name(c);
	if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"agentbox",
					-1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0) ||
	    !X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name))
		goto fail;
	BN_free(bn);
	return c;
fail:
	BN_free(bn);
	X509_free(c);
	return NULL;
}

static int alpn_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *arg)
{
	for (unsigned i = 0; i < inlen; i += 1u + in[i])
		if (in[i] == 8 && i + 9 <= inlen && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	return SSL_TLSEXT_ERR_NOACK; /* no ALPN: HTTP/1.1 */
}

static int make_ca(struct net_tls *t, char **ca_pem)
{
	unsigned char id[4];
	char cn[64];
	if (RAND_bytes(id, sizeof(id)) != 1)
		return -1;
	snprintf(cn, sizeof(cn), "agentbox sandbox CA %02x%02x%02x%02x", id[0], id[1], id[2],
		 id[3]);
	if (!(t->ca_key = EVP_EC_gen("P-256")) || !(t->leaf_key = EVP_EC_gen("P-256")) ||
	    !(t->ca = make_cert(t->ca_key, NULL, NULL, cn, 30)) ||
	    add_ext(t->ca, t->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(t->ca, t->ca, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(t->ca, t->ca, NID_subject_key_identifier, "hash") < 0 ||
	    !X509_sign(t->ca, t->ca_key, EVP_sha256()))
		return -1;
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;
	/* the PEM is not NUL-terminated */
	if (!b || !PEM_write_bio_X509(b, t->ca) || (n = BIO_get_mem_data(b, &data)) <= 0 ||
	    !(*ca_pem = ab_memdup_str(data, (size_t)n))) {
		BIO_free(b);
		return -1;
	}
	BIO_free(b);
	return 0;
}

int net_tls_new(const char *extra_ca, struct net_tls **out, char **ca_pem, struct ab_error *err)
{
	*out = NULL;
	*ca_pem = NULL;
	int rc = ab_ssl_load("--net secret= (TLS termination)", err);
	if (rc < 0)
		return rc;
	struct net_tls *t = calloc(1, sizeof(*t));
	if (!t)
		return ab_error_set(err, ENOMEM, "--net secret=");
	if (make_ca(t, ca_pem) < 0 || !(t->server = SSL_CTX_new(TLS_server_method())) ||
	    !(t->upstream = SSL_CTX_new(TLS_client_method())) ||
	    !SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) ||
	    !SSL_CTX_set_min_proto_version(t->upstream, TLS1_2_VERSION) ||
	    SSL_CTX_set_default_verify_paths(t->upstream) != 1 ||
	    SSL_CTX_set_alpn_protos(t->upstream, (const unsigned char *)"\x08http/1.1", 9) != 0) {
		net_tls_free(t);
		free(*ca_pem);
		*ca_pem = NULL;
		return ab_error_plain(err, EIO, "--net secret=: cannot make the sandbox's CA: %s",
				      ERR_reason_error_string(ERR_get_error()));
	}
	SSL_CTX_set_alpn_select_cb(t->server, alpn_http11, NULL);
	SSL_CTX_set_verify(t->upstream, SSL_VERIFY_PEER, NULL);
	if (extra_ca && SSL_CTX_load_verify_locations(t->upstream, extra_ca, NULL) != 1) {
		unsigned long e = ERR_get_error();
		net_tls_free(t);
		free(*ca_pem);
		*ca_pem = NULL;
		return ab_error_plain(err, EINVAL,
				      "--net ca=%s: cannot load certificates from it (%s): give a "
				      "PEM file of CA certificates",
				      extra_ca, e ? ERR_reason_error_string(e) : "no certificate");
	}
	ERR_clear_error();
	*out = t;
	return 0;
}

void net_tls_forget_key(struct net_tls *t)
{
	if (!t)
		return;
	EVP_PKEY_free(t->ca_key); /* clears the key's numbers */
	EVP_PKEY_free(t->leaf_key);
	t->ca_key = t->leaf_key = NULL;
	SSL_CTX_free(t->server);
	t->server = NULL;
}

void net_tls_free(struct net_tls *t)
{
	if (!t)
		return;
	net_tls_forget_key(t);
	X509_free(t->ca);
	SSL_CTX_free(t->upstream);
	free(t);
}

SSL *net_tls_serve(struct net_tls *t, const struct net_target *target)
{
	char san[NET_HOST_MAX + 8];
	if (target->is_addr) {
		char a[64];
		net_addr_format(target->addr, a, sizeof(a));
		snprintf(san, sizeof(san), "IP:%s", a);
	} else {
		snprintf(san, sizeof(san), "DNS:%s", target->host);
	}
	X509 *leaf = make_cert(t->leaf_key, t->ca, t->ca_key, target->host, 7);
	SSL *ssl = NULL;
	if (leaf && add_ext(t->ca, leaf, NID_subject_alt_name, san) == 0 &&
	    add_ext(t->ca, leaf, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
	    add_ext(t->ca, leaf, NID_ext_key_usage, "serverAuth") == 0 &&
	    add_ext(t->ca, leaf, NID_authority_key_identifier, "keyid:always") == 0 &&
	    X509_sign(leaf, t->ca_key, EVP_sha256()) && (ssl = SSL_new(t->server)) &&
	    (SSL_use_certificate(ssl, leaf) != 1 || SSL_use_PrivateKey(ssl, t->leaf_key) != 1)) {
		SSL_free(ssl);
		ssl = NULL;
	}
	X509_free(leaf);
	return ssl;
}

SSL *net_tls_connect(struct net_tls *t, const struct net_target *target)
{
	SSL *ssl = SSL_new(t->upstream);
	if (!ssl)
		return NULL;
	X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	int ok;
	if (target->is_addr) {
		char a[64];
		net_addr_format(target->addr, a, sizeof(a));
		ok = X509_VERIFY_PARAM_set1_ip_asc(vp, a);
	} else {
		ok = SSL_set_tlsext_host_name(ssl, target->host) &&
		     SSL_set1_host(ssl, target->host);
	}
	if (!ok) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}
