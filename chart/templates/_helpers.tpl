{{/*
The chart's shared definitions: names, ports and paths (each defined once here), labels,
images, security contexts, the cluster identity, the objects of files/, and the checks of the
network values JSON Schema cannot do. Object names are fixed (the components look them up by
name): one release per cluster.
*/}}

{{/* The namespace the RBAC and webhook files of files/ hard-code; rewritten to the release's. */}}
{{- define "liqo.filesNamespace" -}}liqo{{- end }}

{{/*
Ports and addresses of the components, by use. The gateway and route pods share the node's
network: their status and metrics servers listen on loopback only.
*/}}
{{- define "liqo.ports" -}}
{{- toJson (dict
  "managerMetrics" 9101
  "auth" 8443
  "authService" 443
  "authMetrics" 9102
  "ipam" 6000
  "ipamMetrics" 9106
  "gatewayStatus" 9107
  "overlayStatus" 9108
  "gatewayOperatorMetrics" 9110
  "routeOperatorMetrics" 9111
  "webhookService" 443
) -}}
{{- end }}

{{/* A port by name: include "liqo.port" "ipam". */}}
{{- define "liqo.port" -}}
{{- $ports := include "liqo.ports" . | fromJson -}}
{{- if not (hasKey $ports .) }}{{ fail (printf "chart bug: no port named %s" .) }}{{ end -}}
{{- index $ports . | int -}}
{{- end }}

{{/* Where the daemons' files and the mounted credentials live in the containers. */}}
{{- define "liqo.paths" -}}
{{- toJson (dict
  "gatewayDir" "/var/lib/liqo/gateway"
  "gatewayBase" "/etc/liqo/gateway-base"
  "overlayDir" "/var/lib/liqo/overlay"
  "overlayBase" "/etc/liqo/overlay-base"
  "ipamCredentials" "/etc/liqo/ipam"
  "ipamStateDir" "/var/lib/liqo-ipam"
  "kubeRootCA" "/etc/liqo/kube-root-ca"
  "vkKubeconfig" "/etc/liqo/virtual-kubelet"
  "vkToken" "/var/run/secrets/liqo/virtual-kubelet"
  "vkState" "/var/lib/liqo/virtual-kubelet"
  "saToken" "/var/run/secrets/kubernetes.io/serviceaccount"
) -}}
{{- end }}

{{- define "liqo.path" -}}
{{- $paths := include "liqo.paths" . | fromJson -}}
{{- if not (hasKey $paths .) }}{{ fail (printf "chart bug: no path named %s" .) }}{{ end -}}
{{- index $paths . -}}
{{- end }}

{{/* The images' tag: .Values.tag, else the chart's appVersion. */}}
{{- define "liqo.version" -}}
{{- .Values.tag | default .Chart.AppVersion -}}
{{- end }}

{{/* The image of a program: include "liqo.image" (dict "root" $ "program" "liqo-ipam"). */}}
{{- define "liqo.image" -}}
{{- $i := .root.Values.image -}}
{{- $repo := compact (list $i.registry $i.repositoryPrefix .program) | join "/" -}}
{{- printf "%s:%s" $repo (include "liqo.version" .root) -}}
{{- end }}

{{/* The labels a component's pods are selected by: (dict "root" $ "component" "ipam"). */}}
{{- define "liqo.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Every object's labels: (dict "root" $ "component" "ipam"). */}}
{{- define "liqo.labels" -}}
{{ include "liqo.selectorLabels" . }}
app.kubernetes.io/part-of: liqo
app.kubernetes.io/version: {{ include "liqo.version" .root | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* The pod security context of every pod. */}}
{{- define "liqo.podSecurityContext" -}}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* An unprivileged container: non-root, read-only root file system, no capability. */}}
{{- define "liqo.restrictedContainer" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* The group the unprivileged containers share: files of mounted Secrets are readable by it. */}}
{{- define "liqo.fsGroup" -}}65532{{- end }}

