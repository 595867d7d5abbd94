/* The tools of agentbox mcp (mcp_tools.h): one table says each tool's
 * name, description, JSON Schema and protocol op; a call's arguments are
 * checked against that schema (names, types, required), renamed to the
 * protocol's fields and handed to request.c, which checks values as for
 * any request. Descriptions and result texts follow deepagents'
 * filesystem middleware, so agents trained on it find what they know. */
#include "mcp/mcp_tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/output.h"

struct mcp_tool {
	const char *name;
	const char *title;
	enum mcp_tool_kind kind;
	const char *op;	    /* the protocol op */
	unsigned needs;	    /* MCP_OFFER_*: offered only where all of them hold */
	bool read_only;	    /* annotations: readOnlyHint */
	bool destructive;   /* annotations: destructiveHint */
	const char *fixed;  /* fields every request of the tool has, JSON */
	const char *rename; /* "arg=field,..." */
	const char *local;  /* arguments the result's text uses, not sent */
	const char *description;
	const char *schema;
};

/* The schemas: JSON Schema objects (draft 2020-12, as MCP says). */
static const char schema_execute[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"command\":{\"type\":\"string\",\"description\":\"The shell command to execute\"},"
	"\"timeout\":{\"type\":\"number\",\"minimum\":0,\"description\":\"Seconds the command "
	"may run before it is killed (default: the sandbox's; 0 means the default)\"}},"
	"\"required\":[\"command\"],\"additionalProperties\":false}";
static const char schema_read_file[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"file_path\":{\"type\":\"string\",\"description\":\"Absolute path to the file to "
	"read\"},"
	"\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Line offset to start "
	"reading from (0-indexed)\"},"
	"\"limit\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Maximum number of lines "
	"to read\"}},"
	"\"required\":[\"file_path\"],\"additionalProperties\":false}";
static const char schema_write_file[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"file_path\":{\"type\":\"string\",\"description\":\"Absolute path where the file "
	"should be written. Must be absolute, not relative.\"},"
	"\"content\":{\"type\":\"string\",\"description\":\"The text content to write to the "
	"file. This parameter is required.\"}},"
	"\"required\":[\"file_path\",\"content\"],\"additionalProperties\":false}";
static const char schema_edit_file[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"file_path\":{\"type\":\"string\",\"description\":\"Absolute path to the file to "
	"edit\"},"
	"\"old_string\":{\"type\":\"string\",\"description\":\"String to be replaced (must "
	"match exactly)\"},"
	"\"new_string\":{\"type\":\"string\",\"description\":\"String to replace with\"},"
	"\"replace_all\":{\"type\":\"boolean\",\"description\":\"Whether to replace all "
	"occurrences\"}},"
	"\"required\":[\"file_path\",\"old_string\",\"new_string\"],"
	"\"additionalProperties\":false}";
static const char schema_ls[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"Directory path to list (default: "
	"/workspace)\"}},"
	"\"additionalProperties\":false}";
static const char schema_glob[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"pattern\":{\"type\":\"string\",\"description\":\"Glob pattern to match files (e.g., "
	"'**/*.py', '*.txt', '/workspace/subdir/**/*.md')\"},"
	"\"path\":{\"type\":\"string\",\"description\":\"Base directory to search from "
	"(default: /workspace)\"}},"
	"\"required\":[\"pattern\"],\"additionalProperties\":false}";
static const char schema_grep[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"pattern\":{\"type\":\"string\",\"description\":\"Literal text pattern to search for "
	"(not regex)\"},"
	"\"path\":{\"type\":\"string\",\"description\":\"Base path to search from (default: "
	"/workspace)\"},"
	"\"glob\":{\"type\":\"string\",\"description\":\"Optional glob pattern to filter files "
	"(e.g., '*.py')\"},"
	"\"max_count\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Optional cap on "
	"the total number of matches returned across all files (default 1000). When the cap is "
	"hit, results are truncated and a note says so\"},"
	"\"output_mode\":{\"type\":\"string\",\"enum\":[\"files_with_matches\",\"content\","
	"\"count\"],\"description\":\"Output format: 'files_with_matches' lists matching file "
	"paths, 'content' shows matching lines (default), 'count' shows match counts per "
	"file\"}},"
	"\"required\":[\"pattern\"],\"additionalProperties\":false}";
static const char schema_changes[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"diff\":{\"type\":\"boolean\",\"description\":\"Include a unified diff of each "
	"changed text file\"},"
	"\"max_diff_bytes\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"At most this "
	"many bytes of each diff (default 65536)\"}},"
	"\"additionalProperties\":false}";
static const char schema_commit[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"paths\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"Paths "
	"relative to the workspace or beneath /workspace (default: every change)\"},"
	"\"force\":{\"type\":\"boolean\",\"description\":\"Overwrite host files that changed "
	"since the session started\"}},"
	"\"additionalProperties\":false}";
static const char schema_checkpoint[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"name\":{\"type\":\"string\",\"description\":\"A name for it: letters, digits, "
	"'.', '_', '-' (default c1, c2...)\"}},"
	"\"additionalProperties\":false}";
static const char schema_restore[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"checkpoint\":{\"type\":\"string\",\"description\":\"The checkpoint's name\"}},"
	"\"required\":[\"checkpoint\"],\"additionalProperties\":false}";
static const char schema_discard[] =
	"{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

static const struct mcp_tool tools[] = {
	{"execute", "Run a shell command in the sandbox", MCP_TOOL_EXEC, "exec", 0, false, false,
	 "{\"merge_output\":true}", NULL, NULL,
	 "Executes a shell command in an isolated sandbox and returns combined stdout/stderr with "
	 "the exit code (truncated if very large).\n\n"
	 "The sandbox is agentbox: the command runs by /bin/sh -c in /workspace (the project), "
	 "with no access to the rest of the host, no capabilities and the network as configured. "
	 "Files a command writes are there for the next command and for the file tools.\n\n"
	 "Usage:\n"
	 "- Quote paths containing spaces (e.g. cd \"/path/with spaces\").\n"
	 "- Chain commands with ';' or '&&' (use '&&' when a command depends on the previous); "
	 "do not use newlines except inside quoted strings.\n"
	 "- Use absolute paths and avoid `cd` so the working directory stays stable.\n"
	 "- Stdin is empty: a command that waits for input ends at once.\n"
	 "- A command that runs longer than its timeout is killed (exit code 124) with the "
	 "output it produced until then.\n"
	 "- You MUST avoid using search commands like find and grep. Instead use the grep, glob "
	 "tools to search. Use read_file rather than cat/head/tail.",
	 schema_execute},
	{"read_file", "Read a file", MCP_TOOL_FILE, "read", 0, true, false, NULL, "file_path=path",
	 NULL,
	 "Reads a file from the filesystem. Assume any path the user provides is valid; reading "
	 "a missing file returns an error.\n\n"
	 "Usage:\n"
	 "- By default, it reads up to 100 lines starting from the beginning of the file. Use "
	 "`offset`/`limit` to page through large files instead of reading them whole.\n"
	 "- A status header, `@@ field | field | ... @@`, sits above the file content, and every "
	 "line after it is unmodified file content. Never include the header when editing.\n"
	 "- Speculatively batch multiple `read_file` calls in one response when several files "
	 "may be useful.\n"
	 "- An empty file returns a system-reminder warning in place of contents.\n"
	 "- Images (`.png`, `.jpg`, `.gif`, `.webp`) come back as images, other binary files as "
	 "a resource with their bytes.\n"
	 "- Always read a file before editing it.\n"
	 "- Paths are in the sandbox: relative ones are under /workspace.",
	 schema_read_file},
	{"write_file", "Write a file", MCP_TOOL_FILE, "write", 0, false, false,
	 "{\"overwrite\":true}", "file_path=path", NULL,
	 "Writes content to a file. Creates the file if it does not exist; replaces it entirely "
	 "if it does.\n\n"
	 "Usage:\n"
	 "- Use this tool when you intend to create a new file or replace the whole file. You do "
	 "not need to read the file first.\n"
	 "- Prefer to edit existing files (with the edit_file tool) over creating new ones when "
	 "possible.\n"
	 "- Missing parent directories are created.",
	 schema_write_file},
	{"edit_file", "Edit a file", MCP_TOOL_FILE, "edit", 0, false, false, NULL, "file_path=path",
	 NULL,
	 "Performs exact string replacements in files.\n\n"
	 "Usage:\n"
	 "- You must read the file before editing.\n"
	 "- Preserve the exact source indentation from the read output, and never include the "
	 "read status header in old_string or new_string.\n"
	 "- old_string must occur exactly once unless replace_all is true; give more surrounding "
	 "context to make it unique.\n"
	 "- Prefer editing an existing file over creating a new one.\n"
	 "- Only use emojis if the user explicitly requests it.",
	 schema_edit_file},
	{"ls", "List a directory", MCP_TOOL_FILE, "ls", 0, true, false, NULL, NULL, NULL,
	 "Lists all files in a directory.\n\n"
	 "This is useful for exploring the filesystem and finding the right file to read or "
	 "edit. You should almost ALWAYS use this tool before using the read_file or edit_file "
	 "tools.",
	 schema_ls},
	{"glob", "Find files by pattern", MCP_TOOL_FILE, "glob", 0, true, false, NULL, NULL, NULL,
	 "Find files matching a glob pattern, returning absolute paths.\n\n"
	 "Supports `*` (any characters), `**` (any directories), `?` (single character), e.g. "
	 "`**/*.py`, `*.txt`, `/workspace/subdir/**/*.md`. Newest first.",
	 schema_glob},
	{"grep", "Search file contents", MCP_TOOL_FILE, "grep", 0, true, false, NULL, NULL,
	 "output_mode",
	 "Search for a LITERAL text pattern across files (NOT regex).\n\n"
	 "The pattern is matched verbatim: regex metacharacters are ordinary characters, not "
	 "operators. To match any of several strings, run a separate grep for each; "
	 "`grep(pattern=\"foo|bar\")` searches for the literal text \"foo|bar\", and `.*` or "
	 "`\\.` match those characters literally.\n"
	 "- If you genuinely need regex, use the execute tool with `grep -E '<regex>'` "
	 "instead.\n\n"
	 "Returns matching files or content per `output_mode`.",
	 schema_grep},
	{"changes", "Review the workspace's changes", MCP_TOOL_LAYER, "changes", MCP_OFFER_LAYER,
	 true, false, NULL, NULL, NULL,
	 "Lists what the commands changed in the workspace so far. The workspace is an overlay: "
	 "writes land in a layer and reach the user's files only when committed (by the user, "
	 "unless a commit tool is offered). Each change has "
	 "its path, status (added, modified, deleted, renamed), type and whether it conflicts "
	 "with a change made on the host meanwhile; with diff, a unified diff of text files.",
	 schema_changes},
	{"commit", "Apply changes to the workspace", MCP_TOOL_LAYER, "commit",
	 MCP_OFFER_LAYER | MCP_OFFER_COMMIT, false, true, NULL, NULL, NULL,
	 "Applies the changes (all of them, or those under the given paths) to the user's real "
	 "workspace. When a selected path conflicts (the host's file changed since the session "
	 "started) nothing is written and the conflicts are listed, unless force is true.",
	 schema_commit},
	{"checkpoint", "Checkpoint the workspace", MCP_TOOL_LAYER, "checkpoint", MCP_OFFER_LAYER,
	 false, false, NULL, NULL, NULL,
	 "Saves the workspace's current state as a checkpoint, in milliseconds whatever its "
	 "size, and returns its name; restore brings the workspace back to it (an undo for a "
	 "risky step); /tmp and the home directory are part of it. Fails while a command "
	 "runs. Processes left running in the background are not part of it.",
	 schema_checkpoint},
	{"restore", "Restore the workspace to a checkpoint", MCP_TOOL_LAYER, "restore",
	 MCP_OFFER_LAYER, false, true, NULL, NULL, NULL,
	 "Brings the workspace, /tmp and the home directory back to a checkpoint taken earlier: "
	 "every change made after it is undone (later checkpoints stay and can be restored in "
	 "turn). Fails while a command runs.",
	 schema_restore},
	{"discard", "Drop every change and end the sandbox", MCP_TOOL_LAYER, "discard",
	 MCP_OFFER_LAYER | MCP_OFFER_COMMIT, false, true, NULL, NULL, NULL,
	 "Throws away every change the commands made to the workspace and ends the sandbox: "
	 "after it, no tool works until the MCP server is started again.",
	 schema_discard},
};

#define N_TOOLS (sizeof(tools) / sizeof(tools[0]))

const char *mcp_tool_name(const struct mcp_tool *t)
{
	return t->name;
}

enum mcp_tool_kind mcp_tool_kind(const struct mcp_tool *t)
{
	return t->kind;
}

json_object *mcp_tools_list(unsigned offer)
{
	json_object *list = json_object_new_array();
	for (size_t i = 0; i < N_TOOLS; i++) {
		const struct mcp_tool *t = &tools[i];
		if ((t->needs & offer) != t->needs)
			continue;
		json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(t->name));
		json_object_object_add(o, "title", json_object_new_string(t->title));
		json_object_object_add(o, "description", json_object_new_string(t->description));
		json_object_object_add(o, "inputSchema", json_tokener_parse(t->schema));
		json_object *a = json_object_new_object();
		json_object_object_add(a, "title", json_object_new_string(t->title));
		json_object_object_add(a, "readOnlyHint", json_object_new_boolean(t->read_only));
		json_object_object_add(a, "destructiveHint",
				       json_object_new_boolean(t->destructive));
		json_object_object_add(a, "openWorldHint",
				       json_object_new_boolean(t->kind == MCP_TOOL_EXEC));
		json_object_object_add(o, "annotations", a);
		json_object_array_add(list, o);
	}
	return list;
}

const struct mcp_tool *mcp_tool_find(const char *name, unsigned offer)
{
	for (size_t i = 0; i < N_TOOLS; i++)
		if (strcmp(tools[i].name, name) == 0 && (tools[i].needs & offer) == tools[i].needs)
			return &tools[i];
	return NULL;
}

/* json-c asserts on the length of what is not an array. */
static size_t array_len(json_object *a)
{
	return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

/* Whether name is one of the comma-separated words of list. */
static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

/* The protocol's field for argument name (t->rename), in buf. */
static const char *field_of(const struct mcp_tool *t, const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);
	for (const char *p = t->rename; p && *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		size_t vlen = end ? (size_t)(end - eq - 1) : strlen(eq + 1);
		if ((size_t)(eq - p) == n && strncmp(p, name, n) == 0 && vlen < len) {
			memcpy(buf, eq + 1, vlen);
			buf[vlen] = 0;
			return buf;
		}
		p = end ? end + 1 : NULL;
	}
	return name;
}

/* Whether v has the JSON Schema type named type. */
static bool has_type(json_object *v, const char *type)
{
	if (!strcmp(type, "string"))
		return json_object_is_type(v, json_type_string);
	if (!strcmp(type, "boolean"))
		return json_object_is_type(v, json_type_boolean);
	if (!strcmp(type, "number"))
		return json_object_is_type(v, json_type_int) ||
		       json_object_is_type(v, json_type_double);
	if (!strcmp(type, "integer")) {
		if (json_object_is_type(v, json_type_int))
			return true;
		double d = json_object_get_double(v);
		return json_object_is_type(v, json_type_double) && d == (double)(long long)d;
	}
	if (!strcmp(type, "array")) { /* of strings: commit's paths */
		if (!json_object_is_type(v, json_type_array))
			return false;
		for (size_t i = 0; i < array_len(v); i++)
			if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
				return false;
		return true;
	}
	return false;
}

/* args checked against schema's names, types and required. */
static int check_args(const struct mcp_tool *t, json_object *schema, json_object *args, char *why,
		      size_t why_len)
{
	json_object *props = json_object_object_get(schema, "properties");
	json_object_object_foreach(args, key, val)
	{
		json_object *p = json_object_object_get(props, key);
		if (!p) {
			char names[256] = "";
			json_object_object_foreach(props, pk, pv)
			{
				(void)pv;
				snprintf(names + strlen(names), sizeof(names) - strlen(names),
					 "%s%s", names[0] ? ", " : "", pk);
			}
			snprintf(why, why_len, "%s: unknown argument '%.64s' (%s takes: %s)",
				 t->name, key, t->name, names[0] ? names : "no arguments");
			return -1;
		}
		const char *type = json_object_get_string(json_object_object_get(p, "type"));
		if (!has_type(val, type)) {
			snprintf(why, why_len, "%s: argument '%s' must be %s %s", t->name, key,
				 strcmp(type, "integer") ? "a" : "an",
				 !strcmp(type, "array") ? "array of strings" : type);
			return -1;
		}
		json_object *en = json_object_object_get(p, "enum");
		bool found = !en;
		for (size_t i = 0; en && i < array_len(en); i++)
			found |= !strcmp(json_object_get_string(json_object_array_get_idx(en, i)),
					 json_object_get_string(val));
		if (!found) {
			snprintf(why, why_len, "%s: argument '%s' must be one of %s", t->name, key,
				 json_object_to_json_string(en));
			return -1;
		}
	}
	json_object *req = json_object_object_get(schema, "required");
	for (size_t i = 0; i < array_len(req); i++) {
		const char *name = json_object_get_string(json_object_array_get_idx(req, i));
		if (!json_object_object_get(args, name)) {
			snprintf(why, why_len, "%s: the argument '%s' is required", t->name, name);
			return -1;
		}
	}
	return 0;
}

json_object *mcp_tool_request(const struct mcp_tool *t, json_object *args, long long id, char *why,
			      size_t why_len)
{
	json_object *schema = json_tokener_parse(t->schema);
	json_object *empty = NULL;
	if (!args)
		args = empty = json_object_new_object();
	int rc = check_args(t, schema, args, why, why_len);
	json_object_put(schema);
	if (rc < 0) {
		json_object_put(empty);
		return NULL;
	}
	json_object *req = t->fixed ? json_tokener_parse(t->fixed) : json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string(t->op));
	json_object_object_add(req, "id", json_object_new_int64(id));
	json_object_object_foreach(args, key, val)
	{
		char buf[32];
		if (!in_list(t->local, key))
			json_object_object_add(req, field_of(t, key, buf, sizeof(buf)),
					       json_object_get(val));
	}
	/* deepagents reads 100 lines unless asked */
	if (!strcmp(t->name, "read_file") && !json_object_object_get(args, "limit"))
		json_object_object_add(req, "limit", json_object_new_int(100));
	json_object_put(empty);
	return req;
}

/* ---- results ---- */

static json_object *text_block(const char *text, size_t len)
{
	json_object *c = json_object_new_object();
	json_object_object_add(c, "type", json_object_new_string("text"));
	json_object_object_add(c, "text", json_object_new_string_len(text, (int)len));
	return c;
}

static json_object *tool_result(json_object *block, bool is_error)
{
	json_object *r = json_object_new_object();
	json_object *content = json_object_new_array();
	json_object_array_add(content, block);
	json_object_object_add(r, "content", content);
	json_object_object_add(r, "isError", json_object_new_boolean(is_error));
	return r;
}

/* A growing string; on no memory it stays what it was. */
struct text {
	char *p;
	size_t len, cap;
};

static void text_add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = (t->len + n + 1) * 2;
		char *p = realloc(t->p, cap);
		if (!p)
			return;
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
}

__attribute__((format(printf, 2, 3))) static void text_printf(struct text *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		text_add(t, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static json_object *text_result(struct text *t, bool is_error)
{
	json_object *r = tool_result(text_block(t->p ? t->p : "", t->len), is_error);
	free(t->p);
	return r;
}

json_object *mcp_tool_error(const char *fmt, ...)
{
	char msg[1024] = "Error: ";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	return tool_result(text_block(msg, strlen(msg)), true);
}

/* A line of the execute result after the output: on a line of its own. */
__attribute__((format(printf, 2, 3))) static void note(struct text *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (t->len)
		text_add(t, "\n", 1);
	text_add(t, buf, strlen(buf));
}

json_object *mcp_tool_exec_result(const struct ab_result *res)
{
	struct text t = {0};
	size_t n = 0;
	char *out = utf8_lossy(res->out.data ? res->out.data : "", res->out.len, &n);
	if (out)
		text_add(&t, out, n);
	free(out);
	if (res->timed_out)
		note(&t, "[Command timed out after %.3g seconds and was killed]",
		     (double)res->timeout_ms / 1000.0);
	else if (res->oom_killed)
		note(&t, "[Command was killed: out of memory]");
	else if (res->signal)
		note(&t, "[Command was killed by signal %d]", res->signal);
	note(&t, "[Command %s with exit code %d]", res->exit_code == 0 ? "succeeded" : "failed",
	     res->exit_code);
	if (res->out.truncated)
		note(&t,
		     "[Output was truncated due to size limits: %llu bytes, the head and the tail "
		     "kept]",
		     res->out.total);
	return text_result(&t, false);
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v = json_object_object_get(o, key);
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static long long int_of(json_object *o, const char *key, long long dflt)
{
	json_object *v = json_object_object_get(o, key);
	return json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : dflt;
}

static const char *image_type(const char *path)
{
	static const char *const map[][2] = {{".png", "image/png"},
					     {".jpg", "image/jpeg"},
					     {".jpeg", "image/jpeg"},
					     {".gif", "image/gif"},
					     {".webp", "image/webp"}};
	const char *dot = strrchr(path, '.');
	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcasecmp(dot, map[i][0]))
			return map[i][1];
	return NULL;
}

/* A binary file read whole: an image, or a resource with its bytes. */
static json_object *read_binary(const char *path, json_object *data)
{
	const char *mime = image_type(path);
	json_object *c = json_object_new_object();
	if (mime) {
		json_object_object_add(c, "type", json_object_new_string("image"));
		json_object_object_add(c, "data", json_object_get(data));
		json_object_object_add(c, "mimeType", json_object_new_string(mime));
		return tool_result(c, false);
	}
	json_object *r = json_object_new_object();
	char uri[4200];
	snprintf(uri, sizeof(uri), "file://%s", path);
	json_object_object_add(r, "uri", json_object_new_string(uri));
	json_object_object_add(r, "mimeType", json_object_new_string("application/octet-stream"));
	json_object_object_add(r, "blob", json_object_get(data));
	json_object_object_add(c, "type", json_object_new_string("resource"));
	json_object_object_add(c, "resource", r);
	return tool_result(c, false);
}

/* deepagents' read: "@@ lines A-B of T | next offset N @@", then the
 * lines as they are (without the last newline). */
static json_object *read_result(json_object *args, json_object *rep)
{
	const char *path = str_of(rep, "path");
	json_object *content = json_object_object_get(rep, "content");
	if (!strcmp(str_of(rep, "encoding") ? str_of(rep, "encoding") : "", "base64"))
		return read_binary(path ? path : "", content);
	const char *s = json_object_get_string(content);
	size_t n = (size_t)json_object_get_string_len(content);
	long long total = int_of(rep, "total_lines", 0), start = int_of(rep, "start_line", 0),
		  end = int_of(rep, "end_line", 0), next = int_of(rep, "next_offset", -1);
	struct text t = {0};
	if (start == 0) {
		long long offset = int_of(args, "offset", 0);
		if (total == 0) {
			text_printf(&t, "System reminder: File exists but has empty contents");
			return text_result(&t, false);
		}
		return mcp_tool_error("Line offset %lld exceeds file length (%lld lines)", offset,
				      total);
	}
	text_printf(&t, "@@ lines %lld-%lld of %lld", start, end, total);
	if (next >= 0 && end < total)
		text_printf(&t, " | next offset %lld", next);
	json_object *tr = json_object_object_get(rep, "truncated");
	if (tr && json_object_get_boolean(tr))
		text_printf(&t, " | truncated mid-line");
	text_printf(&t, " @@\n");
	if (n && s[n - 1] == '\n')
		n--;
	text_add(&t, s, n);
	return text_result(&t, false);
}

/* ls and glob: one path a line, as deepagents lists them. */
static json_object *list_result(const char *name, json_object *args, json_object *list,
				bool truncated)
{
	struct text t = {0};
	size_t n = array_len(list);
	if (n == 0) {
		if (!strcmp(name, "ls"))
			text_printf(&t, "No files found in %s",
				    str_of(args, "path") ? str_of(args, "path") : "/workspace");
		else
			text_printf(&t, "No files found matching pattern '%s'",
				    str_of(args, "pattern"));
		return text_result(&t, false);
	}
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(list, i);
		const char *p = str_of(e, "path");
		text_add(&t, p ? p : "", p ? strlen(p) : 0);
		json_object *dir = json_object_object_get(e, "is_dir");
		if (!strcmp(name, "ls")) {
			if (json_object_get_boolean(dir))
				text_printf(&t, " (directory)");
			else
				text_printf(&t, " (%lld bytes)", int_of(e, "size", 0));
		}
		text_add(&t, "\n", i + 1 < n);
	}
	if (truncated)
		text_printf(&t, "\n\n[The list stopped at %zu entries; narrow the path or pattern]",
			    n);
	return text_result(&t, false);
}

static const char grep_note[] =
	"Note: the search stopped early because it hit the maximum match count. The matches "
	"above are valid but incomplete. Narrow the search (a more specific pattern or a "
	"narrower path), or raise max_count, to see the rest.";

/* deepagents' grep output: content ("path:" then "  line: text"),
 * files_with_matches (paths) or count ("path: N"); matches come in path
 * order, so a file's are together. */
static json_object *grep_result(json_object *args, json_object *rep)
{
	const char *mode = str_of(args, "output_mode") ? str_of(args, "output_mode") : "content";
	json_object *m = json_object_object_get(rep, "matches");
	size_t n = array_len(m);
	struct text t = {0};
	if (n == 0) {
		text_printf(&t, "No matches found for pattern '%s'", str_of(args, "pattern"));
		return text_result(&t, false);
	}
	for (size_t i = 0; i < n;) {
		const char *path = str_of(json_object_array_get_idx(m, i), "path");
		size_t j = i;
		while (j < n && !strcmp(str_of(json_object_array_get_idx(m, j), "path"), path))
			j++;
		if (!strcmp(mode, "count")) {
			text_add(&t, path, strlen(path));
			text_printf(&t, ": %zu\n", j - i);
		} else if (!strcmp(mode, "files_with_matches")) {
			text_add(&t, path, strlen(path));
			text_add(&t, "\n", 1);
		} else {
			text_add(&t, path, strlen(path));
			text_add(&t, ":\n", 2);
			for (size_t k = i; k < j; k++) {
				json_object *e = json_object_array_get_idx(m, k);
				const char *line = str_of(e, "text");
				text_printf(&t, "  %lld: ", int_of(e, "line", 0));
				text_add(&t, line, strlen(line));
				text_add(&t, "\n", 1);
			}
		}
		i = j;
	}
	t.len -= t.len > 0;
	if (json_object_get_boolean(json_object_object_get(rep, "truncated")))
		text_printf(&t, "\n\n%s", grep_note);
	return text_result(&t, false);
}

/* changes: one change a line, then its diff. */
static json_object *changes_result(json_object *rep)
{
	json_object *c = json_object_object_get(rep, "changes");
	size_t n = array_len(c);
	struct text t = {0};
	if (n == 0) {
		text_printf(&t, "No changes: the workspace is as it was when the sandbox started");
		return text_result(&t, false);
	}
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(c, i);
		text_printf(&t, "%s %s", str_of(e, "status"), str_of(e, "path"));
		if (str_of(e, "from"))
			text_printf(&t, " (from %s)", str_of(e, "from"));
		if (strcmp(str_of(e, "type") ? str_of(e, "type") : "file", "file"))
			text_printf(&t, " [%s]", str_of(e, "type"));
		if (json_object_get_boolean(json_object_object_get(e, "conflict")))
			text_printf(&t, " [conflict: changed on the host too]");
		if (json_object_get_boolean(json_object_object_get(e, "protected")))
			text_printf(&t, " [protected path]");
		text_add(&t, "\n", 1);
		const char *diff = str_of(e, "diff");
		if (diff)
			text_add(&t, diff, strlen(diff));
		if (json_object_get_boolean(json_object_object_get(e, "diff_truncated")))
			text_printf(&t, "[diff truncated]\n");
	}
	t.len -= t.len > 0;
	return text_result(&t, false);
}

static void path_list(struct text *t, json_object *a)
{
	for (size_t i = 0; i < array_len(a); i++)
		text_printf(t, "%s%s", i ? ", " : "",
			    json_object_get_string(json_object_array_get_idx(a, i)));
}

static json_object *commit_result(json_object *rep)
{
	json_object *done = json_object_object_get(rep, "committed");
	json_object *conflicts = json_object_object_get(rep, "conflicts");
	struct text t = {0};
	if (array_len(conflicts)) {
		text_printf(&t, "Nothing was committed: these paths changed on the host since the "
				"sandbox started: ");
		path_list(&t, conflicts);
		text_printf(&t, ". Review them, then commit with force=true to overwrite them.");
		return text_result(&t, true);
	}
	text_printf(&t, "Committed %zu path(s) to the workspace: ", array_len(done));
	path_list(&t, done);
	return text_result(&t, false);
}

json_object *mcp_tool_reply_result(const struct mcp_tool *t, json_object *args, json_object *reply)
{
	if (!strcmp(str_of(reply, "type") ? str_of(reply, "type") : "", "error"))
		return mcp_tool_error("%s", str_of(reply, "message"));
	if (!strcmp(t->op, "read"))
		return read_result(args, reply);
	if (!strcmp(t->op, "ls") || !strcmp(t->op, "glob"))
		return list_result(
			t->op, args,
			json_object_object_get(reply, strcmp(t->op, "ls") ? "matches" : "entries"),
			json_object_get_boolean(json_object_object_get(reply, "truncated")));
	if (!strcmp(t->op, "grep"))
		return grep_result(args, reply);
	if (!strcmp(t->op, "changes"))
		return changes_result(reply);
	if (!strcmp(t->op, "commit"))
		return commit_result(reply);
	struct text x = {0};
	if (!strcmp(t->op, "checkpoint"))
		text_printf(&x, "Checkpoint '%s' taken", str_of(reply, "checkpoint"));
	else if (!strcmp(t->op, "restore"))
		text_printf(&x, "The workspace is as it was at checkpoint '%s'",
			    str_of(reply, "checkpoint"));
	else if (!strcmp(t->op, "write"))
		text_printf(&x, "Successfully wrote to '%s'", str_of(args, "file_path"));
	else if (!strcmp(t->op, "edit"))
		text_printf(&x, "Successfully replaced %lld occurrence(s) in '%s'",
			    int_of(reply, "occurrences", 0), str_of(args, "file_path"));
	else
		text_printf(&x, "Discarded every change; the sandbox has ended");
	return text_result(&x, false);
}
