{{/*
The objects of one component. Each define takes the context built in component.yaml
(.root, .name, .c); a component's own setting wins over .root.Values.default.
*/}}

{{- define "tessera.deployment" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- $d := $root.Values.default }}
{{- $fullName := include "tessera.componentName" (list $root .name) }}
{{- $persistent := and $c.persistence $c.persistence.enabled }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
spec:
  {{- if not (and $c.autoscaling $c.autoscaling.enabled) }}
  replicas: {{ $c.replicas }}
  {{- end }}
  revisionHistoryLimit: {{ $c.revisionHistoryLimit | default $d.revisionHistoryLimit }}
  {{- if or $c.embedded $persistent }}
  # One process owns the data directory: stop the old pod before the new one starts.
  strategy:
    type: Recreate
  {{- else if $c.strategy }}
  strategy:
    {{- toYaml $c.strategy | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "tessera.selectorLabels" (list $root .name) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "tessera.labels" (list $root .name) | nindent 8 }}
        {{- with merge (deepCopy ($c.podLabels | default dict)) ($d.podLabels | default dict) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/models-config: {{ include "tessera.modelsConfigJson" $root | sha256sum }}
        checksum/auth: {{ toJson $root.Values.auth | sha256sum }}
        {{- if $root.Values.metrics.podAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $c.opsPort | default $c.port | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with merge (deepCopy ($c.podAnnotations | default dict)) ($d.podAnnotations | default dict) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "tessera.serviceAccountName" $root }}
      automountServiceAccountToken: false
      {{- with $root.Values.image.pullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $c.runtimeClassName }}
      runtimeClassName: {{ . }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $c.terminationGracePeriodSeconds | default $d.terminationGracePeriodSeconds }}
      securityContext:
        {{- toYaml ($c.podSecurityContext | default $d.podSecurityContext) | nindent 8 }}
      {{- with $c.nodeSelector | default $d.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations | default $d.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity | default $d.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.topologySpreadConstraints | default $d.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .name }}
          image: {{ include "tessera.image" . | quote }}
          imagePullPolicy: {{ ($c.image | default dict).pullPolicy | default $root.Values.image.pullPolicy }}
          args:
            {{- toYaml $c.args | nindent 12 }}
          ports:
            - name: http
              containerPort: {{ $c.port }}
              protocol: TCP
            {{- if $c.opsPort }}
            - name: ops
              containerPort: {{ $c.opsPort }}
              protocol: TCP
            {{- end }}
          env:
            {{- include "tessera.env" . | trim | nindent 12 }}
          livenessProbe:
            {{- include "tessera.probe" (list ($c.livenessProbe | default $d.livenessProbe) $c) | nindent 12 }}
          readinessProbe:
            {{- include "tessera.probe" (list ($c.readinessProbe | default $d.readinessProbe) $c) | nindent 12 }}
          {{- with $c.startupProbe | default $d.startupProbe }}
          startupProbe:
            {{- include "tessera.probe" (list . $c) | nindent 12 }}
          {{- end }}
          {{- with $c.lifecycle }}
          lifecycle:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          securityContext:
            {{- toYaml ($c.securityContext | default $d.securityContext) | nindent 12 }}
          volumeMounts:
            - name: data
              mountPath: /data
            - name: tmp
              mountPath: /tmp
            - name: models-config
              mountPath: /etc/tessera
              readOnly: true
            {{- if and $c.mountModels (eq $root.Values.models.source "pvc") }}
            - name: models
              mountPath: {{ $root.Values.models.mountPath }}
              readOnly: true
            {{- end }}
      volumes:
        - name: data
          {{- if $persistent }}
          persistentVolumeClaim:
            claimName: {{ $c.persistence.existingClaim | default (printf "%s-data" $fullName) }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        - name: tmp
          emptyDir: {}
        - name: models-config
          configMap:
            name: {{ include "tessera.modelsConfigMapName" $root }}
        {{- if and $c.mountModels (eq $root.Values.models.source "pvc") }}
        - name: models
          persistentVolumeClaim:
            claimName: {{ include "tessera.modelsClaimName" $root }}
            readOnly: true
        {{- end }}
{{- end }}

{{- define "tessera.service" -}}
{{- $root := .root }}
{{- $c := .c }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "tessera.componentName" (list $root .name) }}
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
  {{- with $c.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $c.service.type | default "ClusterIP" }}
  ports:
    # HTTP/1.1 and h2c: REST on the gateway, Connect, gRPC and gRPC-Web on every service.
    - name: http
      port: {{ $c.service.port }}
      targetPort: http
      protocol: TCP
  selector:
    {{- include "tessera.selectorLabels" (list $root .name) | nindent 4 }}
{{- end }}

{{- define "tessera.hpa" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- if and $c.autoscaling $c.autoscaling.enabled }}
{{- $fullName := include "tessera.componentName" (list $root .name) }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $fullName }}
  minReplicas: {{ $c.autoscaling.minReplicas }}
  maxReplicas: {{ $c.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $c.autoscaling.targetCPUUtilizationPercentage }}
    {{- with $c.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
    {{- with $c.autoscaling.extraMetrics }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $c.autoscaling.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{- define "tessera.pdb" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- if and $c.podDisruptionBudget $c.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "tessera.componentName" (list $root .name) }}
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
spec:
  {{- if hasKey $c.podDisruptionBudget "minAvailable" }}
  minAvailable: {{ $c.podDisruptionBudget.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $c.podDisruptionBudget.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "tessera.selectorLabels" (list $root .name) | nindent 6 }}
{{- end }}
{{- end }}

{{- define "tessera.dataClaim" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- if and $c.persistence $c.persistence.enabled (not $c.persistence.existingClaim) }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "tessera.componentName" (list $root .name) }}-data
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
  {{- if $c.persistence.keep }}
  annotations:
    helm.sh/resource-policy: keep
  {{- end }}
spec:
  accessModes:
    {{- toYaml ($c.persistence.accessModes | default (list "ReadWriteOnce")) | nindent 4 }}
  {{- with $c.persistence.storageClass }}
  storageClassName: {{ . | quote }}
  {{- end }}
  resources:
    requests:
      storage: {{ $c.persistence.size | quote }}
{{- end }}
{{- end }}

{{- define "tessera.ingress" -}}
{{- $root := .root }}
{{- $c := .c }}
{{- if and $c.ingress $c.ingress.enabled }}
{{- $fullName := include "tessera.componentName" (list $root .name) }}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "tessera.labels" (list $root .name) | nindent 4 }}
  {{- with $c.ingress.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with $c.ingress.className }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- with $c.ingress.tls }}
  tls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  rules:
    {{- range $c.ingress.hosts }}
    - host: {{ .host | quote }}
      http:
        paths:
          {{- range .paths }}
          - path: {{ .path }}
            pathType: {{ .pathType | default "Prefix" }}
            backend:
              service:
                name: {{ $fullName }}
                port:
                  name: http
          {{- end }}
    {{- end }}
{{- end }}
{{- end }}
