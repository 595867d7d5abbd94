/* Method and path rules of --net allow= (docs/network.md, "Rules by method
 * and path"): "GET,HEAD:api.github.com/repos/acme/...". Pure code on one
 * rule: the pattern's parts before and after its host, a request path's
 * normal form, and whether a method and path are the rule's; netpolicy.c
 * checks a request against the policy's rules with these. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/netpolicy.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

static int method_bit(const char *m, size_t n)
{
	for (size_t i = 0; i < N_METHODS; i++)
		if (strlen(methods[i]) == n && memcmp(methods[i], m, n) == 0)
			return (int)i;
	return -1;
}

bool netrule_is_method(const char *s, size_t n)
{
	if (n > 5 && memcmp(s + n - 5, "+body", 5) == 0)
		n -= 5;
	return method_bit(s, n) >= 0;
}

/* "GET,POST" or "GET+body,HEAD": a method list before a host */
static bool upper_list(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+' && n - i >= 5 && memcmp(s + i, "+body", 5) == 0)
			i += 4;
		else if (!(s[i] >= 'A' && s[i] <= 'Z') && s[i] != ',')
			return false;
	}
	return true;
}

static bool all_digits_or_star(const char *s)
{
	if (strcmp(s, "*") == 0)
		return true;
	if (!isdigit((unsigned char)*s))
		return false;
	for (; *s && *s != '/'; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static const char *parse_methods(const char *s, size_t n, struct net_rule *r)
{
	for (size_t i = 0; i < n;) {
		size_t l = strcspn(s + i, ",");
		if (l > n - i)
			l = n - i;
		bool body = l > 5 && memcmp(s + i + l - 5, "+body", 5) == 0;
		int b = method_bit(s + i, body ? l - 5 : l);
		if (b < 0)
			return "unknown method (one of GET, HEAD, POST, PUT, PATCH, DELETE, "
			       "OPTIONS)";
		r->methods |= 1u << b;
		if (body)
			r->body_methods |= 1u << b;
		i += l + 1;
		if (i == n)
			return "empty method";
	}
	return NULL;
}

static const char *check_path(const char *p)
{
	if (!*p)
		return "empty path";
	if (p[0] != '/')
		return "the path must start with '/'";
	if (strlen(p) > NET_PATH_MAX)
		return "the path is too long";
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '?' || *c == '#' || *c == '%' ||
		    *c == '\\')
			return "the path may not hold spaces, control characters, '?', '#', '%' "
			       "or '\\' (write it decoded, without a query)";
	for (const char *seg = p; seg; seg = strchr(seg + 1, '/')) {
		size_t l = strcspn(seg + 1, "/");
		if ((l == 1 && seg[1] == '.') || (l == 2 && seg[1] == '.' && seg[2] == '.'))
			return "the path may not hold '.' or '..' segments";
		if (l == 0 && seg[1] == '/')
			return "the path may not hold '//'";
	}
	return NULL;
}

/* "8", "8:443", "8:*": a CIDR's prefix length, and its port */
static bool cidr_bits(const char *s)
{
	size_t d = strspn(s, "0123456789");
	if (!d)
		return false;
	if (!s[d])
		return true;
	return s[d] == ':' && (strcmp(s + d + 1, "*") == 0 ||
			       (s[d + 1] && strspn(s + d + 1, "0123456789") == strlen(s + d + 1)));
}

const char *netrule_split(char *pat, bool host_only, struct net_rule *r)
{
	if (strstr(pat, "://"))
		return "a URL: give a host (registry.npmjs.org, api.example.com:443), with an "
		       "optional path after it, and no scheme";
	char *colon = strchr(pat, ':'), *rest = pat;
	if (colon && upper_list(pat, (size_t)(colon - pat)) && !all_digits_or_star(colon + 1)) {
		const char *why = parse_methods(pat, (size_t)(colon - pat), r);
		if (why)
			return why;
		rest = colon + 1;
	}
	memmove(pat, rest, strlen(rest) + 1);
	char *close = pat[0] == '[' ? strchr(pat, ']') : NULL;
	char *slash = strchr(close ? close : pat, '/');
	if (slash && !close && cidr_bits(slash + 1)) {
		/* a CIDR's prefix ("10.0.0.0/8", "fd00::/8"): an address before */
		bool addr = slash[1] != '\0';
		for (char *c = pat; c < slash; c++)
			addr &= isxdigit((unsigned char)*c) || *c == '.' || *c == ':';
		if (addr)
			slash = NULL;
	}
	if (slash) {
		const char *why = check_path(slash);
		if (why)
			return why;
		snprintf(r->path, sizeof(r->path), "%s", slash);
		*slash = '\0';
	}
	if (host_only && (r->methods || r->path[0]))
		return "methods and paths are for allow= only";
	if (!*pat)
		return "no host";
	return NULL;
}

bool netrule_restricted(const struct net_rule *r)
{
	return r->methods || r->path[0];
}

/* '*' matches any characters, '/' included; without one the path is a
 * prefix ending at a segment's end. */
static bool glob(const char *g, const char *s)
{
	if (!strchr(g, '*')) {
		size_t l = strlen(g);
		return strncmp(g, s, l) == 0 && (g[l - 1] == '/' || s[l] == '\0' || s[l] == '/');
	}
	const char *star = NULL, *back = NULL;
	while (*s) {
		if (*g == '*') {
			star = ++g;
			back = s;
		} else if (*g == *s) {
			g++;
			s++;
		} else if (star) {
			g = star;
			s = ++back;
		} else {
			return false;
		}
	}
	while (*g == '*')
		g++;
	return !*g;
}

static int hexval(char c)
{
	return isdigit((unsigned char)c)    ? c - '0'
	       : isxdigit((unsigned char)c) ? (tolower((unsigned char)c) - 'a' + 10)
					    : -1;
}

const char *netrule_path(const char *target, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	if (!n || target[0] != '/')
		return "the request's target is not a path";
	for (size_t i = 0; i < n && target[i] != '?' && target[i] != '#'; i++) {
		char c = target[i];
		if (c == '%') {
			int hi = i + 2 < n ? hexval(target[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(target[i + 2]) : -1;
			if (lo < 0)
				return "the path has a bad percent-escape";
			c = (char)(hi * 16 + lo);
			i += 2;
			if (c == '/' || c == '\\' || c == '\0' || c == '%' || c == '?' || c == '#')
				return "the path has an encoded '/', '\\', '%', '?', '#' or NUL";
		} else if (c == '\\') {
			return "the path has a '\\'";
		}
		if ((unsigned char)c < 0x20 || c == 0x7f) /* raw or decoded */
			return "the path has a control character";
		if (o + 2 >= cap)
			return "the path is too long";
		out[o++] = c;
		out[o] = '\0';
		/* at a segment's end: drop "//", "/./", resolve "/../" */
		bool end = i + 1 >= n || target[i + 1] == '/' || target[i + 1] == '?' ||
			   target[i + 1] == '#';
		if (c == '/' && o >= 2 && out[o - 2] == '/')
			o--;
		else if (end && o >= 2 && strcmp(out + o - 2, "/.") == 0)
			o -= 1;
		else if (end && o >= 3 && strcmp(out + o - 3, "/..") == 0) {
			if (o == 3)
				return "the path goes above '/'";
			o -= 3;
			while (o > 0 && out[o - 1] != '/')
				o--;
		}
		out[o] = '\0';
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return NULL;
}

bool netrule_matches(const struct net_rule *r, const char *method, size_t mlen, const char *path)
{
	int b = method_bit(method, mlen);
	if (r->methods && (b < 0 || !(r->methods & (1u << b))))
		return false;
	return !r->path[0] || glob(r->path, path);
}

bool netrule_allows_body(const struct net_rule *r, const char *method, size_t mlen,
			 const char *path)
{
	int b = method_bit(method, mlen);
	return b >= 0 && (r->body_methods & (1u << b)) && netrule_matches(r, method, mlen, path);
}
