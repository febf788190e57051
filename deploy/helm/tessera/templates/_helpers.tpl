{{/*
Names and labels. Component templates receive a context built in component.yaml:
  .root  the chart's top-level context ($)
  .name  the component's key in .Values.components
  .c     the component's values
*/}}

{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-scoped base name; component objects append "-<component>". */}}
{{- define "tessera.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tessera.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Name of a component's objects; argument: (list $root "component-name"). */}}
{{- define "tessera.componentName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "tessera.fullname" $root) (index . 1) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels; argument: (list $root "component-name"). Immutable once deployed. */}}
{{- define "tessera.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "tessera.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* The recommended labels; argument: (list $root "component-name"). */}}
{{- define "tessera.labels" -}}
helm.sh/chart: {{ include "tessera.chart" (index . 0) }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ (index . 0).Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tessera
app.kubernetes.io/managed-by: {{ (index . 0).Release.Service }}
{{- end }}

{{- define "tessera.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tessera.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tessera.image" -}}
{{- $image := .root.Values.image }}
{{- $override := .c.image | default dict }}
{{- $repository := $override.repository | default $image.repository }}
{{- $tag := $override.tag | default $image.tag | default .root.Chart.AppVersion }}
{{- printf "%s:%s" $repository (toString $tag) }}
{{- end }}

{{- define "tessera.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "tessera.fullname" .)) }}
{{- end }}

{{- define "tessera.modelsConfigMapName" -}}
{{- printf "%s-models" (include "tessera.fullname" .) }}
{{- end }}

{{- define "tessera.modelsClaimName" -}}
{{- .Values.models.pvc.existingClaim | default (printf "%s-models" (include "tessera.fullname" .)) }}
{{- end }}

{{/* Where model directories are found inside a container. */}}
{{- define "tessera.modelsRoot" -}}
{{- if eq .Values.models.source "pvc" }}{{ .Values.models.mountPath }}{{ else }}{{ .Values.models.imagePath }}{{ end }}
{{- end }}

{{/* The models config with every relative model_dir placed under the models root. */}}
{{- define "tessera.modelsConfigJson" -}}
{{- $root := include "tessera.modelsRoot" . }}
{{- $config := deepCopy .Values.models.config }}
{{- $models := list }}
{{- range $config.models }}
{{- $model := . }}
{{- if and .model_dir (not (isAbs .model_dir)) }}
{{- $model = set . "model_dir" (printf "%s/%s" (trimSuffix "/" $root) (trimPrefix "./" .model_dir)) }}
{{- end }}
{{- $models = append $models $model }}
{{- end }}
{{- $_ := set $config "models" $models }}
{{- toPrettyJson $config }}
{{- end }}

{{- define "tessera.natsDevName" -}}
{{- printf "%s-nats" (include "tessera.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* True ("true") when at least one enabled component runs in distributed mode. */}}
{{- define "tessera.distributed" -}}
{{- range $name, $c := .Values.components }}
{{- if and $c.enabled (not $c.embedded) }}true{{ end }}
{{- end }}
{{- end }}

{{/* Does a component serve a service? argument: (list $c "accounting"). */}}
{{- define "tessera.serves" -}}
{{- $c := index . 0 }}
{{- if and (not $c.embedded) (has (index . 1) $c.args) }}true{{ end }}
{{- end }}

{{/*
The first enabled, distributed component that serves a service; its Service is that
service's Connect address. argument: (list $root "accounting").
*/}}
{{- define "tessera.serviceUrl" -}}
{{- $root := index . 0 }}
{{- $service := index . 1 }}
{{- $found := "" }}
{{- range $name, $c := $root.Values.components }}
{{- if and (not $found) $c.enabled (include "tessera.serves" (list $c $service)) }}
{{- $found = printf "http://%s:%v" (include "tessera.componentName" (list $root $name)) $c.service.port }}
{{- end }}
{{- end }}
{{- $found }}
{{- end }}

{{/*
The container's environment: what the chart wires (listen address, paths, NATS, Connect
addresses, secrets), then default.env and the component's env merged over it by name, in
name order (so POD_IP precedes the TESSERA_ADVERTISE_URL that refers to it), then extraEnv.
*/}}
{{- define "tessera.env" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- $secret := include "tessera.authSecretName" $root }}
{{- $env := dict }}
{{- $_ := set $env "TESSERA_HOST" (dict "value" "0.0.0.0") }}
{{- $_ := set $env "TESSERA_PORT" (dict "value" (toString $c.port)) }}
{{- if $c.opsPort }}
{{- $_ := set $env "TESSERA_OPS_PORT" (dict "value" (toString $c.opsPort)) }}
{{- end }}
{{- $_ := set $env "TESSERA_LOG_LEVEL" (dict "value" $root.Values.logLevel) }}
{{- $_ := set $env "TESSERA_DATA_DIR" (dict "value" "/data") }}
{{- $_ := set $env "TESSERA_MODELS_CONFIG" (dict "value" "/etc/tessera/models.config.json") }}
{{- if or $c.embedded (has "gateway" $c.args) }}
{{- $_ := set $env "TESSERA_PLAYGROUND" (dict "value" (ternary "on" "off" (ne $root.Values.playground false))) }}
{{- end }}
{{- if or $c.embedded (has "accounting" $c.args) }}
{{- $_ := set $env "TESSERA_BOOTSTRAP_KEY" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" $root.Values.auth.secretKeys.bootstrapKey "optional" true))) }}
{{- end }}
{{- /* Only accounting checks the admin credential; other processes never hold it. */}}
{{- if and (not $c.embedded) (has "accounting" $c.args) }}
{{- $_ := set $env "TESSERA_ADMIN_TOKEN" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" $root.Values.auth.secretKeys.adminToken))) }}
{{- end }}
{{- if not $c.embedded }}
{{- if $root.Values.natsDev.enabled }}
{{- $_ := set $env "TESSERA_NATS_URL" (dict "value" (printf "nats://%s:4222" (include "tessera.natsDevName" $root))) }}
{{- else if $root.Values.nats.existingSecret }}
{{- $_ := set $env "TESSERA_NATS_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $root.Values.nats.existingSecret "key" $root.Values.nats.existingSecretKey))) }}
{{- else }}
{{- $_ := set $env "TESSERA_NATS_URL" (dict "value" $root.Values.nats.url) }}
{{- end }}
{{- range $service := list "accounting" "registry" "decision" }}
{{- $url := include "tessera.serviceUrl" (list $root $service) }}
{{- if $url }}
{{- $_ := set $env (printf "TESSERA_%s_URL" (upper $service)) (dict "value" $url) }}
{{- end }}
{{- end }}
{{- if has "inference" $c.args }}
{{- $_ := set $env "POD_IP" (dict "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) }}
{{- $_ := set $env "POD_NAME" (dict "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) }}
{{- $_ := set $env "TESSERA_ADVERTISE_URL" (dict "value" (printf "http://$(POD_IP):%v" $c.port)) }}
{{- $_ := set $env "TESSERA_WORKER_ID" (dict "value" "$(POD_NAME)") }}
{{- end }}
{{- end }}
{{- range $name, $value := merge (deepCopy ($c.env | default dict)) (deepCopy ($root.Values.default.env | default dict)) }}
{{- $_ := set $env $name (dict "value" (toString $value)) }}
{{- end }}
{{- range $name := keys $env | sortAlpha }}
- name: {{ $name }}
  {{- toYaml (get $env $name) | nindent 2 }}
{{- end }}
{{- with concat ($root.Values.default.extraEnv | default list) ($c.extraEnv | default list) }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Rules that a JSON schema cannot state (they relate several values); each failure stops the
render with a message that names the values to change.
*/}}
{{- define "tessera.validate" -}}
{{- $root := . }}
{{- range $name, $c := .Values.components }}
{{- if $c.enabled }}
{{- if and $c.embedded (gt (int $c.replicas) 1) }}
{{- fail (printf "components.%s: an embedded component keeps its state in one LMDB directory and runs one replica; set replicas: 1 or use the distributed components with NATS" $name) }}
{{- end }}
{{- if and $c.embedded $c.autoscaling $c.autoscaling.enabled }}
{{- fail (printf "components.%s: an embedded component cannot autoscale; set autoscaling.enabled: false" $name) }}
{{- end }}
{{- if and $c.autoscaling $c.autoscaling.enabled (lt (int $c.autoscaling.maxReplicas) (int $c.autoscaling.minReplicas)) }}
{{- fail (printf "components.%s.autoscaling: maxReplicas (%v) is below minReplicas (%v)" $name $c.autoscaling.maxReplicas $c.autoscaling.minReplicas) }}
{{- end }}
{{- if and (not $c.embedded) (not $root.Values.natsDev.enabled) (not $root.Values.nats.url) (not $root.Values.nats.existingSecret) }}
{{- fail (printf "components.%s runs in distributed mode and needs NATS: set nats.url (or nats.existingSecret), or natsDev.enabled=true for development" $name) }}
{{- end }}
{{- if and (has "gateway" $c.args) (not $c.embedded) }}
{{- range $needed := list "accounting" "registry" "decision" }}
{{- if and (not (include "tessera.serviceUrl" (list $root $needed))) (not (hasKey ($c.env | default dict) (printf "TESSERA_%s_URL" (upper $needed)))) }}
{{- fail (printf "components.%s (gateway) needs the %s service: enable a component that serves it, or set components.%s.env.TESSERA_%s_URL" $name $needed $name (upper $needed)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A probe (list probe component): one on port `http` moves to port `ops` where the component
has an opsPort, so probes never queue behind clients' connections.
*/}}
{{- define "tessera.probe" -}}
{{- $probe := deepCopy (index . 0) }}
{{- $c := index . 1 }}
{{- if and $c.opsPort $probe.httpGet (eq (toString $probe.httpGet.port) "http") }}
{{- $_ := set $probe.httpGet "port" "ops" }}
{{- end }}
{{- toYaml $probe }}
{{- end }}
