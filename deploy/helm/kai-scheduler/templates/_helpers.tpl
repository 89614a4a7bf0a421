{{/*
Shared pieces of the chart's templates. The chart stays plain manifests: no hooks, no lookup, nothing
random or time-based, so `helm template | kubectl apply` and GitOps tools replay it unchanged. Every value
a template reads is defined in values.yaml. tests/unit/k8s/test_chart.py lints and renders it with Helm's
own engine (helm-python-sdk) for each values combination it covers.
*/}}

{{- define "kai-scheduler.selectorLabels" -}}
app.kubernetes.io/name: kai-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kai-scheduler.labels" -}}
{{- include "kai-scheduler.selectorLabels" . }}
app.kubernetes.io/part-of: kai-scheduler
app.kubernetes.io/version: "{{ .Chart.AppVersion }}"
app.kubernetes.io/managed-by: Helm
helm.sh/chart: kai-scheduler-{{ .Chart.Version }}
{{- end }}

{{- define "kai-scheduler.podAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
{{- end }}

{{- define "kai-scheduler.podSpec" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10000
  runAsGroup: 10000
  fsGroup: 10000
  seccompProfile:
    type: RuntimeDefault
imagePullSecrets:
  {{- toYaml .Values.imagePullSecrets | nindent 2 }}
nodeSelector:
  {{- toYaml .Values.nodeSelector | nindent 2 }}
tolerations:
  {{- toYaml .Values.tolerations | nindent 2 }}
affinity:
  {{- toYaml .Values.affinity | nindent 2 }}
{{- with .Values.global.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{- define "kai-scheduler.containerBasics" -}}
image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
env:
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: PYTHONUNBUFFERED
  value: "1"
# KAI's metric set only: no `*_created` series from the Prometheus client.
- name: PROMETHEUS_DISABLE_CREATED_SERIES
  value: "True"
# The gpufragmentation plugin's compiled kernels are cached here (the root file system is read-only): a
# container that restarts in the pod loads them instead of compiling them again (some 8 s of CPU).
- name: NUMBA_CACHE_DIR
  value: /tmp/numba-cache
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  initialDelaySeconds: 10
  periodSeconds: 10
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
{{- end }}

{{- /* The binder's GPU reservation flags (the binder Deployment and the all-in-one one). */}}
{{- define "kai-scheduler.reservationArgs" -}}
{{- if .Values.resourceReservation.enabled -}}
- --reservation-namespace={{ .Values.resourceReservation.namespace }}
- --reservation-service-account={{ .Values.resourceReservation.serviceAccount }}
{{- if .Values.resourceReservation.image }}
- --reservation-image={{ .Values.resourceReservation.image }}
{{- else }}
- --reservation-image={{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}
- --reservation-timeout={{ .Values.resourceReservation.timeout }}
{{- else -}}
- --no-gpu-reservation
{{- end }}
{{- if .Values.binder.cdiEnabled }}
- --cdi-enabled
{{- end }}
{{- end }}

{{- /* The admission webhooks make their own certificate (`run --tls-secret`) unless cert-manager or the
user provides one (admission.certManager.enabled, admission.caBundle). */}}
{{- define "kai-scheduler.admissionOwnCertificate" -}}
{{- if and .Values.admission.enabled (not .Values.admission.certManager.enabled) (not .Values.admission.caBundle) -}}
true
{{- end }}
{{- end }}

{{- /* The webhooks' failurePolicy as installed: with a certificate of their own, Ignore until the admission
component has written its CA (it sets admission.failurePolicy then), so that nothing waits for it. */}}
{{- define "kai-scheduler.admissionFailurePolicy" -}}
{{- if include "kai-scheduler.admissionOwnCertificate" . -}}
Ignore
{{- else -}}
{{ .Values.admission.failurePolicy }}
{{- end }}
{{- end }}

{{- /* The admission webhooks' flags (the admission Deployment and the all-in-one one). */}}
{{- define "kai-scheduler.admissionArgs" -}}
- --webhook-port=9443
{{- if include "kai-scheduler.admissionOwnCertificate" . }}
- --tls-secret={{ .Values.admission.tls.secretName }}
- --webhook-service={{ .Release.Name }}-admission
- --mutating-webhook-configuration={{ .Release.Name }}-admission
- --validating-webhook-configuration={{ .Release.Name }}-admission
- --webhook-failure-policy={{ .Values.admission.failurePolicy }}
{{- else }}
- --tls-cert-dir=/etc/kai-scheduler/tls
{{- end }}
- --gpu-pod-runtime-class={{ .Values.admission.gpuPodRuntimeClassName }}
{{- if not .Values.admission.gpuSharing }}
- --no-gpu-sharing
{{- end }}
{{- if .Values.queueAdmissionGating.enabled }}
- --queue-admission-gating
{{- end }}
{{- end }}
