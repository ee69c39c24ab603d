/*
 * acct_usage.h - `gridnode acct --usage`: accounting records summed per user and
 * account (acct_usage.c).
 */
#ifndef GRIDNODE_ACCT_USAGE_H
#define GRIDNODE_ACCT_USAGE_H

#include <msgpack.h>
#include <stdbool.h>

/* Prints the use of the records in rows (an array of ACCT rows) per (user, account):
 * a table, or with json one JSON array, or with csv comma-separated values. Returns the
 * exit status (0, or 1 when out of memory, printed). */
int acct_usage_print(const msgpack_object *rows, bool json, bool csv);

#endif
