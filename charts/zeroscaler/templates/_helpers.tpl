{{/*
Names. Kubernetes names are limited to 63 characters; suffixes are added after trimming.
*/}}
{{- define "zeroscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "zeroscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"true" in mode combined: one Deployment (the controller's) whose pods run zeroscaler-combined,
the controller and the webhook in one process.
*/}}
{{- define "zeroscaler.combined" -}}
{{- if eq .Values.mode "combined" -}}
true
{{- end -}}
{{- end -}}

{{/* The component label of the pods that serve the webhook: the controller's in mode combined. */}}
{{- define "zeroscaler.webhook.podComponent" -}}
{{- if include "zeroscaler.combined" . -}}
controller
{{- else -}}
webhook
{{- end -}}
{{- end -}}

{{- define "zeroscaler.controller.fullname" -}}
{{- printf "%s-controller" (include "zeroscaler.fullname" .) -}}
{{- end -}}

{{- define "zeroscaler.webhook.fullname" -}}
{{- printf "%s-webhook" (include "zeroscaler.fullname" .) -}}
{{- end -}}

{{- define "zeroscaler.certs.fullname" -}}
{{- printf "%s-certs" (include "zeroscaler.fullname" .) -}}
{{- end -}}

{{- define "zeroscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels. Selector labels never change after install (Deployment selectors are immutable), so they
hold only name, instance and component.
*/}}
{{- define "zeroscaler.labels" -}}
helm.sh/chart: {{ include "zeroscaler.chart" . }}
app.kubernetes.io/name: {{ include "zeroscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: zeroscaler
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of one component: call with (dict "ctx" $ "component" "controller"). */}}
{{- define "zeroscaler.componentLabels" -}}
{{ include "zeroscaler.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "zeroscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "zeroscaler.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* ServiceAccount names. */}}
{{- define "zeroscaler.controller.serviceAccountName" -}}
{{- default (include "zeroscaler.controller.fullname" .) .Values.controller.serviceAccount.name -}}
{{- end -}}

{{/* The webhook's ServiceAccount: the controller's in mode combined, where one pod runs both. */}}
{{- define "zeroscaler.webhook.serviceAccountName" -}}
{{- if include "zeroscaler.combined" . -}}
{{- include "zeroscaler.controller.serviceAccountName" . -}}
{{- else -}}
{{- default (include "zeroscaler.webhook.fullname" .) .Values.webhook.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "zeroscaler.controller.leaseName" -}}
{{- default (include "zeroscaler.controller.fullname" .) .Values.controller.leaderElection.leaseName -}}
{{- end -}}

{{- define "zeroscaler.webhook.configurationName" -}}
{{- include "zeroscaler.fullname" . -}}
{{- end -}}

{{/* The activator's MutatingWebhookConfiguration: "0-" sorts it before names that start with a
letter, so that it is called before the backends' own mutating configurations. */}}
{{- define "zeroscaler.activator.configurationName" -}}
{{- .Values.activator.configurationName | default (printf "0-%s-activator" (include "zeroscaler.fullname" .)) | trunc 253 -}}
{{- end -}}

{{- define "zeroscaler.activator.requestsName" -}}
{{- printf "%s-activator-requests" (include "zeroscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "zeroscaler.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "zeroscaler.webhook.fullname" .)) .Values.certificates.secretName -}}
{{- end -}}

{{/* "true" when the running webhook renews its own certificate (mode job, renewal enabled). */}}
{{- define "zeroscaler.webhook.renews" -}}
{{- if and (eq .Values.certificates.mode "job") .Values.certificates.job.renewal.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* The serving pair from the TLS Secret, as a volume source (only the pair: it may hold the CA's key). */}}
{{- define "zeroscaler.webhook.tlsVolume" -}}
secret:
  secretName: {{ include "zeroscaler.tlsSecretName" . }}
  defaultMode: 0440
  items:
    - key: tls.crt
      path: tls.crt
    - key: tls.key
      path: tls.key
{{- end -}}

{{- define "zeroscaler.certManager.certificateName" -}}
{{- printf "%s-serving" (include "zeroscaler.webhook.fullname" .) -}}
{{- end -}}

{{/*
The image reference: <registry>/<repository>, then @digest or :tag (the chart's appVersion unless
told). global.imageRegistry, for mirrors and air-gapped clusters, wins over image.registry; with
neither, the repository alone is left to the container runtime's default registry.
*/}}
{{- define "zeroscaler.image" -}}
{{- $registry := default .Values.image.registry ((.Values.global).imageRegistry) -}}
{{- $name := .Values.image.repository -}}
{{- if $registry -}}
{{- $name = printf "%s/%s" (trimSuffix "/" $registry) $name -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $name .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The host names the serving certificate must carry: the Service's DNS names, or the host of the
webhook URL, plus any extra hosts. One per line.
*/}}
{{- define "zeroscaler.webhook.hosts" -}}
{{- if eq .Values.webhook.clientConfig.mode "url" -}}
{{- $url := urlParse (include "zeroscaler.webhook.url" .) -}}
{{- $host := regexReplaceAll ":[0-9]+$" $url.host "" | trimPrefix "[" | trimSuffix "]" }}
{{ $host }}
{{- else -}}
{{- $svc := include "zeroscaler.webhook.fullname" . -}}
{{- $ns := .Release.Namespace }}
{{ $svc }}.{{ $ns }}.svc
{{ $svc }}.{{ $ns }}.svc.cluster.local
{{ $svc }}.{{ $ns }}
{{ $svc }}
{{- end }}
{{- range .Values.certificates.job.extraHosts }}
{{ . }}
{{- end }}
{{- end -}}

{{/* The webhook URL in url mode; fails with a clear message when it is unusable. */}}
{{- define "zeroscaler.webhook.url" -}}
{{- $url := .Values.webhook.clientConfig.url -}}
{{- if not $url -}}
{{- fail "webhook.clientConfig.url is required when webhook.clientConfig.mode is url (e.g. https://127.0.0.1:9443/mutate)" -}}
{{- end -}}
{{- if not (hasPrefix "https://" $url) -}}
{{- fail (printf "webhook.clientConfig.url %q must start with https:// (the API server only calls webhooks over TLS)" $url) -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{/* A PodDisruptionBudget spec body: call with (dict "pdb" .Values.x.podDisruptionBudget). */}}
{{- define "zeroscaler.pdbBudget" -}}
{{- if not (kindIs "invalid" .pdb.minAvailable) -}}
minAvailable: {{ .pdb.minAvailable }}
{{- else -}}
maxUnavailable: {{ .pdb.maxUnavailable }}
{{- end -}}
{{- end -}}

{{/*
Default soft anti-affinity: prefer replicas of one component on different nodes. Call with
(dict "ctx" $ "component" "controller" "affinity" .Values.controller.affinity).
*/}}
{{- define "zeroscaler.affinity" -}}
{{- if .affinity -}}
{{ toYaml .affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "zeroscaler.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end -}}
{{- end -}}

{{/* Pod settings shared by the controller and the webhook: call with (dict "ctx" $ "c" .Values.x). */}}
{{- define "zeroscaler.podCommon" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with include "zeroscaler.hostNetwork" .ctx }}
{{ . }}
{{- end }}
terminationGracePeriodSeconds: {{ .c.terminationGracePeriodSeconds }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The node's network namespace for every pod, when asked for. */}}
{{- define "zeroscaler.hostNetwork" -}}
{{- if .Values.hostNetwork -}}
{{- if eq (int .Values.webhook.port) 10250 -}}
{{- fail "webhook.port 10250 is the kubelet's own port on every node: with hostNetwork set webhook.port to a free node port (e.g. 9443) and let the control plane reach it" -}}
{{- end -}}
{{- if eq (int .Values.controller.metricsPort) 10250 -}}
{{- fail "controller.metricsPort 10250 is the kubelet's own port on every node: with hostNetwork choose another" -}}
{{- end -}}
hostNetwork: true
# Cluster DNS names still resolve from the node's network namespace.
dnsPolicy: ClusterFirstWithHostNet
{{- end -}}
{{- end -}}

{{/*
The API server address for in-cluster configuration, when it is not the kubernetes Service.
Variables set in the container win over the ones the kubelet derives from Services.
*/}}
{{- define "zeroscaler.apiServerEnv" -}}
{{- with .Values.apiServer.host -}}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ $.Values.apiServer.port | quote }}
{{- end -}}
{{- end -}}

{{/*
Rolling updates. On the pod network a new pod starts before an old one stops; on the host network
the new pod needs the old one's ports, so an old pod goes first.
*/}}
{{/* A Deployment's strategy: the component's value, else the chart's rolling update. Call with
(dict "ctx" $ "strategy" <value>). */}}
{{- define "zeroscaler.strategy" -}}
{{- if .strategy }}
{{- toYaml .strategy }}
{{- else }}
{{- include "zeroscaler.rollingUpdate" .ctx }}
{{- end }}
{{- end -}}

{{- define "zeroscaler.rollingUpdate" -}}
type: RollingUpdate
rollingUpdate:
{{- if .Values.hostNetwork }}
  maxUnavailable: 1
  maxSurge: 0
{{- else }}
  maxUnavailable: 0
  maxSurge: 1
{{- end }}
{{- end -}}

{{/* Probe timing from values: call with a probe values map. */}}
{{- define "zeroscaler.probeTiming" -}}
initialDelaySeconds: {{ .initialDelaySeconds }}
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end -}}

{{/*
Command-line flags. The flags of each program are kept here, in one place, so they are easy to
check against the programs' --help.
*/}}
{{- define "zeroscaler.controller.args" -}}
- --lease-namespace={{ .Release.Namespace }}
- --lease-name={{ include "zeroscaler.controller.leaseName" . }}
- --exclude-namespaces={{ join "," .Values.webhook.excludeNamespaces }}
- --lease-duration={{ .Values.controller.leaderElection.leaseDuration }}
- --id=$(POD_NAME)
- --metrics-host=0.0.0.0
- --metrics-port={{ .Values.controller.metricsPort }}
{{- if .Values.controller.metricsAuthorization }}
- --metrics-auth
{{- end }}
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
- --webhook-configuration={{ include "zeroscaler.webhook.configurationName" . }}
{{- if .Values.activator.enabled }}
- --activator-configuration={{ include "zeroscaler.activator.configurationName" . }}
- --activator-requests={{ include "zeroscaler.activator.requestsName" . }}
- --activator-timeout={{ .Values.activator.timeoutSeconds }}
{{- end }}
{{- if .Values.controller.dryRun }}
- --dry-run
{{- end }}
{{- if not .Values.controller.workloadMetrics }}
- --no-workload-metrics
{{- end }}
{{- range .Values.controller.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The namespaces the webhook never mutates, as a YAML list: the release's and the excluded. */}}
{{- define "zeroscaler.webhook.excludedNamespaces" -}}
{{- toYaml (uniq (prepend .Values.webhook.excludeNamespaces .Release.Namespace)) -}}
{{- end -}}

{{- define "zeroscaler.webhook.args" -}}
- --namespace={{ .Release.Namespace }}
- --host=0.0.0.0
- --port={{ .Values.webhook.port }}
- --webhook-configuration={{ include "zeroscaler.webhook.configurationName" . }}
{{- if include "zeroscaler.webhook.renews" . }}
{{- $r := .Values.certificates.job.renewal }}
{{- if lt (float64 $r.settle) (mulf 2 $r.syncInterval) }}
{{- fail (printf "certificates.job.renewal.settle (%v) must be at least twice syncInterval (%v): every webhook replica reads the Secret in between" $r.settle $r.syncInterval) }}
{{- end }}
- --cert-file=/tmp/tls/tls.crt
- --key-file=/tmp/tls/tls.key
- --cert-secret={{ include "zeroscaler.tlsSecretName" . }}
- --cert-webhook-configuration={{ include "zeroscaler.webhook.configurationName" . }}
- --cert-renew-fraction={{ $r.fraction }}
- --cert-serving-lifetime={{ $r.servingLifetime }}
- --cert-ca-lifetime={{ $r.caLifetime }}
- --cert-sync-interval={{ $r.syncInterval }}
- --cert-settle={{ $r.settle }}
{{- else }}
- --cert-file=/etc/zeroscaler/tls/tls.crt
- --key-file=/etc/zeroscaler/tls/tls.key
{{- end }}
- --exclude-namespaces={{ .Values.webhook.excludeNamespaces | toJson }}
{{- if .Values.activator.enabled }}
- --activator-configuration={{ include "zeroscaler.activator.configurationName" . }}
- --activator-requests={{ include "zeroscaler.activator.requestsName" . }}
{{- end }}
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
{{- range .Values.webhook.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "zeroscaler.certs.args" -}}
- certs
- --namespace={{ .Release.Namespace }}
- --secret={{ include "zeroscaler.tlsSecretName" . }}
- --service={{ include "zeroscaler.webhook.fullname" . }}
- --webhook-configuration={{ include "zeroscaler.webhook.configurationName" . }}
- --renew-before={{ .Values.certificates.job.renewBefore }}
{{- range (include "zeroscaler.webhook.hosts" . | trim | splitList "\n") }}
- --host={{ . | trim }}
{{- end }}
{{- range .Values.certificates.job.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}
