{{/*
The Deployment of a stateless Magnetar service (broker, auditor, gateway).
dict "ctx" . "component" "broker"
*/}}
{{- define "magnetar.serviceDeployment" -}}
{{- $ctx := . }}
{{- $root := .ctx }}
{{- $c := .component }}
{{- $v := index $root.Values $c }}
{{- $port := include "magnetar.port" $c | int }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "magnetar.componentName" $ctx }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "magnetar.labels" $ctx | trim | nindent 4 }}
spec:
  {{- if not (and (eq $c "broker") $v.autoscaling.enabled) }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "magnetar.selectorLabels" $ctx | trim | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "magnetar.podLabels" $ctx | trim | nindent 8 }}
      {{- with (include "magnetar.podAnnotations" (dict "ctx" $root "component" $c "checksum" (include "magnetar.serviceToml" $ctx | sha256sum)) | trim) }}{{ . | nindent 6 }}{{- end }}
    spec:
      automountServiceAccountToken: false
      enableServiceLinks: false
      {{- with (include "magnetar.imagePullSecrets" $root | trim) }}{{ . | nindent 6 }}{{- end }}
      securityContext:
        {{- include "magnetar.podSecurityContext" $ctx | trim | nindent 8 }}
      {{- with (include "magnetar.scheduling" $ctx | trim) }}{{ . | nindent 6 }}{{- end }}
      {{- if $root.Values.auth.authentication.enabled }}
      initContainers:
        {{- include "magnetar.tokenInitContainer" $ctx | trim | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ $c }}
          {{- include "magnetar.componentImage" $ctx | trim | nindent 10 }}
          {{- include "magnetar.serviceCommand" $ctx | trim | nindent 10 }}
          ports:
            {{- if eq $c "gateway" }}
            - name: http
              containerPort: {{ $port }}
            {{- else }}
            - name: grpc
              containerPort: {{ $port }}
            {{- if eq $c "broker" }}
            - name: pulsar
              containerPort: {{ include "magnetar.pulsarPort" $ctx }}
            - name: session
              containerPort: {{ include "magnetar.sessionPort" $ctx }}
            {{- if $root.Values.tls.enabled }}
            - name: pulsar-tls
              containerPort: {{ include "magnetar.pulsarTlsPort" $ctx }}
            {{- end }}
            {{- end }}
            {{- if $root.Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
            {{- end }}
            {{- end }}
          env:
            {{- include "magnetar.serviceEnv" $ctx | trim | nindent 12 }}
          {{- if eq $c "gateway" }}
          {{- include "magnetar.httpProbes" $ctx | trim | nindent 10 }}
          {{- else }}
          {{- include "magnetar.grpcProbes" $ctx | trim | nindent 10 }}
          {{- end }}
          {{- with $v.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- include "magnetar.securityContext" $ctx | trim | nindent 12 }}
          volumeMounts:
            {{- include "magnetar.serviceVolumeMounts" $ctx | trim | nindent 12 }}
      volumes:
        {{- include "magnetar.serviceVolumes" $ctx | trim | nindent 8 }}
{{- end }}
