#!/bin/bash
# The Spark job image's entrypoint (run by tini as PID 1).
#
#   <spark-submit arguments>   spark-submit with them: the CronJob's driver pod
#                              (--master k8s://... --deploy-mode client ... /opt/magnetar/spark-jobs/dlq_replay.py ...)
#   executor                   an executor pod, as Spark on Kubernetes starts them (the
#                              SPARK_* variables come from the driver)
#   driver <args>              a driver pod of --deploy-mode cluster
#   <command> ...              anything else runs as is (bash, python, ...)
set -euo pipefail
SPARK_HOME="${SPARK_HOME:-/opt/spark}"

spark_classpath="${SPARK_HOME}/conf:${SPARK_HOME}/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}"

case "${1:-}" in
  executor)
    # SPARK_JAVA_OPT_0, _1, ... in order: the executor JVM's options from the driver.
    java_opts=()
    while IFS= read -r name; do
      java_opts+=("${!name}")
    done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)
    exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "${spark_classpath}${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  driver)
    shift
    exec "${SPARK_HOME}/bin/spark-submit" --deploy-mode client \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-0.0.0.0}" "$@"
    ;;
  "" | -* | *.py | local://*)
    exec "${SPARK_HOME}/bin/spark-submit" "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
