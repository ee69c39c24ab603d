/*
 * keygen.c - `gridnode keygen NAME`: a CURVE key pair for a role, a node, a user or an
 * administrator (docs/security.md). Writes NAME.key (secret, mode 0600) and NAME.pub.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "daemon/curve.h"

static const char usage[] =
    "usage: gridnode keygen [-d DIR] NAME\n"
    "  Writes a CURVE key pair: DIR/NAME.key (the secret key, mode 0600: give it only to\n"
    "  the one program that uses it, via security.secret_key or $GRIDNODE_KEY) and\n"
    "  DIR/NAME.pub (the public key, for authorized-keys files and $GRIDNODE_SERVER_KEY).\n"
    "  Existing files are never overwritten.\n"
    "  -d, --dir DIR   where to write (default: the current directory)\n"
    "  --json          print {\"name\",\"public\",\"secret_file\",\"public_file\"}\n"
    "Then admit the key on the serving role, one line in its authorized-keys file:\n"
    "  PUBLIC-KEY NAME KIND [groups=G1,G2] [grant=REQUEST,...]   KIND: user admin node peer\n";

int cmd_keygen(int argc, char **argv)
{
    const char *dir = ".", *name = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if ((!strcmp(argv[i], "-d") || !strcmp(argv[i], "--dir")) && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!name && argv[i][0] != '-') {
            name = argv[i];
        } else {
            fprintf(stderr, "gridnode keygen: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!name) {
        fprintf(stderr, "gridnode keygen: a NAME is required\n%s", usage);
        return 2;
    }
    char err[600], path[4096], pub[CURVE_KEY_Z85 + 1];
    if (curve_keygen(dir, name, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode keygen: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/%s.pub", dir, name);
    if (curve_read_key(path, false, pub, err, sizeof err) < 0) {
        fprintf(stderr, "gridnode keygen: %s\n", err);
        return 1;
    }
    if (json)
        printf("{\"name\":\"%s\",\"public\":\"%s\",\"secret_file\":\"%s/%s.key\","
               "\"public_file\":\"%s\"}\n",
               name, pub, dir, name, path);
    else
        printf("%s/%s.key  secret key (mode 0600)\n%s  public key %s\n", dir, name, path, pub);
    return 0;
}
