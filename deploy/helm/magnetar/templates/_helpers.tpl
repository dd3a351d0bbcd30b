{{/*
Names, labels, images and the pieces every Magnetar pod shares.
Paths inside the pods (fixed; README.md "Files in the pods"):
  /etc/magnetar                      the component's TOML (ConfigMap), passed with --config
  /var/run/secrets/magnetar/key      the token secret key (Secret), file secret.key
  /var/run/magnetar/token            the service token (emptyDir, written by an init container)
  /var/run/secrets/magnetar/tls      tls.crt, tls.key, ca.crt (Secret)
  /tmp                               emptyDir (the root filesystem is read-only)
*/}}

{{- define "magnetar.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "magnetar.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "magnetar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* kebab-case name of a component key: dlqReplay -> dlq-replay */}}
{{- define "magnetar.componentSlug" -}}
{{- . | kebabcase }}
{{- end }}

{{/* "<fullname>-<component>"; dict "ctx" . "component" "broker" */}}
{{- define "magnetar.componentName" -}}
{{- printf "%s-%s" (include "magnetar.fullname" .ctx) (include "magnetar.componentSlug" .component) }}
{{- end }}

{{- define "magnetar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "magnetar.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ include "magnetar.componentSlug" .component }}
{{- end }}

{{- define "magnetar.labels" -}}
helm.sh/chart: {{ include "magnetar.chart" .ctx }}
{{ include "magnetar.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: magnetar
{{- end }}

{{/* Labels every pod of this release carries (NetworkPolicies select on them) */}}
{{- define "magnetar.instanceLabels" -}}
app.kubernetes.io/name: {{ include "magnetar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "magnetar.podLabels" -}}
{{ include "magnetar.labels" . }}
{{- with .ctx.Values.global.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Container ports of each component */}}
{{- define "magnetar.port" -}}
{{- get (dict "zookeeper" 2181 "bookie" 3181 "broker" 6660 "auditor" 3182 "gateway" 8080) . }}
{{- end }}

{{/*
The brokers' ports for Pulsar's binary protocol: pulsar:// and, with TLS, pulsar+ssl://
(Pulsar's own numbers, so that Pulsar applications change only a host name).
*/}}
{{- define "magnetar.pulsarPort" -}}6650{{- end }}
{{- define "magnetar.pulsarTlsPort" -}}6651{{- end }}
{{/*
The brokers' port for the SDK's framed session (session_port; TLS with tls.enabled).
*/}}
{{- define "magnetar.sessionPort" -}}6661{{- end }}

{{/* MAGNETAR_BROKER_ ... */}}
{{- define "magnetar.envPrefix" -}}
{{- printf "MAGNETAR_%s_" (upper .) }}
{{- end }}

{{/* An image reference; dict "ctx" . "image" <block image> "default" <fallback image> */}}
{{- define "magnetar.image" -}}
{{- $repo := .image.repository | default .default.repository }}
{{- $tag := .image.tag | default .default.tag | default .ctx.Chart.AppVersion }}
{{- $registry := .ctx.Values.global.imageRegistry }}
{{- if $registry }}{{ printf "%s/%s:%s" $registry $repo $tag }}{{ else }}{{ printf "%s:%s" $repo $tag }}{{ end }}
{{- end }}

{{- define "magnetar.pullPolicy" -}}
{{- .image.pullPolicy | default .ctx.Values.global.image.pullPolicy }}
{{- end }}

{{/* image: + imagePullPolicy: of a component's main image; dict "ctx" . "component" "broker" */}}
{{- define "magnetar.componentImage" -}}
{{- $v := index .ctx.Values .component }}
{{- $default := .ctx.Values.global.image }}
image: {{ include "magnetar.image" (dict "ctx" .ctx "image" $v.image "default" $default) | quote }}
imagePullPolicy: {{ include "magnetar.pullPolicy" (dict "ctx" .ctx "image" $v.image) }}
{{- end }}

{{/* The ZooKeeper connect string the services use */}}
{{- define "magnetar.zkConnect" -}}
{{- if .Values.zookeeper.external.connect }}
{{- .Values.zookeeper.external.connect }}
{{- else }}
{{- $name := include "magnetar.componentName" (dict "ctx" . "component" "zookeeper") }}
{{- $hosts := list }}
{{- range $i := until (int .Values.zookeeper.replicas) }}
{{- $hosts = append $hosts (printf "%s-%d.%s-headless.%s.svc.%s:2181" $name $i $name $.Release.Namespace $.Values.global.clusterDomain) }}
{{- end }}
{{- join "," $hosts }}
{{- end }}
{{- end }}

{{/* The Secret holding the token secret key, and the key in it */}}
{{- define "magnetar.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-token-key" (include "magnetar.fullname" .)) }}
{{- end }}
{{- define "magnetar.authSecretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}secret.key{{ end }}
{{- end }}

{{/* Every superuser role, as a list */}}
{{- define "magnetar.superuserRoles" -}}
{{- $r := .Values.auth.roles }}
{{- $roles := list $r.broker $r.auditor $r.gateway $r.admin }}
{{- if .Values.dlqReplay.enabled }}{{ $roles = append $roles $r.dlqReplay }}{{ end }}
{{- $roles = concat $roles .Values.auth.extraSuperuserRoles | uniq }}
{{- toJson $roles }}
{{- end }}

{{/* The TLS Secret of a component; dict "ctx" . "component" "broker" */}}
{{- define "magnetar.tlsSecret" -}}
{{- $own := index .ctx.Values.tls .component }}
{{- $own.existingSecret | default .ctx.Values.tls.existingSecret }}
{{- end }}

{{/* One TOML value: strings, numbers, booleans and lists (JSON's syntax is TOML's for these) */}}
{{- define "magnetar.tomlValue" -}}
{{- if kindIs "map" . }}
{{- fail "a config value cannot be a table (a map); use key: value pairs" }}
{{- end }}
{{- toJson . }}
{{- end }}

{{/*
A service's TOML: the settings the chart manages, then the component's config values over
them. dict "ctx" . "component" "broker"
*/}}
{{- define "magnetar.serviceToml" -}}
{{- $ctx := .ctx }}
{{- $c := .component }}
{{- $v := index $ctx.Values $c }}
{{- $auth := $ctx.Values.auth }}
{{- $m := dict "zookeeper" (include "magnetar.zkConnect" $ctx) "zk_root" $ctx.Values.global.zkRoot "host" "0.0.0.0" }}
{{- if has $c (list "broker" "gateway") }}
{{- $_ := set $m "cluster_name" $ctx.Values.global.clusterName }}
{{- end }}
{{- if eq $c "bookie" }}
{{- $_ := set $m "data_dir" "/data/ledgers" }}
{{- $_ := set $m "journal_dir" "/data/journal" }}
{{- end }}
{{- $_ := set $m "authentication_enabled" $auth.authentication.enabled }}
{{- if $auth.authentication.enabled }}
{{- $_ := set $m "token_algorithm" $auth.authentication.algorithm }}
{{- $_ := set $m "token_secret_key_file" "/var/run/secrets/magnetar/key/secret.key" }}
{{- $_ := set $m "superuser_roles" (include "magnetar.superuserRoles" $ctx | fromJsonArray) }}
{{- if has $c (list "broker" "auditor" "gateway") }}
{{- $_ := set $m "broker_client_auth_token_file" "/var/run/magnetar/token/service.token" }}
{{- end }}
{{- end }}
{{- if eq $c "broker" }}
{{- $_ := set $m "authorization_enabled" (and $auth.authentication.enabled $auth.authorization.enabled) }}
{{- end }}
{{- if and $auth.authentication.enabled (has $c (list "broker" "gateway")) }}
{{- $_ := set $m "anonymous_user_role" $auth.authentication.anonymousUserRole }}
{{- if $auth.authentication.tlsClientCertificates }}
{{- $_ := set $m "authentication_providers" (list "token" "tls") }}
{{- if eq $c "broker" }}
{{- $_ := set $m "proxy_roles" (list $auth.roles.gateway) }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $m "tls_enabled" $ctx.Values.tls.enabled }}
{{- if $ctx.Values.tls.enabled }}
{{- $_ := set $m "tls_cert_file" "/var/run/secrets/magnetar/tls/tls.crt" }}
{{- $_ := set $m "tls_key_file" "/var/run/secrets/magnetar/tls/tls.key" }}
{{- $_ := set $m "tls_trust_certs_file" "/var/run/secrets/magnetar/tls/ca.crt" }}
{{- $_ := set $m "tls_require_client_cert" $ctx.Values.tls.requireClientCert }}
{{- if has $c (list "broker" "auditor" "gateway") }}
{{- $_ := set $m "tls_client_enabled" true }}
{{- end }}
{{- end }}
{{- $all := mergeOverwrite $m (deepCopy $v.config) }}
# {{ $c }}.toml, rendered by the chart (settings: conf/{{ $c }}.toml). The port, metrics port and
# advertised address come from the environment (MAGNETAR_{{ upper $c }}_*), which wins over this file.
{{- range $k := keys $all | sortAlpha }}
{{ $k }} = {{ include "magnetar.tomlValue" (index $all $k) }}
{{- end }}
{{- end }}

{{/* Pod securityContext: global's with the component's merged over it */}}
{{- define "magnetar.podSecurityContext" -}}
{{- $v := index .ctx.Values .component }}
{{- toYaml (mergeOverwrite (deepCopy .ctx.Values.global.podSecurityContext) (deepCopy $v.podSecurityContext)) }}
{{- end }}

{{- define "magnetar.securityContext" -}}
{{- $v := index .ctx.Values .component }}
{{- toYaml (mergeOverwrite (deepCopy .ctx.Values.global.securityContext) (deepCopy $v.securityContext)) }}
{{- end }}

{{/* The scheduling part of a pod spec: nodeSelector, tolerations, affinity (or anti-affinity) */}}
{{- define "magnetar.scheduling" -}}
{{- $v := index .ctx.Values .component }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.affinity }}
affinity:
  {{- toYaml $v.affinity | nindent 2 }}
{{- else if eq (default "none" $v.antiAffinity) "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "magnetar.selectorLabels" . | trim | nindent 12 }}
{{- else if eq (default "none" $v.antiAffinity) "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "magnetar.selectorLabels" . | trim | nindent 14 }}
{{- end }}
{{- end }}

{{- define "magnetar.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "magnetar.podAnnotations" -}}
{{- $v := index .ctx.Values .component }}
{{- $a := mergeOverwrite (deepCopy .ctx.Values.global.podAnnotations) (deepCopy $v.podAnnotations) }}
{{- if .checksum }}{{ $_ := set $a "checksum/config" .checksum }}{{ end }}
{{- with $a }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The environment of a Magnetar service container (and of its init containers) */}}
{{- define "magnetar.serviceEnv" -}}
{{- $c := .component }}
{{- $p := include "magnetar.envPrefix" $c }}
{{- $v := index .ctx.Values $c }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: PYTHONUNBUFFERED
  value: "1"
- name: {{ $p }}PORT
  value: {{ include "magnetar.port" $c | quote }}
{{- if eq $c "broker" }}
- name: {{ $p }}PROTOCOL_PORT
  value: {{ include "magnetar.pulsarPort" . | quote }}
- name: {{ $p }}PROTOCOL_TLS_PORT
  value: {{ include "magnetar.pulsarTlsPort" . | quote }}
- name: {{ $p }}SESSION_PORT
  value: {{ include "magnetar.sessionPort" . | quote }}
{{- end }}
{{- if and .ctx.Values.metrics.enabled (ne $c "gateway") }}
- name: {{ $p }}METRICS_PORT
  value: {{ .ctx.Values.metrics.port | quote }}
{{- end }}
{{- if eq $c "bookie" }}
- name: {{ $p }}ADVERTISED_ADDRESS
  value: {{ printf "$(POD_NAME).%s.$(POD_NAMESPACE).svc.%s:$(%sPORT)" (include "magnetar.componentName" .) .ctx.Values.global.clusterDomain $p | quote }}
{{- else if and (has $c (list "broker" "auditor")) (not .ctx.Values.tls.enabled) }}
- name: {{ $p }}ADVERTISED_ADDRESS
  value: {{ printf "$(POD_IP):$(%sPORT)" $p | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The command of a Magnetar service container. Brokers and auditors advertise their pod IP;
with TLS they advertise the pod's DNS name (<a-b-c-d>.<namespace>.pod.<domain>) instead,
which one wildcard certificate name covers.
*/}}
{{- define "magnetar.serviceCommand" -}}
{{- $c := .component }}
{{- $p := include "magnetar.envPrefix" $c }}
{{- if and (has $c (list "broker" "auditor")) .ctx.Values.tls.enabled }}
command: ["/bin/sh", "-c"]
args:
  - {{ printf "export %sADVERTISED_ADDRESS=\"$(echo \"$POD_IP\" | tr . -).$POD_NAMESPACE.pod.%s:$%sPORT\" && exec magnetar %s --config /etc/magnetar/%s.toml" $p .ctx.Values.global.clusterDomain $p $c $c | quote }}
{{- else }}
command: ["magnetar"]
args: [{{ $c | quote }}, "--config", {{ printf "/etc/magnetar/%s.toml" $c | quote }}]
{{- end }}
{{- end }}

{{/* Volumes of a Magnetar service pod (not the bookie's PVCs) */}}
{{- define "magnetar.serviceVolumes" -}}
- name: config
  configMap:
    name: {{ include "magnetar.componentName" . }}
- name: tmp
  emptyDir: {}
{{- if .ctx.Values.auth.authentication.enabled }}
- name: token-key
  secret:
    secretName: {{ include "magnetar.authSecretName" .ctx }}
    defaultMode: 0440
    items:
      - key: {{ include "magnetar.authSecretKey" .ctx }}
        path: secret.key
{{- if has .component (list "broker" "auditor" "gateway" "dlqReplay") }}
- name: service-token
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- end }}
{{- if .ctx.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "magnetar.tlsSecret" . }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{- define "magnetar.serviceVolumeMounts" -}}
- name: config
  mountPath: /etc/magnetar
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .ctx.Values.auth.authentication.enabled }}
- name: token-key
  mountPath: /var/run/secrets/magnetar/key
  readOnly: true
{{- if has .component (list "broker" "auditor" "gateway" "dlqReplay") }}
- name: service-token
  mountPath: /var/run/magnetar/token
  readOnly: true
{{- end }}
{{- end }}
{{- if .ctx.Values.tls.enabled }}
- name: tls
  mountPath: /var/run/secrets/magnetar/tls
  readOnly: true
{{- end }}
{{- end }}

{{/*
The init container that signs this pod's service token with the secret key
(`magnetar tokens create`) into the service-token emptyDir. dict "ctx" . "component" "broker"
*/}}
{{- define "magnetar.tokenInitContainer" -}}
{{- $role := index .ctx.Values.auth.roles .component }}
- name: service-token
  {{- if .image }}
  image: {{ .image | quote }}
  imagePullPolicy: {{ include "magnetar.pullPolicy" (dict "ctx" .ctx "image" (index .ctx.Values .component).image) }}
  {{- else }}
  {{- include "magnetar.componentImage" . | trim | nindent 2 }}
  {{- end }}
  command: ["/bin/sh", "-ec"]
  args:
    - {{ printf "magnetar tokens create --secret-key file:///var/run/secrets/magnetar/key/secret.key --algorithm %s --subject %s > /var/run/magnetar/token/service.token.new && mv /var/run/magnetar/token/service.token.new /var/run/magnetar/token/service.token" .ctx.Values.auth.authentication.algorithm $role | quote }}
  securityContext:
    {{- include "magnetar.securityContext" . | trim | nindent 4 }}
  resources:
    requests:
      cpu: 10m
      memory: 64Mi
    limits:
      memory: 256Mi
  volumeMounts:
    - name: token-key
      mountPath: /var/run/secrets/magnetar/key
      readOnly: true
    - name: service-token
      mountPath: /var/run/magnetar/token
    - name: tmp
      mountPath: /tmp
{{- end }}

{{/*
Probes of a gRPC service: Kubernetes' own gRPC probes when the port is plain text; with TLS
(kubelet's gRPC probes cannot speak TLS) `magnetar health localhost:PORT` with the pod's
trust file (and its certificate for mTLS). dict "ctx" . "component" "broker"
*/}}
{{- define "magnetar.grpcProbes" -}}
{{- $port := include "magnetar.port" .component | int }}
{{- $check := dict "grpc" (dict "port" $port) }}
{{- if .ctx.Values.tls.enabled }}
{{- $cmd := list "magnetar" "health" (printf "localhost:%d" $port) "--tls-trust-certs-file" "/var/run/secrets/magnetar/tls/ca.crt" }}
{{- if .ctx.Values.tls.requireClientCert }}
{{- $cmd = concat $cmd (list "--tls-cert-file" "/var/run/secrets/magnetar/tls/tls.crt" "--tls-key-file" "/var/run/secrets/magnetar/tls/tls.key") }}
{{- end }}
{{- $check = dict "exec" (dict "command" $cmd) }}
{{- end }}
startupProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 2
  timeoutSeconds: 5
  failureThreshold: 90
readinessProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
livenessProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end }}

{{/* A PodDisruptionBudget; dict "ctx" . "component" "broker" */}}
{{- define "magnetar.pdb" -}}
{{- $v := index .ctx.Values .component }}
{{- if $v.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "magnetar.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "magnetar.labels" . | trim | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "magnetar.selectorLabels" . | trim | nindent 6 }}
{{- end }}
{{- end }}

{{/* NetworkPolicy pieces */}}
{{- define "magnetar.peer" -}}
- podSelector:
    matchLabels:
      {{- include "magnetar.selectorLabels" . | trim | nindent 6 }}
{{- end }}
{{- define "magnetar.metricsRule" -}}
{{- if .ctx.Values.metrics.enabled }}
- ports:
    - port: {{ .ctx.Values.metrics.port }}
      protocol: TCP
  {{- with .ctx.Values.networkPolicy.metricsFrom }}
  from:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
Probes of the gateway: HTTP(S) GETs of /healthz and /readyz; with mTLS (kubelet shows no client
certificate) `magnetar health https://localhost:8080/...` with the pod's certificate.
*/}}
{{- define "magnetar.httpProbes" -}}
{{- $tls := .ctx.Values.tls }}
{{- range $probe := list "startupProbe" "readinessProbe" "livenessProbe" }}
{{- $path := ternary "/readyz" "/healthz" (eq $probe "readinessProbe") }}
{{ $probe }}:
  {{- if and $tls.enabled $tls.requireClientCert }}
  exec:
    command: ["magnetar", "health", "https://localhost:8080{{ $path }}", "--tls-trust-certs-file", "/var/run/secrets/magnetar/tls/ca.crt", "--tls-cert-file", "/var/run/secrets/magnetar/tls/tls.crt", "--tls-key-file", "/var/run/secrets/magnetar/tls/tls.key"]
  {{- else }}
  httpGet:
    path: {{ $path }}
    port: http
    scheme: {{ ternary "HTTPS" "HTTP" $tls.enabled }}
  {{- end }}
  {{- if eq $probe "startupProbe" }}
  periodSeconds: 2
  timeoutSeconds: 5
  failureThreshold: 90
  {{- else if eq $probe "readinessProbe" }}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
  {{- else }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
  {{- end }}
{{- end }}
{{- end }}
