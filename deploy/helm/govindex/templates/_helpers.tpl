{{/*
Names, labels and the pieces every pod shares. A helper taking `dict "root" $ ...` needs
the chart's root context beside its own arguments.
*/}}

{{/* The worker kinds, in the order their Deployments render. */}}
{{- define "govindex.kinds" -}}
{{- toJson (list "indexer" "deletions" "purger" "cdc" "webhooks" "reader" "admin") -}}
{{- end }}

{{/* The kinds with an HTTP listener of their own (container port `http`). */}}
{{- define "govindex.listeners" -}}
{{- toJson (list "webhooks" "reader" "admin") -}}
{{- end }}

{{- define "govindex.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* The release's full name: the release name alone when it already says govindex. */}}
{{- define "govindex.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* <fullname>-<component>; dict "root" $ "component" NAME. */}}
{{- define "govindex.componentName" -}}
{{- printf "%s-%s" (include "govindex.fullname" .root | trunc 40 | trimSuffix "-") .component | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "govindex.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "govindex.labels" -}}
helm.sh/chart: {{ include "govindex.chart" . }}
app.kubernetes.io/name: {{ include "govindex.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: govindex
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* dict "root" $ "component" NAME */}}
{{- define "govindex.componentLabels" -}}
{{ include "govindex.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* dict "root" $ "component" NAME: what a Deployment, Service or policy selects. */}}
{{- define "govindex.selectorLabels" -}}
app.kubernetes.io/name: {{ include "govindex.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* dict "root" $ "component" NAME: a pod's labels. */}}
{{- define "govindex.podLabels" -}}
{{ include "govindex.selectorLabels" . }}
app.kubernetes.io/part-of: govindex
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- with .root.Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "govindex.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end }}

{{- define "govindex.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "govindex.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{/* The chart-managed Secrets' names. */}}
{{- define "govindex.secretName" -}}
{{- include "govindex.fullname" . -}}
{{- end }}
{{- define "govindex.webhookSecretName" -}}
{{- include "govindex.componentName" (dict "root" . "component" "webhook-secrets") -}}
{{- end }}
{{- define "govindex.bootstrapSecretName" -}}
{{- include "govindex.componentName" (dict "root" . "component" "bootstrap") -}}
{{- end }}

{{/*
Every secret setting: its environment variable -> {value, existingSecret,
existingSecretKey} (JSON; read it with fromJson). Redis only while enabled.
*/}}
{{- define "govindex.secretSlots" -}}
{{- $s := .Values.secrets -}}
{{- $slots := dict "GOVINDEX_PG_DSN" $s.pgDsn "GOVINDEX_OPENSEARCH_URL" $s.opensearchUrl "GOVINDEX_READ_TOKENS" $s.readTokens "GOVINDEX_ADMIN_TOKEN" $s.adminToken "GOVINDEX_EMBEDDER_API_KEY" $s.embedderApiKey "GOVINDEX_OPENSEARCH_PASSWORD" $s.opensearchPassword "GOVINDEX_KAFKA_SASL_PASSWORD" $s.kafkaSaslPassword "GOVINDEX_KAFKA_SSL_KEY_PASSWORD" $s.kafkaSslKeyPassword -}}
{{- if $s.redisUrl.enabled -}}
{{- $_ := set $slots "GOVINDEX_REDIS_URL" $s.redisUrl -}}
{{- end -}}
{{- toJson $slots -}}
{{- end }}

{{/* What every process reads: the servers and their credentials (and an http:
embedder's key). */}}
{{- define "govindex.serverSecretNames" -}}
{{- toJson (list "GOVINDEX_PG_DSN" "GOVINDEX_OPENSEARCH_URL" "GOVINDEX_OPENSEARCH_PASSWORD" "GOVINDEX_KAFKA_SASL_PASSWORD" "GOVINDEX_KAFKA_SSL_KEY_PASSWORD" "GOVINDEX_REDIS_URL" "GOVINDEX_EMBEDDER_API_KEY") -}}
{{- end }}

{{/* The values the chart keeps in its Secret <fullname>: the slots given as `value`. */}}
{{- define "govindex.secretData" -}}
{{- $data := dict -}}
{{- range $env, $slot := include "govindex.secretSlots" . | fromJson -}}
{{- if and $slot.value (not $slot.existingSecret) -}}
{{- if kindIs "map" $slot.value -}}
{{- $_ := set $data $env (toJson $slot.value) -}}
{{- else -}}
{{- $_ := set $data $env (toString $slot.value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $data -}}
{{- end }}

{{/*
env entries for the named secret settings: dict "root" $ "names" LIST ["hook" true].
An existing Secret is read under its key; a value from the chart's Secret (the bootstrap
hook's own copy for the hook, which runs before the release's objects exist). A slot
with neither renders nothing (govindex.validate stops the install where it is required).
*/}}
{{- define "govindex.secretEnv" -}}
{{- $root := .root -}}
{{- $slots := include "govindex.secretSlots" $root | fromJson -}}
{{- $chartSecret := ternary (include "govindex.bootstrapSecretName" $root) (include "govindex.secretName" $root) (default false .hook) -}}
{{- range $env := .names }}
{{- $slot := get $slots $env }}
{{- if $slot }}
{{- if $slot.existingSecret }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $slot.existingSecret }}
      key: {{ $slot.existingSecretKey }}
{{- else if $slot.value }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $chartSecret }}
      key: {{ $env }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The shared ConfigMap's data (YAML): the settings that are not secret. */}}
{{- define "govindex.configData" -}}
GOVINDEX_NAMESPACE: {{ .Values.config.namespace | quote }}
GOVINDEX_PARTITIONS: {{ .Values.config.partitions | int | quote }}
GOVINDEX_KAFKA_BOOTSTRAP: {{ .Values.config.kafkaBootstrap | quote }}
GOVINDEX_METRICS_PORT: {{ .Values.config.metricsPort | int | quote }}
GOVINDEX_STATE_DIR: {{ .Values.config.stateDir | quote }}
HOME: {{ .Values.config.stateDir | quote }}
{{- range $name, $value := .Values.config.settings }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* The same settings as env entries (the bootstrap hook: the ConfigMap may not exist yet). */}}
{{- define "govindex.configEnv" -}}
{{- range $name, $value := include "govindex.configData" . | fromYaml }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}

{{/* Pod-level settings every pod shares. */}}
{{- define "govindex.podCommon" -}}
automountServiceAccountToken: false
# Service links would set GOVINDEX_ADMIN_PORT=tcp://... from the admin Service: a setting.
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}

{{/* dict "root" $ "w" WORKER: scheduling, the worker's own keys first. */}}
{{- define "govindex.scheduling" -}}
{{- $root := .root -}}
{{- $w := default dict .w -}}
{{- with default $root.Values.priorityClassName $w.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with default $root.Values.nodeSelector $w.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with default $root.Values.tolerations $w.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with default $root.Values.affinity $w.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with default $root.Values.topologySpreadConstraints $w.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The container's image, pull policy and security context. */}}
{{- define "govindex.containerCommon" -}}
image: {{ include "govindex.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end }}

{{/* dict "root" $ ["mirrors" SIZE] ["extra" LIST]: the writable emptyDirs. */}}
{{- define "govindex.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .root.Values.storage.tmpSizeLimit }}
- name: state
  emptyDir:
    sizeLimit: {{ .root.Values.storage.stateSizeLimit }}
{{- if .mirrors }}
- name: mirrors
  emptyDir:
    sizeLimit: {{ .mirrors }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "govindex.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: state
  mountPath: {{ .root.Values.config.stateDir }}
{{- if .mirrors }}
- name: mirrors
  mountPath: {{ printf "%s/mirrors" (trimSuffix "/" .root.Values.config.stateDir) }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* A Kubernetes name for a source id (lower case; a hash suffix when it had to change). */}}
{{- define "govindex.sourceName" -}}
{{- $clean := regexReplaceAll "[^a-z0-9-]+" (lower .id) "-" | trimAll "-" -}}
{{- $name := printf "%s-reconcile-%s" (include "govindex.fullname" .root | trunc 30 | trimSuffix "-") $clean -}}
{{- if or (ne $clean .id) (gt (len $name) 52) -}}
{{- printf "%s-%s" ($name | trunc 45 | trimSuffix "-") (sha256sum .id | trunc 6) -}}
{{- else -}}
{{- $name -}}
{{- end -}}
{{- end }}

{{/* dict "key" NAME "env" VARIABLE "spec" SLOT ["hint" TEXT]: one of existingSecret or value. */}}
{{- define "govindex.requireSecret" -}}
{{- if and .spec.value .spec.existingSecret -}}
{{- fail (printf "secrets.%s: set existingSecret or value, not both" .key) -}}
{{- end -}}
{{- $given := "" -}}
{{- if or .spec.existingSecret .spec.value -}}
{{- $given = "yes" -}}
{{- end -}}
{{- $_ := required (printf "secrets.%s: name an existing Secret holding %s (secrets.%s.existingSecret, read under secrets.%s.existingSecretKey), or give secrets.%s.value for the chart to keep in a Secret%s" .key .env .key .key .key (default "" .hint)) $given -}}
{{- end }}

{{/* dict "key" NAME "value" V: refuse placeholder text in a secret given inline. */}}
{{- define "govindex.noPlaceholder" -}}
{{- $text := "" -}}
{{- if kindIs "map" .value -}}
{{- $text = toJson .value -}}
{{- else -}}
{{- $text = toString .value -}}
{{- end -}}
{{- if regexMatch "(?i)(change|replace)[-_ ]?me" $text -}}
{{- fail (printf "%s holds placeholder text (CHANGE-ME): give the real secret, or name an existingSecret" .key) -}}
{{- end -}}
{{- end }}

{{/*
Every check of the values that a schema cannot say: what is required given what is
enabled. `required` names the value to set (helm lint reports it as a warning, an
install stops on it); `fail` stops on a contradiction.
*/}}
{{- define "govindex.validate" -}}
{{- $v := .Values -}}
{{- $w := $v.workers -}}
{{- $_ := required "config.kafkaBootstrap: set the Kafka bootstrap servers (host:port[,host:port...])" $v.config.kafkaBootstrap -}}
{{- include "govindex.requireSecret" (dict "key" "pgDsn" "env" "GOVINDEX_PG_DSN" "spec" $v.secrets.pgDsn) -}}
{{- include "govindex.requireSecret" (dict "key" "opensearchUrl" "env" "GOVINDEX_OPENSEARCH_URL" "spec" $v.secrets.opensearchUrl) -}}
{{- if $v.secrets.redisUrl.enabled -}}
{{- include "govindex.requireSecret" (dict "key" "redisUrl" "env" "GOVINDEX_REDIS_URL" "spec" $v.secrets.redisUrl "hint" "; or set secrets.redisUrl.enabled: false to run without the cache") -}}
{{- end -}}
{{- range $key := list "embedderApiKey" "opensearchPassword" "kafkaSaslPassword" "kafkaSslKeyPassword" -}}
{{- $slot := index $v.secrets $key -}}
{{- if and $slot.value $slot.existingSecret -}}
{{- fail (printf "secrets.%s: set existingSecret or value, not both" $key) -}}
{{- end -}}
{{- end -}}
{{- if $w.reader.enabled -}}
{{- if $w.reader.jwt.jwks -}}
{{- $_ := required "workers.reader.jwt.issuer: required with workers.reader.jwt.jwks" $w.reader.jwt.issuer -}}
{{- $_ := required "workers.reader.jwt.audience: required with workers.reader.jwt.jwks" $w.reader.jwt.audience -}}
{{- if and $v.secrets.readTokens.value $v.secrets.readTokens.existingSecret -}}
{{- fail "secrets.readTokens: set existingSecret or value, not both" -}}
{{- end -}}
{{- else -}}
{{- include "govindex.requireSecret" (dict "key" "readTokens" "env" "GOVINDEX_READ_TOKENS" "spec" $v.secrets.readTokens "hint" "; or set workers.reader.jwt.jwks (with issuer and audience) for JWTs") -}}
{{- end -}}
{{- end -}}
{{- if $w.admin.enabled -}}
{{- include "govindex.requireSecret" (dict "key" "adminToken" "env" "GOVINDEX_ADMIN_TOKEN" "spec" $v.secrets.adminToken) -}}
{{- end -}}
{{- if $w.webhooks.enabled -}}
{{- $given := "" -}}
{{- if or $v.secrets.webhookSecrets.existingSecret $v.secrets.webhookSecrets.values -}}
{{- $given = "yes" -}}
{{- end -}}
{{- $_ := required "secrets.webhookSecrets: the webhook receiver needs each git source's secret: name an existing Secret whose keys are the manifests' webhook_secret_env names (secrets.webhookSecrets.existingSecret), or give secrets.webhookSecrets.values (NAME: secret)" $given -}}
{{- end -}}
{{- range $env, $slot := include "govindex.secretSlots" . | fromJson -}}
{{- if and $slot.value (not $slot.existingSecret) -}}
{{- include "govindex.noPlaceholder" (dict "key" $env "value" $slot.value) -}}
{{- end -}}
{{- end -}}
{{- if and $v.secrets.adminToken.value (lt (len $v.secrets.adminToken.value) 16) -}}
{{- fail "secrets.adminToken.value: the admin token needs 16 characters or more" -}}
{{- end -}}
{{- range $name, $secret := $v.secrets.webhookSecrets.values -}}
{{- include "govindex.noPlaceholder" (dict "key" (printf "secrets.webhookSecrets.values.%s" $name) "value" $secret) -}}
{{- end -}}
{{- $listeners := include "govindex.listeners" . | fromJsonArray -}}
{{- range $kind := include "govindex.kinds" . | fromJsonArray -}}
{{- $worker := index $w $kind -}}
{{- if and (eq $worker.probePort "http") (not (has $kind $listeners)) -}}
{{- fail (printf "workers.%s.probePort: %s has no HTTP listener; use metrics" $kind $kind) -}}
{{- end -}}
{{- end -}}
{{- if and $v.keda.enabled (not $w.indexer.enabled) -}}
{{- fail "keda.enabled: KEDA scales the indexer, and workers.indexer.enabled is false" -}}
{{- end -}}
{{- end }}
