#ifndef AB_DELEGATE_H
#define AB_DELEGATE_H

/* agentbox setup-delegation USER [--remove]: as root, a user's own cgroups
 * on a v1 or hybrid host, kept across reboots (delegate.c). */
int ab_setup_delegation(int argc, char **argv);

#endif
