{{/* Names and labels shared by the templates. */}}

{{- define "shoal.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name, with the chart name appended unless it already contains it. */}}
{{- define "shoal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shoal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shoal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* What the scheduler names its lease and state after: the scheduler name, with the node pool
appended when the release serves one (`shoal run --node-pool`, docs/kubernetes.md). */}}
{{- define "shoal.component" -}}
{{- if .Values.nodePool.value -}}
{{- printf "%s-%s" .Values.schedulerName .Values.nodePool.value -}}
{{- else -}}
{{- .Values.schedulerName -}}
{{- end -}}
{{- end -}}

{{- define "shoal.configMapName" -}}
{{- printf "%s-config" (include "shoal.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shoal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shoal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "shoal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "shoal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* GPU sharing with reservation pods (modes reservation and fractioning). */}}
{{- define "shoal.reservations" -}}
{{- if has .Values.gpuSharing.mode (list "reservation" "fractioning") -}}true{{- end -}}
{{- end -}}

{{- define "shoal.webhookName" -}}
{{- printf "%s-webhook" (include "shoal.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The webhook's pods carry a name of their own, so the scheduler's selector never matches them. */}}
{{- define "shoal.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-webhook" (include "shoal.name" .) }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shoal.webhookLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "shoal.webhookSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "shoal.webhookDefaultQueue" -}}
{{- if .Values.webhook.defaultQueue -}}
{{- .Values.webhook.defaultQueue -}}
{{- else if .Values.defaultQueues.create -}}
{{- .Values.defaultQueues.name -}}
{{- end -}}
{{- end -}}

{{/* One webhook's client, policy and namespaces (dict: name, ns, path, bundle, values = .Values.webhook). */}}
{{- define "shoal.webhookClient" }}
    clientConfig:
      service:
        name: {{ .name }}
        namespace: {{ .ns }}
        path: {{ .path }}
        port: 443
      {{- with .bundle }}
      caBundle: {{ . }}
      {{- end }}
    failurePolicy: {{ .values.failurePolicy }}
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: {{ .values.timeoutSeconds }}
    namespaceSelector:
      {{- with .values.namespaceSelector.matchLabels }}
      matchLabels:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      matchExpressions:
        {{- with .values.namespaceSelector.matchExpressions }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values: [kube-system, kai-resource-reservation]
{{- end }}

{{/* The Secret the webhook serves from: the user's (certificate.source=secret) or the chart's / cert-manager's. */}}
{{- define "shoal.webhookSecretName" -}}
{{- if eq .Values.webhook.certificate.source "secret" -}}
{{- required "webhook.certificate.existingSecret is required with webhook.certificate.source=secret" .Values.webhook.certificate.existingSecret -}}
{{- else -}}
{{- printf "%s-tls" (include "shoal.webhookName" .) -}}
{{- end -}}
{{- end -}}
