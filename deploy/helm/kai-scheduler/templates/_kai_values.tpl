{{/*
KAI v0.17's chart values, read in this one place. "kai-scheduler.fromKai" (every template includes it
first; it works once per render) sets this chart's own values from the KAI keys that mean something here,
so that every other template reads only this chart's values; it refuses, with one line, a KAI value that
contradicts what this chart does. "kai-scheduler.kaiIgnored" lists the KAI keys that are set and have no
counterpart here (NOTES.txt prints them). values.yaml says what each key becomes.
*/}}

{{- define "kai-scheduler.fromKai" -}}
{{- if not (hasKey .Values "_fromKai") -}}
{{- $_ := set .Values "_fromKai" true -}}
{{- include "kai-scheduler.kaiRefusals" . -}}
{{- $g := .Values.global -}}
{{- if not (kindIs "invalid" $g.nodePoolLabelKey) }}{{ $_ := set .Values "nodePoolLabelKey" $g.nodePoolLabelKey }}{{ end -}}
{{- if not (kindIs "invalid" $g.leaderElection) }}{{ $_ := set .Values "leaderElection" $g.leaderElection }}{{ end -}}
{{- if not (kindIs "invalid" $g.gpuSharing) }}{{ $_ := set .Values.admission "gpuSharing" $g.gpuSharing }}{{ end -}}
{{- if $g.clusterAutoscaling }}{{ $_ := set .Values "clusterAutoscaling" true }}{{ end -}}
{{- with $g.imagePullPolicy }}{{ $_ := set $.Values.image "pullPolicy" . }}{{ end -}}
{{- $_ := set .Values "imagePullSecrets" (concat .Values.imagePullSecrets $g.imagePullSecrets) -}}
{{- $_ := set .Values "nodeSelector" (merge (deepCopy $g.nodeSelector) .Values.nodeSelector) -}}
{{- $_ := set .Values "tolerations" (concat .Values.tolerations $g.tolerations) -}}
{{- if not .Values.affinity }}{{ $_ := set .Values "affinity" $g.affinity }}{{ end -}}
{{- if $g.jsonLog }}{{ $_ := set .Values "logFormat" "json" }}{{ end -}}
{{- $reservation := $g.resourceReservation -}}
{{- with $reservation.namespace }}{{ $_ := set $.Values.resourceReservation "namespace" . }}{{ end -}}
{{- with $reservation.serviceAccount }}{{ $_ := set $.Values.resourceReservation "serviceAccount" . }}{{ end -}}
{{- with .Values.scheduler.placementStrategy }}{{ $_ := set $.Values "placementStrategy" . }}{{ end -}}
{{- with .Values.admission.gpuFractionRuntimeClassName }}{{ $_ := set $.Values.admission "gpuPodRuntimeClassName" . }}{{ end -}}
{{- if eq .Values.defaultPriorityClasses.enabled false }}{{ $_ := set .Values.priorityClasses "enabled" false }}{{ end -}}
{{- if eq .Values.defaultQueue.createDefaultQueue false }}{{ $_ := set .Values.defaultQueue "enabled" false }}{{ end -}}
{{- $replicas := int (.Values.operator.replicaCount | default 0) -}}
{{- range $component := list "scheduler" "binder" "podgrouper" "statusControllers" "admission" "allInOneDeployment" -}}
{{- $values := index $.Values $component -}}
{{- if gt $replicas (int $values.replicas) }}{{ $_ := set $values "replicas" $replicas }}{{ end -}}
{{- end -}}
{{- /* KAI: more than one replica turns leader election on, whatever global.leaderElection says. */ -}}
{{- if gt $replicas 1 }}{{ $_ := set .Values "leaderElection" true }}{{ end -}}
{{- end -}}
{{- end -}}

