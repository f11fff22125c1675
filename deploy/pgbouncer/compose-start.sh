#!/bin/sh
# Starts PgBouncer in the "replicas" profile of docker-compose.yml with deploy/pgbouncer/pgbouncer.ini
# (mounted at /etc/cns/pgbouncer), adapted the way .ci/run adapts it: the server's address (db),
# the listening address and the paths; and, instead of trust, SCRAM with the database password from
# the compose secret, which PgBouncer also uses to log in to PostgreSQL.
set -eu
dir=/tmp/pgbouncer
mkdir -p "$dir"
umask 077
# auth_file: "user" "password", a double quote inside a value doubled.
password=$(cat /run/secrets/db_password)
printf '"cns" "%s"\n' "$(printf '%s' "$password" | sed 's/"/""/g')" >"$dir/userlist.txt"
{
  sed 's/^\* = .*/* = host=db port=5432/' /etc/cns/pgbouncer/pgbouncer.ini
  # appended to its last section, [pgbouncer]: a later line wins
  printf 'listen_addr = 0.0.0.0\nauth_type = scram-sha-256\nauth_file = %s\n' "$dir/userlist.txt"
} >"$dir/pgbouncer.ini"
exec pgbouncer "$dir/pgbouncer.ini"
