/* An OCI layout's JSON parsed in a confined helper process (docs/security.md):
 * the launcher reads index.json, the manifest and the config itself (oci.h's
 * reading half: no link followed, 4 MiB each, every blob hashed against its
 * digest) and sends each text to the helper, `agentbox __read-layout`, which
 * parses it with json-c (oci.h's parsing half) and answers what the launcher
 * needs next: the manifest's digest, then the config's and the layers, then
 * Env, WorkingDir and User. The helper holds no file at all (Landlock
 * without a rule, seccomp, for root uid 65534, no capability); each answer is
 * a bounded list of strings the launcher checks field by field. What a bug
 * in json-c gives an attacker is an image description of their choosing,
 * which the layout's author could have written anyway. */
#ifndef AB_LAYOUT_PROC_H
#define AB_LAYOUT_PROC_H

#include "agentbox/agentbox.h"
#include "image/oci.h"

/* Read the layout at dir (its manifest tagged tag) into img, as oci.h
 * describes, through the helper; base: the image cache, where what the
 * helper found is remembered for the next start with the same index.json
 * and tag (images/KEY.parsed; NULL: not). */
int layout_proc_read(const char *dir, const char *tag, const char *base, struct oci_image *img,
		     struct ab_error *err);

/* The helper's side: `agentbox __read-layout PARENT STOP DIR [TAG]`, its
 * socket on fd 3 (main.c); its exit status. */
int layout_proc_main(int argc, char **argv);

#endif
