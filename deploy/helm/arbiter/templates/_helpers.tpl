{{/* The release's name prefix of every object. */}}
{{- define "arbiter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "arbiter.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include with (list $ "web"). */}}
{{- define "arbiter.selector" -}}
app.kubernetes.io/name: {{ (index . 0).Chart.Name }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "arbiter.serviceAccountName" -}}
{{- default (include "arbiter.fullname" .) .Values.kube.serviceAccountName -}}
{{- end -}}

{{- define "arbiter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* Every pod's environment: the plain settings, then each secret key by reference. */}}
{{- define "arbiter.env" -}}
{{- $secret := required "Set existingSecret: the name of the Secret holding DJANGO_SECRET_KEY, DATABASE_URL and CELERY_BROKER_URL (the chart creates no Secret)" .Values.existingSecret -}}
- name: ARBITER_DATA_DIR
  value: /var/lib/arbiter
- name: ARBITER_KUBE_CREDENTIALS_DIR
  value: {{ .Values.kube.credentialsDir | quote }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range $name, $ref := .Values.secretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ default $secret $ref.secret }}
      key: {{ $ref.key }}
      {{- if $ref.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end -}}

{{- define "arbiter.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.image.uid }}
runAsGroup: {{ .Values.image.uid }}
fsGroup: {{ .Values.image.uid }}
seccompProfile:
  type: RuntimeDefault
{{- with .Values.podSecurityContext }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "arbiter.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* Writable places on a read-only root: the data dir (static files, beat's schedule), /tmp. */}}
{{- define "arbiter.scratchMounts" -}}
- name: data
  mountPath: /var/lib/arbiter
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "arbiter.scratchVolumes" -}}
- name: data
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- end -}}

{{/* The ServiceAccount's token (rotated by the kubelet) and the cluster's CA, as files. */}}
{{- define "arbiter.kubeMount" -}}
- name: kube
  mountPath: {{ .Values.kube.credentialsDir }}
  readOnly: true
{{- end -}}

{{- define "arbiter.kubeVolume" -}}
- name: kube
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: {{ .Values.kube.tokenExpirationSeconds }}
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
{{- end -}}

{{- define "arbiter.scheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
