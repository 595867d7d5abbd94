/* OpenSSL (libcrypto, libssl), loaded with dlopen when a feature needs it:
 * --net secret= and TLS rules terminate TLS (net/nettls.c, net/netterm.c),
 * --image checks its blobs' SHA-256 (image/sha256.c), agentbox runtime
 * keeps its token's digest (runtime/rt_auth.c). So `agentbox run` without
 * them maps no OpenSSL at all, and pays nothing for it at start.
 *
 * A file that includes this header calls OpenSSL's functions by their own
 * names (the declarations of <openssl/...> give their types); each name is
 * a macro for the pointer in the table, filled by ab_crypto_load() or
 * ab_ssl_load(), one of which the feature calls before anything else. */
#ifndef AB_CRYPTO_OSSL_H
#define AB_CRYPTO_OSSL_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <string.h>

#include "util/error.h"

#define AB_OSSL_STR_(v) #v
#define AB_OSSL_STR(v)	AB_OSSL_STR_(v)
/* the libraries of the OpenSSL the build's headers are of (3: Debian's
 * libssl3 ships both) */
#define AB_CRYPTO_SONAME "libcrypto.so." AB_OSSL_STR(OPENSSL_VERSION_MAJOR)
#define AB_SSL_SONAME	 "libssl.so." AB_OSSL_STR(OPENSSL_VERSION_MAJOR)

/* libcrypto's functions agentbox calls */
#define AB_CRYPTO_FUNCS(X)                                                                         \
	X(BIO_ctrl)                                                                                \
	X(BIO_free)                                                                                \
	X(BIO_new)                                                                                 \
	X(BIO_s_mem)                                                                               \
	X(BN_bin2bn)                                                                               \
	X(BN_free)                                                                                 \
	X(BN_to_ASN1_INTEGER)                                                                      \
	X(CRYPTO_memcmp)                                                                           \
	X(ERR_clear_error)                                                                         \
	X(ERR_get_error)                                                                           \
	X(ERR_peek_last_error)                                                                     \
	X(ERR_reason_error_string)                                                                 \
	X(EVP_Digest)                                                                              \
	X(EVP_DigestFinal_ex)                                                                      \
	X(EVP_DigestInit_ex)                                                                       \
	X(EVP_DigestUpdate)                                                                        \
	X(EVP_MD_CTX_free)                                                                         \
	X(EVP_MD_CTX_new)                                                                          \
	X(EVP_PKEY_Q_keygen)                                                                       \
	X(EVP_PKEY_free)                                                                           \
	X(EVP_sha256)                                                                              \
	X(OPENSSL_thread_stop)                                                                     \
	X(PEM_write_bio_X509)                                                                      \
	X(RAND_bytes)                                                                              \
	X(X509V3_EXT_conf_nid)                                                                     \
	X(X509V3_set_ctx)                                                                          \
	X(X509_EXTENSION_free)                                                                     \
	X(X509_NAME_add_entry_by_txt)                                                              \
	X(X509_VERIFY_PARAM_set1_ip_asc)                                                           \
	X(X509_VERIFY_PARAM_set_hostflags)                                                         \
	X(X509_add_ext)                                                                            \
	X(X509_free)                                                                               \
	X(X509_get_default_cert_file)                                                              \
	X(X509_get_serialNumber)                                                                   \
	X(X509_get_subject_name)                                                                   \
	X(X509_getm_notAfter)                                                                      \
	X(X509_getm_notBefore)                                                                     \
	X(X509_gmtime_adj)                                                                         \
	X(X509_new)                                                                                \
	X(X509_set_issuer_name)                                                                    \
	X(X509_set_pubkey)                                                                         \
	X(X509_set_version)                                                                        \
	X(X509_sign)                                                                               \
	X(X509_verify_cert_error_string)

