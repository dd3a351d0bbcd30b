#!/bin/bash
# Writes zoo.cfg from the ZOO_* variables at the first start (as the official image does),
# and myid, then runs the command.
set -euo pipefail

mkdir -p "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR" "$ZOO_CONF_DIR"

config="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$config" ]; then
  {
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=$ZOO_TICK_TIME"
    echo "initLimit=$ZOO_INIT_LIMIT"
    echo "syncLimit=$ZOO_SYNC_LIMIT"
    echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
    echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
    echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
    echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
    echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
      echo "$server"
    done
    if [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]; then
      echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
    fi
    for entry in ${ZOO_CFG_EXTRA:-}; do
      echo "$entry"
    done
  } >"$config"
fi

if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
  echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi

exec "$@"
