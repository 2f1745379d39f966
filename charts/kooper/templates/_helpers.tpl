{{/*
Names and labels. Kubernetes names and label values are limited to 63 characters
(DNS-1123 labels), so every generated name is truncated to 63 and stripped of a
trailing "-" that truncation may leave behind.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "kooper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release name as a name part: Helm accepts dots in release names ("my.release"),
but a Service name is a DNS-1035 label (lowercase letters, digits and "-" only), so
every generated name uses "-" where the release name has "." ("my-release-kooper"
for every object, not just the Service). Labels keep the release name as it is.
*/}}
{{- define "kooper.releaseName" -}}
{{- .Release.Name | replace "." "-" -}}
{{- end -}}

{{/*
The fully qualified app name: fullnameOverride, else "<release>-<chart>", or just
the release name when it already contains the chart name (release "kooper" gives
"kooper", not "kooper-kooper"); a dotted release name with "-" for "." (above).
*/}}
{{- define "kooper.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- $release := include "kooper.releaseName" . -}}
{{- if contains $name $release -}}
{{- $release | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" $release $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A name with a suffix ("<fullname>-<suffix>"): the fullname is cut first so the
suffix survives truncation and two components never collide.
*/}}
{{- define "kooper.suffixed" -}}
{{- $suffix := index . 1 -}}
{{- $base := include "kooper.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" -}}
{{- printf "%s-%s" $base $suffix -}}
{{- end -}}

{{/*
The name of a Service ("<fullname>-<suffix>"). Services are DNS-1035 labels: they
must start with a letter, which a release name ("1st") need not. No silent rewrite
there: the render fails with what to do instead.
*/}}
{{- define "kooper.serviceName" -}}
{{- $name := include "kooper.suffixed" . -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "the Service name %q is not a DNS-1035 label (it must start with a letter): install under a release name that starts with a letter, or set fullnameOverride" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/*
The leader-election Lease of this release ("<fullname>-operator-leader", in the release
namespace; `kooper run --leader-lease`): two releases in one namespace never share it.
Release "kooper" keeps the name every earlier chart used, kooper-operator-leader.
*/}}
{{- define "kooper.leaderLease" -}}
{{- include "kooper.suffixed" (list . "operator-leader") -}}
{{- end -}}

{{/* The kopf peering name (and peering object): kopfPeering.name, else the full name. */}}
{{- define "kooper.peeringName" -}}
{{- default (include "kooper.fullname" .) .Values.kopfPeering.name -}}
{{- end -}}

{{/*
The name of a cluster-scoped object of this release ("<fullname>-<release namespace>",
plus "-<suffix>" when given). Release names are per namespace, so the same release
name in two namespaces must not share (or overwrite) a ClusterRole or an admission
policy. Too long for 63 characters: the cut base ends in a hash of the whole.
*/}}
{{- define "kooper.clusterScoped" -}}
{{- $ctx := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $base := printf "%s-%s" (include "kooper.fullname" $ctx) $ctx.Release.Namespace -}}
{{- $tail := ternary "" (printf "-%s" $suffix) (eq $suffix "") -}}
{{- if le (len (printf "%s%s" $base $tail)) 63 -}}
{{- printf "%s%s" $base $tail -}}
{{- else -}}
{{- $cut := $base | trunc (int (sub 54 (len $tail))) | trimSuffix "-" -}}
{{- printf "%s-%s%s" $cut (sha256sum $base | trunc 8) $tail -}}
{{- end -}}
{{- end -}}

{{/* chart label value: "<name>-<version>", "+" is not allowed in label values. */}}
{{- define "kooper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object of the release, without the component. */}}
{{- define "kooper.commonLabels" -}}
helm.sh/chart: {{ include "kooper.chart" . }}
app.kubernetes.io/name: {{ include "kooper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kooper
{{- end -}}

{{/* Labels of the operator's objects. */}}
{{- define "kooper.labels" -}}
{{ include "kooper.commonLabels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* Labels of the objects that member pods use (worker ServiceAccount, Role, policy). */}}
{{- define "kooper.workerLabels" -}}
{{ include "kooper.commonLabels" . }}
app.kubernetes.io/component: worker
{{- end -}}

{{/* Labels of the CRDs. */}}
{{- define "kooper.crdLabels" -}}
{{ include "kooper.commonLabels" . }}
app.kubernetes.io/component: crd
{{- end -}}

{{/* Labels that select the operator pod (never change them: selectors are immutable). */}}
{{- define "kooper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kooper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The operator's service account name: serviceAccount.name, else the full name, whether
the chart creates it or not. Never the namespace's "default": that would hand the
operator's rights to every pod there that names no account. */}}
{{- define "kooper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kooper.fullname" .) .Values.serviceAccount.name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- default (include "kooper.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces where member pods run: workers.namespaces, else the one namespace the
operator watches (the release namespace by default, and when it watches all). */}}
{{- define "kooper.workerNamespaces" -}}
{{- if .Values.workers.namespaces -}}
{{- toJson .Values.workers.namespaces -}}
{{- else -}}
{{- toJson (list (include "kooper.watchNamespace" . | default .Release.Namespace)) -}}
{{- end -}}
{{- end -}}

{{/* The operator image reference: a digest wins over a tag. */}}
{{- define "kooper.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Contradictory values fail the render with a message (values.schema.json catches the rest). */}}
{{- /* The namespace the operator watches: "" when it watches all of them. */ -}}
{{- define "kooper.watchNamespace" -}}
{{- if .Values.operator.watchAllNamespaces -}}
{{- else -}}
{{- default .Release.Namespace .Values.operator.watchNamespace -}}
{{- end -}}
{{- end -}}

{{- define "kooper.validateValues" -}}
{{- if and .Values.operator.watchAllNamespaces .Values.operator.watchNamespace -}}
{{- fail "operator.watchAllNamespaces and operator.watchNamespace contradict each other: set one" -}}
{{- end -}}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) -}}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor scrapes that Service" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount above 1 needs leaderElection.enabled: without it every replica would run the rounds" -}}
{{- end -}}
{{- if and .Values.kopfPeering.enabled (gt (int .Values.replicaCount) 1) -}}
{{- fail "kopfPeering.enabled needs replicaCount: 1: kopf pauses every peer while the highest priority is shared, and all replicas run with the same one (leader election is what keeps a hot standby)" -}}
{{- end -}}
{{- range $key, $_ := include "kooper.selectorLabels" . | fromYaml -}}
{{- if hasKey ($.Values.operator.podLabels | default dict) $key -}}
{{- fail (printf "operator.podLabels must not set %s: the chart sets it, and the Deployment's selector (immutable) matches it" $key) -}}
{{- end -}}
{{- end -}}
{{- if eq (int .Values.operator.healthPort) (int .Values.metrics.port) -}}
{{- fail "operator.healthPort and metrics.port must differ: the operator serves /healthz and /metrics on separate ports" -}}
{{- end -}}
{{- end -}}
