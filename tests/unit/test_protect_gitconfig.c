/* Which git config files a command created may stay live on the host
 * (src/layer/protect_gitconfig.c): what git writes for a plain repository
 * stays; every key that runs a program or loads a file, and everything the
 * strict reader does not follow as git would, does not. */
#include <criterion/criterion.h>
#include <string.h>

#include "layer/protect_quarantine.h"

struct config_case {
	const char *text;
	bool modules;	 /* a .gitmodules */
	const char *why; /* NULL: safe */
};

static const struct config_case cases[] = {
	/* what git init, git remote add, git branch -u, git config user.* write */
	{"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
	 "\tlogallrefupdates = true\n",
	 false, NULL},
	{"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n", false,
	 NULL},
	{"[remote \"origin\"]\n\turl = https://example.com/r.git\n"
	 "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n"
	 "\tmerge = refs/heads/main\n[user]\n\tname = Me # a comment\n\temail = me@x\n",
	 false, NULL},
	{"# a comment\n; another\n\n[core]\n  bare\n", false, NULL},
	{"[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib.git\n", true, NULL},
	/* what runs a program or loads a file */
	{"[core]\n\tfsmonitor = touch PWNED\n", false, "sets core.fsmonitor"},
	{"[CORE]\n\tFsMonitor = x\n", false, "sets core.fsmonitor"},
	{"[core] hooksPath = h\n", false, "sets core.hookspath"},
	{"[core]\n\tsshCommand = x\n", false, "sets core.sshcommand"},
	{"[core]\n\tpager = x\n", false, "sets core.pager"},
	{"[core]\n\tworktree = /home\n", false, "sets core.worktree"},
	{"[credential]\n\thelper = x\n", false, "sets credential.helper"},
	{"[filter \"lfs\"]\n\tprocess = x\n", false, "sets filter.*.process"},
	{"[diff \"x\"]\n\ttextconv = x\n", false, "sets diff.*.textconv"},
	{"[diff.x]\n\tcommand = x\n", false, "sets diff.*.command"},
	{"[diff]\n\texternal = x\n", false, "sets diff.external"},
	{"[merge \"x\"]\n\tdriver = x\n", false, "sets merge.*.driver"},
	{"[gpg]\n\tprogram = x\n", false, "sets gpg.program"},
	{"[sequence]\n\teditor = x\n", false, "sets sequence.editor"},
	{"[pager]\n\tlog = x\n", false, "sets pager.log"},
	{"[remote \"o\"]\n\tuploadpack = x\n", false, "sets remote.*.uploadpack"},
	{"[uploadpack]\n\tpackObjectsHook = x\n", false, "sets uploadpack.packobjectshook"},
	{"[include]\n\tpath = x\n", false, "sets include.path"},
	{"[includeIf \"gitdir:/\"]\n\tpath = x\n", false, "sets includeif.*.path"},
	{"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n", false,
	 NULL},
	{"[alias]\n\tst = !sh\n", false, "sets alias.st"},
	{"[submodule \"x\"]\n\tupdate = !sh\n", true, "sets submodule.*.update"},
	{"[core]\n\tfsmonitor = x\n", true, "sets core.fsmonitor"},
	/* what the strict reader does not follow */
	{"[core]\n\tbare = false \\\n\tfsmonitor = x\n", false,
	 "continues a line with a backslash"},
	{"fsmonitor = x\n", false, "has a key before any section"},
	{"[core]\n\tfsmonitor = x\r\n", false, "is not plain text"},
	{"[core \"a\" ]\n", false, "has a section header agentbox does not read"},
	{"[core\n", false, "has a section header agentbox does not read"},
	{"[core]\n\t\"bare\" = x\n", false, "has a line agentbox does not read as git config"},
	{"[core]\n\tbare x\n", false, "has a line agentbox does not read as git config"},
};

Test(gitconfig, allowlist)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[256] = "";
		bool safe = protect_gitconfig_safe(cases[i].text, strlen(cases[i].text),
						   cases[i].modules, why, sizeof(why));
		if (!cases[i].why)
			cr_assert(safe, "case %zu: %s", i, why);
		else
			cr_assert(!safe && strcmp(why, cases[i].why) == 0,
				  "case %zu: want '%s', got '%s'", i, cases[i].why,
				  safe ? "safe" : why);
	}
}

Test(gitconfig, a_nul_is_not_plain_text)
{
	char why[64];
	cr_assert(
		!protect_gitconfig_safe("[core]\n\0fsmonitor = x\n", 22, false, why, sizeof(why)));
	cr_assert_str_eq(why, "is not plain text");
}
