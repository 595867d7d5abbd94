/* The signals that end a front (serve, mcp, exec), in proc.c: SIGINT, SIGTERM and
 * SIGHUP, taken through a signalfd so the loop that polls decides. */
#ifndef AB_SIGNALS_H
#define AB_SIGNALS_H

/* Block SIGINT, SIGTERM and SIGHUP in the calling thread and return a
 * non-blocking, close-on-exec signalfd for them; -1 with errno. */
int ab_ending_signals_fd(void);

#endif