/* libssl's */
#define AB_SSL_FUNCS(X)                                                                            \
	X(SSL_CTX_ctrl)                                                                            \
	X(SSL_CTX_free)                                                                            \
	X(SSL_CTX_load_verify_locations)                                                           \
	X(SSL_CTX_new)                                                                             \
	X(SSL_CTX_set_alpn_protos)                                                                 \
	X(SSL_CTX_set_alpn_select_cb)                                                              \
	X(SSL_CTX_set_default_verify_paths)                                                        \
	X(SSL_CTX_set_verify)                                                                      \
	X(SSL_ctrl)                                                                                \
	X(SSL_do_handshake)                                                                        \
	X(SSL_free)                                                                                \
	X(SSL_get0_param)                                                                          \
	X(SSL_get_error)                                                                           \
	X(SSL_get_verify_result)                                                                   \
	X(SSL_new)                                                                                 \
	X(SSL_pending)                                                                             \
	X(SSL_read)                                                                                \
	X(SSL_set1_host)                                                                           \
	X(SSL_set_accept_state)                                                                    \
	X(SSL_set_connect_state)                                                                   \
	X(SSL_set_fd)                                                                              \
	X(SSL_shutdown)                                                                            \
	X(SSL_use_PrivateKey)                                                                      \
	X(SSL_use_certificate)                                                                     \
	X(SSL_write)                                                                               \
	X(TLS_client_method)                                                                       \
	X(TLS_server_method)

struct ab_ossl {
#define AB_OSSL_PTR(f) __typeof__(f) *f;
	AB_CRYPTO_FUNCS(AB_OSSL_PTR) AB_SSL_FUNCS(AB_OSSL_PTR)
#undef AB_OSSL_PTR
};
extern struct ab_ossl ab_ossl;

/* Load libcrypto (ab_ssl_load: libssl too) once in the process; later calls
 * answer at once. 0, or -ELIBACC with a message naming what needs it
 * (what, e.g. "--image"), the library and the package to install. Safe
 * from several threads. */
int ab_crypto_load(const char *what, struct ab_error *err);
int ab_ssl_load(const char *what, struct ab_error *err);