{{- define "kai-scheduler.kaiRefusals" -}}
{{- $g := .Values.global -}}
{{- if .Values.openshift -}}
{{- fail "openshift: true: this chart makes no SecurityContextConstraints (its pods run as user 10000)" -}}
{{- end -}}
{{- if or $g.podLabelSelector $g.namespaceLabelSelector -}}
{{- fail "global.podLabelSelector, global.namespaceLabelSelector: not supported; this scheduler handles every pod with its schedulerName" -}}
{{- end -}}
{{- if $g.blockNvidiaVisibleDevices -}}
{{- fail "global.blockNvidiaVisibleDevices: not supported; the admission does not hide GPUs from pods that ask for none" -}}
{{- end -}}
{{- with $g.resourceReservation.appLabel }}{{ if ne . "kai-resource-reservation" -}}
{{- fail (printf "global.resourceReservation.appLabel: %q is not supported; reservation pods are labelled app=kai-resource-reservation" .) -}}
{{- end }}{{ end -}}
{{- range $key := list "scheduler" "binder" "podgrouper" "podgroupcontroller" "queuecontroller" "admission" -}}
{{- if eq (index $.Values $key).enabled false -}}
{{- if ne $key "admission" -}}
{{- fail (printf "%s.enabled: false: this chart always runs the %s (only the admission may be left out)" $key $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with .Values.podgrouper.queueLabelKey }}{{ if ne . "kai.scheduler/queue" -}}
{{- fail (printf "podgrouper.queueLabelKey: %q is not supported; pods name their queue with kai.scheduler/queue" .) -}}
{{- end }}{{ end -}}
{{- with .Values.nodescaleadjuster.scalingPodNamespace }}{{ if ne . "kai-scale-adjust" -}}
{{- fail (printf "nodescaleadjuster.scalingPodNamespace: %q is not supported; scaling pods run in kai-scale-adjust" .) -}}
{{- end }}{{ end -}}
{{- with .Values.scheduler.placementStrategy }}{{ if not (has . (list "binpack" "spread")) -}}
{{- fail (printf "scheduler.placementStrategy: %q; expected binpack or spread" .) -}}
{{- end }}{{ end -}}
{{- if and .Values.kaiConfig.render (ne .Values.kaiConfigDeployer.enabled false) -}}
{{- fail "kaiConfig.render and kaiConfigDeployer.enabled: give one (KAI refuses both); here kai-config is rendered with the chart either way, so kaiConfigDeployer.enabled: false alone leaves it out" -}}
{{- end -}}
{{- if and .Values.prometheus.enabled (not .Values.prometheus.externalPrometheusUrl) -}}
{{- fail "prometheus.enabled without prometheus.externalPrometheusUrl: this chart deploys no Prometheus; give the URL of yours" -}}
{{- end -}}
{{- if and (or .Values.scheduler.shards .Values.scheduler.config) (or .Values.scheduler.args .Values.scheduler.plugins .Values.scheduler.actions .Values.scheduler.scenarioSearchBudgets) -}}
{{- fail "scheduler.args, plugins, actions, scenarioSearchBudgets make the SchedulingShard default, which scheduler.config and scheduler.shards replace; give the configuration in one place" -}}
{{- end -}}
{{- end -}}

{{- /* Whether the chart renders the SchedulingShard default: KAI's defaultShard.enabled, unless this
chart's own configuration (scheduler.config, scheduler.shards) is given, which the object would override. */}}
{{- define "kai-scheduler.defaultShard" -}}
{{- if and .Values.defaultShard.enabled (not .Values.scheduler.shards) (not .Values.scheduler.config) -}}
true
{{- end -}}
{{- end -}}

{{- /* The KAI keys that are set and mean nothing here, comma-separated ("" when none). */}}
{{- define "kai-scheduler.kaiIgnored" -}}
{{- $set := list -}}
{{- $g := .Values.global -}}
{{- range $key := list "registry" "tag" "fips" "securityContext" "podSecurityContext" "vpa" "requireDefaultPodAntiAffinityTerm" -}}
{{- if index $g $key }}{{ $set = append $set (printf "global.%s" $key) }}{{ end -}}
{{- end -}}
{{- $fields := dict
  "operator" (list "image" "metricsBindAddress" "probeBindAddress" "qps" "burst" "logLevel")
  "scheduler" (list "image" "ports" "podDisruptionBudget")
  "binder" (list "name" "image" "resourceReservationImage" "resourceReservationPodResources" "runtimeClassName" "ports" "affinity" "plugins")
  "podgrouper" (list "image" "genericKartaFallback" "affinity" "podDisruptionBudget")
  "admission" (list "name" "image" "ports" "cdi" "affinity" "podDisruptionBudget")
  "podgroupcontroller" (list "image" "affinity")
  "queuecontroller" (list "image" "affinity")
  "nodescaleadjuster" (list "image" "scalingPodImage" "affinity") -}}
{{- range $component := keys $fields | sortAlpha -}}
{{- $values := index $.Values $component -}}
{{- range $key := index $fields $component -}}
{{- $value := index $values $key -}}
{{- if or $value (kindIs "bool" $value) (kindIs "float64" $value) (kindIs "int64" $value) -}}
{{- $set = append $set (printf "%s.%s" $component $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* KAI's hook Jobs and its NUMA exporter: whatever is set in them. */}}
{{- range $key := list "crdupgrader" "topologyMigration" "postCleanup" "numaPlacementExporter" -}}
{{- if index $.Values $key }}{{ $set = append $set $key }}{{ end -}}
{{- end -}}
{{- range $key := keys (omit .Values.kaiConfigDeployer "enabled") | sortAlpha }}{{ $set = append $set (printf "kaiConfigDeployer.%s" $key) }}{{ end -}}
{{- join ", " $set -}}
{{- end -}}
