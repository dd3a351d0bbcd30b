#!/bin/bash
# The two zkServer.sh commands containers use, on Debian's ZooKeeper jars:
#   zkServer.sh start-foreground   run the server (QuorumPeerMain: standalone or a quorum
#                                  member, as zoo.cfg says); JVMFLAGS and ZK_SERVER_HEAP (MB) apply
#   zkServer.sh status             the server's mode, from the srvr four-letter word
set -euo pipefail
config="${ZOOCFGDIR:-/conf}/zoo.cfg"

case "${1:-}" in
  start-foreground)
    # shellcheck disable=SC2086  # JVMFLAGS is a list of flags
    exec java "-Xmx${ZK_SERVER_HEAP:-1000}m" ${JVMFLAGS:-} \
      -Dzookeeper.log.dir="${ZOO_LOG_DIR:-/logs}" \
      -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
    ;;
  status)
    port=$(sed -n 's/^clientPort=//p; s/^server\.[0-9]*=.*;\(.*:\)\?\([0-9]*\)$/\2/p' "$config" | head -n1)
    mode=$(echo srvr | nc -w 2 localhost "${port:-2181}" | sed -n 's/^Mode: //p')
    if [ -z "$mode" ]; then echo "ZooKeeper is not serving on port ${port:-2181}"; exit 1; fi
    echo "Mode: $mode"
    ;;
  *)
    echo "usage: zkServer.sh start-foreground | status" >&2
    exit 2
    ;;
esac