#ifndef AB_OSSL_LOADER
/* wiping a secret needs no library */
#undef OPENSSL_cleanse
#define OPENSSL_cleanse(p, n)		 explicit_bzero((p), (n))
#define BIO_ctrl			 (ab_ossl.BIO_ctrl)
#define BIO_free			 (ab_ossl.BIO_free)
#define BIO_new				 (ab_ossl.BIO_new)
#define BIO_s_mem			 (ab_ossl.BIO_s_mem)
#define BN_bin2bn			 (ab_ossl.BN_bin2bn)
#define BN_free				 (ab_ossl.BN_free)
#define BN_to_ASN1_INTEGER		 (ab_ossl.BN_to_ASN1_INTEGER)
#define CRYPTO_memcmp			 (ab_ossl.CRYPTO_memcmp)
#define ERR_clear_error			 (ab_ossl.ERR_clear_error)
#define ERR_get_error			 (ab_ossl.ERR_get_error)
#define ERR_peek_last_error		 (ab_ossl.ERR_peek_last_error)
#define ERR_reason_error_string		 (ab_ossl.ERR_reason_error_string)
#define EVP_Digest			 (ab_ossl.EVP_Digest)
#define EVP_DigestFinal_ex		 (ab_ossl.EVP_DigestFinal_ex)
#define EVP_DigestInit_ex		 (ab_ossl.EVP_DigestInit_ex)
#define EVP_DigestUpdate		 (ab_ossl.EVP_DigestUpdate)
#define EVP_MD_CTX_free			 (ab_ossl.EVP_MD_CTX_free)
#define EVP_MD_CTX_new			 (ab_ossl.EVP_MD_CTX_new)
#define EVP_PKEY_Q_keygen		 (ab_ossl.EVP_PKEY_Q_keygen)
#define EVP_PKEY_free			 (ab_ossl.EVP_PKEY_free)
#define EVP_sha256			 (ab_ossl.EVP_sha256)
#define OPENSSL_thread_stop		 (ab_ossl.OPENSSL_thread_stop)
#define PEM_write_bio_X509		 (ab_ossl.PEM_write_bio_X509)
#define RAND_bytes			 (ab_ossl.RAND_bytes)
#define X509V3_EXT_conf_nid		 (ab_ossl.X509V3_EXT_conf_nid)
#define X509V3_set_ctx			 (ab_ossl.X509V3_set_ctx)
#define X509_EXTENSION_free		 (ab_ossl.X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt	 (ab_ossl.X509_NAME_add_entry_by_txt)
#define X509_VERIFY_PARAM_set1_ip_asc	 (ab_ossl.X509_VERIFY_PARAM_set1_ip_asc)
#define X509_VERIFY_PARAM_set_hostflags	 (ab_ossl.X509_VERIFY_PARAM_set_hostflags)
#define X509_add_ext			 (ab_ossl.X509_add_ext)
#define X509_free			 (ab_ossl.X509_free)
#define X509_get_default_cert_file	 (ab_ossl.X509_get_default_cert_file)
#define X509_get_serialNumber		 (ab_ossl.X509_get_serialNumber)
#define X509_get_subject_name		 (ab_ossl.X509_get_subject_name)
#define X509_getm_notAfter		 (ab_ossl.X509_getm_notAfter)
#define X509_getm_notBefore		 (ab_ossl.X509_getm_notBefore)
#define X509_gmtime_adj			 (ab_ossl.X509_gmtime_adj)
#define X509_new			 (ab_ossl.X509_new)
#define X509_set_issuer_name		 (ab_ossl.X509_set_issuer_name)
#define X509_set_pubkey			 (ab_ossl.X509_set_pubkey)
#define X509_set_version		 (ab_ossl.X509_set_version)
#define X509_sign			 (ab_ossl.X509_sign)
#define X509_verify_cert_error_string	 (ab_ossl.X509_verify_cert_error_string)
#define SSL_CTX_ctrl			 (ab_ossl.SSL_CTX_ctrl)
#define SSL_CTX_free			 (ab_ossl.SSL_CTX_free)
#define SSL_CTX_load_verify_locations	 (ab_ossl.SSL_CTX_load_verify_locations)
#define SSL_CTX_new			 (ab_ossl.SSL_CTX_new)
#define SSL_CTX_set_alpn_protos		 (ab_ossl.SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_alpn_select_cb	 (ab_ossl.SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_default_verify_paths (ab_ossl.SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_verify		 (ab_ossl.SSL_CTX_set_verify)
#define SSL_ctrl			 (ab_ossl.SSL_ctrl)
#define SSL_do_handshake		 (ab_ossl.SSL_do_handshake)
#define SSL_free			 (ab_ossl.SSL_free)
#define SSL_get0_param			 (ab_ossl.SSL_get0_param)
#define SSL_get_error			 (ab_ossl.SSL_get_error)
#define SSL_get_verify_result		 (ab_ossl.SSL_get_verify_result)
#define SSL_new				 (ab_ossl.SSL_new)
#define SSL_pending			 (ab_ossl.SSL_pending)
#define SSL_read			 (ab_ossl.SSL_read)
#define SSL_set1_host			 (ab_ossl.SSL_set1_host)
#define SSL_set_accept_state		 (ab_ossl.SSL_set_accept_state)
#define SSL_set_connect_state		 (ab_ossl.SSL_set_connect_state)
#define SSL_set_fd			 (ab_ossl.SSL_set_fd)
#define SSL_shutdown			 (ab_ossl.SSL_shutdown)
#define SSL_use_PrivateKey		 (ab_ossl.SSL_use_PrivateKey)
#define SSL_use_certificate		 (ab_ossl.SSL_use_certificate)
#define SSL_write			 (ab_ossl.SSL_write)
#define TLS_client_method		 (ab_ossl.TLS_client_method)
#define TLS_server_method		 (ab_ossl.TLS_server_method)
#endif

#endif
