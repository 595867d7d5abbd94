#ifndef AB_COMPLETE_H
#define AB_COMPLETE_H

/* agentbox __complete WORD...: the candidates for the last word of an
 * agentbox command line (the words after "agentbox"), one a line; a line
 * ":dirs", ":files" or ":commands" asks the shell to add its own. */
int ab_complete(int argc, char **argv);

/* agentbox completion bash|zsh: the script that calls it. */
int ab_completion_script(int argc, char **argv);

#endif