{{/* Keeps a pod off the virtual nodes (control::consts::labels::NODE_TYPE = virtual-node). */}}
{{- define "liqo.notOnVirtualNodes" -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - key: liqo.io/type
            operator: NotIn
            values: ["virtual-node"]
{{- end }}

{{/* The env var NODE_NAME (the operators' --node-name) from the downward API. */}}
{{- define "liqo.nodeNameEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}

{{/*
A pod whose privileged container must not hold the API token: the pod mounts none
(automountServiceAccountToken: false) and this volume gives the operator container the same
files the automatic mount would (token, CA, namespace).
*/}}
{{- define "liqo.apiTokenVolume" -}}
- name: api-token
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end }}

{{- define "liqo.apiTokenMount" -}}
- name: api-token
  mountPath: {{ include "liqo.path" "saToken" }}
  readOnly: true
{{- end }}

{{/*
liqo-ipam's address and credentials, as its clients take them: the CA and token of Secret
liqo-ipam-tls, which liqo-ipam makes at its first start (--tls-secret; until then the kubelet
retries the mount and the client's pod waits in ContainerCreating). Only those two keys: the
Secret also holds the serving key and the CA's key.
*/}}
{{- define "liqo.ipamClientArgs" -}}
- --ipam-address=https://liqo-ipam.{{ .Release.Namespace }}:{{ include "liqo.port" "ipam" }}
- --ipam-ca-file={{ include "liqo.path" "ipamCredentials" }}/ca.crt
- --ipam-token-file={{ include "liqo.path" "ipamCredentials" }}/token
{{- end }}

{{- define "liqo.ipamClientVolume" -}}
- name: ipam-credentials
  secret:
    secretName: liqo-ipam-tls
    defaultMode: 0440
    items:
      - key: ca.crt
        path: ca.crt
      - key: token
        path: token
{{- end }}

{{- define "liqo.ipamClientMount" -}}
- name: ipam-credentials
  mountPath: {{ include "liqo.path" "ipamCredentials" }}
  readOnly: true
{{- end }}

{{/* The cluster name: discovery.config.clusterName, required. */}}
{{- define "liqo.clusterName" -}}
{{- $name := .Values.discovery.config.clusterName -}}
{{- if not $name -}}
{{- fail "discovery.config.clusterName is required: the cluster's name (an RFC 1123 label, e.g. --set discovery.config.clusterName=rome)" -}}
{{- end -}}
{{- $name -}}
{{- end }}

{{/* The pod CIDR: networkManager.config.podCIDR, required. */}}
{{- define "liqo.podCIDR" -}}
{{- $cidr := .Values.networkManager.config.podCIDR -}}
{{- if not $cidr -}}
{{- fail "networkManager.config.podCIDR is required: the cluster's pod CIDR (e.g. --set networkManager.config.podCIDR=10.244.0.0/16)" -}}
{{- end -}}
{{- $cidr -}}
{{- end }}

{{/*
The cluster ID: discovery.config.clusterIDOverride, else the one the existing identity
ConfigMap holds (lookup: an upgrade keeps it; a render without cluster access finds none), else
a fresh UUIDv4. Rendered once per release render (the identity ConfigMap is its only user).
*/}}
{{- define "liqo.clusterID" -}}
{{- $override := .Values.discovery.config.clusterIDOverride -}}
{{- if $override -}}
{{- $override -}}
{{- else -}}
{{- $existing := lookup "v1" "ConfigMap" .Release.Namespace "liqo-clusterid-configmap" | default dict -}}
{{- dig "data" "CLUSTER_ID" "" $existing | default uuidv4 -}}
{{- end -}}
{{- end }}

{{/* --cluster-labels: k=v,... in key order. */}}
{{- define "liqo.clusterLabels" -}}
{{- $labels := .Values.discovery.config.clusterLabels -}}
{{- $pairs := list -}}
{{- range $k := keys $labels | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%s" $k (index $labels $k)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end }}

{{/*
The range of an IPv4 CIDR as JSON {"first": n, "last": m} (integers), refusing host bits; the
error names the value's key path: include "liqo.cidrRange" (dict "path" "ipam.externalCIDR"
"cidr" "10.70.0.0/16"). The schema has checked the notation already.
*/}}
{{- define "liqo.cidrRange" -}}
{{- $parts := splitList "/" .cidr -}}
{{- $o := splitList "." (first $parts) -}}
{{- $ip := add (mul (atoi (index $o 0)) 16777216) (mul (atoi (index $o 1)) 65536) (mul (atoi (index $o 2)) 256) (atoi (index $o 3)) -}}
{{- $prefix := atoi (last $parts) -}}
{{- $size := 1 -}}
{{- range until (sub 32 $prefix | int) }}{{ $size = mul $size 2 }}{{ end -}}
{{- $first := sub $ip (mod $ip $size) -}}
{{- if ne $first $ip -}}
{{- $net := printf "%d.%d.%d.%d/%d" (div $first 16777216) (mod (div $first 65536) 256) (mod (div $first 256) 256) (mod $first 256) $prefix -}}
{{- fail (printf "%s %s has host bits set (the network is %s)" .path .cidr $net) -}}
{{- end -}}
{{- toJson (dict "first" $first "last" (sub (add $first $size) 1)) -}}
{{- end }}

{{/*
Refuses overlapping ranges of `entries` (a list of dicts with "path" and "cidr"), naming both:
a later entry is named first ("<path> <cidr> overlaps <path> <cidr>"). `against` (optional,
dicts with "what" and "cidr") are ranges each entry is also compared with, named by "what".
*/}}
{{- define "liqo.noOverlaps" -}}
{{- $seen := list -}}
{{- range $e := .entries -}}
{{- $r := include "liqo.cidrRange" $e | fromJson -}}
{{- range $s := $seen -}}
{{- if and (le (int64 $r.first) (int64 $s.range.last)) (le (int64 $s.range.first) (int64 $r.last)) -}}
{{- fail (printf "%s %s overlaps %s %s" $e.path $e.cidr $s.path $s.cidr) -}}
{{- end -}}
{{- end -}}
{{- $seen = append $seen (dict "path" $e.path "cidr" $e.cidr "range" $r) -}}
{{- end -}}
{{- $against := .against | default list -}}
{{- range $e := .entries -}}
{{- $r := include "liqo.cidrRange" $e | fromJson -}}
{{- range $a := $against -}}
{{- $ar := include "liqo.cidrRange" (dict "path" $a.what "cidr" $a.cidr) | fromJson -}}
{{- if and (le (int64 $r.first) (int64 $ar.last)) (le (int64 $ar.first) (int64 $r.last)) -}}
{{- fail (printf "%s %s overlaps %s %s" $e.path $e.cidr $a.what $a.cidr) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The network values' checks JSON Schema cannot do: host bits, and overlaps between the pod,
service and external CIDRs and the reserved subnets (each with each), and between the
additional pools and each other or liqo-ipam's default pools (which it refuses too).
*/}}
{{- define "liqo.checkNetworks" -}}
{{- $nm := .Values.networkManager.config -}}
{{- $local := list -}}
{{- $pod := include "liqo.podCIDR" . -}}
{{- if $pod }}{{ $local = append $local (dict "path" "networkManager.config.podCIDR" "cidr" $pod) }}{{ end -}}
{{- if $nm.serviceCIDR }}{{ $local = append $local (dict "path" "networkManager.config.serviceCIDR" "cidr" $nm.serviceCIDR) }}{{ end -}}
{{- if .Values.ipam.externalCIDR }}{{ $local = append $local (dict "path" "ipam.externalCIDR" "cidr" .Values.ipam.externalCIDR) }}{{ end -}}
{{- range $i, $c := $nm.reservedSubnets }}{{ $local = append $local (dict "path" (printf "networkManager.config.reservedSubnets[%d]" $i) "cidr" $c) }}{{ end -}}
{{- include "liqo.noOverlaps" (dict "entries" $local) -}}
{{- $pools := list -}}
{{- range $i, $c := $nm.additionalPools }}{{ $pools = append $pools (dict "path" (printf "networkManager.config.additionalPools[%d]" $i) "cidr" $c) }}{{ end -}}
{{- $defaults := list -}}
{{- range $c := list "10.0.0.0/8" "172.16.0.0/12" "192.168.0.0/16" }}{{ $defaults = append $defaults (dict "what" "the default pool" "cidr" $c) }}{{ end -}}
{{- include "liqo.noOverlaps" (dict "entries" $pools "against" $defaults) -}}
{{- end }}

{{/*
The objects of a file of files/ (the test kit applies the same files as they are), each with the
chart's labels added and every namespace the file hard-codes (liqo) replaced by the release's:
metadata.namespace, RBAC subjects, webhook services. A webhook's service port becomes the
Service's (443), and its failurePolicy `failurePolicy` when given.
include "liqo.fileObjects" (dict "root" $ "file" "files/x.yaml" "component" "auth")
*/}}
{{- define "liqo.fileObjects" -}}
{{- $root := .root -}}
{{- $ns := include "liqo.filesNamespace" . -}}
{{- $text := $root.Files.Get .file -}}
{{- if not $text }}{{ fail (printf "chart bug: %s is missing or empty" .file) }}{{ end -}}
{{- $labels := include "liqo.labels" (dict "root" $root "component" .component) | fromYaml -}}
{{- $ctx := . -}}
{{- range $doc := regexSplit "(?m)^---[ \\t]*$" $text -1 }}
{{- $obj := fromYaml $doc }}
{{- if hasKey $obj "Error" }}{{ fail (printf "chart bug: %s does not parse: %s" $ctx.file $obj.Error) }}{{ end }}
{{- if $obj }}
{{- $md := $obj.metadata }}
{{- $_ := set $md "labels" (merge (dict) ($md.labels | default dict) $labels) }}
{{- if eq ($md.namespace | default "") $ns }}{{ $_ := set $md "namespace" $root.Release.Namespace }}{{ end }}
{{- range $s := $obj.subjects | default list }}
{{- if eq ($s.namespace | default "") $ns }}{{ $_ := set $s "namespace" $root.Release.Namespace }}{{ end }}
{{- end }}
{{- range $w := $obj.webhooks | default list }}
{{- $svc := $w.clientConfig.service }}
{{- if eq ($svc.namespace | default "") $ns }}{{ $_ := set $svc "namespace" $root.Release.Namespace }}{{ end }}
{{- $_ := set $svc "port" (include "liqo.port" "webhookService" | int) }}
{{- if $ctx.failurePolicy }}{{ $_ := set $w "failurePolicy" $ctx.failurePolicy }}{{ end }}
{{- end }}
---
# From {{ $ctx.file }}.
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{/*
ServiceAccount `name` in the release namespace and ClusterRoleBinding `name` binding it to the
ClusterRole of the same name (from files/): (dict "root" $ "name" "liqo-auth" "component" "auth").
*/}}
{{- define "liqo.serviceAccountBound" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "liqo.labels" . | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "liqo.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}
