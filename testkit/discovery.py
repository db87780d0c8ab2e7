"""What discovery is told in tests: a stock API server's kinds, and the real operators with their
CRDs and the kinds their shipped RBAC yields (shared by the unit and the system tests)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from testkit.operators import load_operators
from zeroscaler.core.kinds import APIResource, Discovery

WATCHABLE = frozenset({"create", "delete", "get", "list", "patch", "update", "watch"})

# (group, version, resource, kind, namespaced) served by a stock API server
BUILTIN: list[tuple[str, str, str, str, bool]] = [
    ("", "v1", "pods", "Pod", True),
    ("", "v1", "services", "Service", True),
    ("", "v1", "configmaps", "ConfigMap", True),
    ("", "v1", "secrets", "Secret", True),
    ("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("", "v1", "endpoints", "Endpoints", True),
    ("", "v1", "events", "Event", True),
    ("", "v1", "namespaces", "Namespace", False),
    ("", "v1", "nodes", "Node", False),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("", "v1", "persistentvolumes", "PersistentVolume", False),
    ("", "v1", "podtemplates", "PodTemplate", True),
    ("", "v1", "replicationcontrollers", "ReplicationController", True),
    ("", "v1", "limitranges", "LimitRange", True),
    ("", "v1", "resourcequotas", "ResourceQuota", True),
    ("apps", "v1", "deployments", "Deployment", True),
    ("apps", "v1", "statefulsets", "StatefulSet", True),
    ("apps", "v1", "replicasets", "ReplicaSet", True),
    ("apps", "v1", "daemonsets", "DaemonSet", True),
    ("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    ("batch", "v1", "jobs", "Job", True),
    ("batch", "v1", "cronjobs", "CronJob", True),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ("coordination.k8s.io", "v1", "leases", "Lease", True),
    ("events.k8s.io", "v1", "events", "Event", True),
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
]
CREATE_ONLY: list[tuple[str, str, str, str, bool]] = [
    ("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False),
    ("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False),
    ("", "v1", "bindings", "Binding", True),
]


def builtin_resources() -> list[APIResource]:
    out = [APIResource(g, v, r, k, ns, verbs=WATCHABLE) for g, v, r, k, ns in BUILTIN]
    out += [
        APIResource(g, v, r, k, ns, verbs=frozenset({"create"})) for g, v, r, k, ns in CREATE_ONLY
    ]
    return out


def crd_resource(
    group: str, kind: str, plural: str, namespaced: bool = True, version: str = "v1"
) -> APIResource:
    return APIResource(
        group,
        version,
        plural,
        kind,
        namespaced,
        verbs=WATCHABLE,
        subresources=frozenset({"status"}),
    )


@dataclass(frozen=True)
class Operator:
    name: str
    objects: list[dict[str, Any]]
    crds: list[APIResource]

    @property
    def workload(self) -> dict[str, Any]:
        return next(o for o in self.objects if o.get("kind") in ("Deployment", "StatefulSet"))

    def discovery(self) -> Discovery:
        return Discovery(builtin_resources() + self.crds)

    @property
    def custom_resources(self) -> frozenset[str]:
        return frozenset(c.group_resource for c in self.crds)


def operators() -> Iterator[Operator]:
    for op in load_operators():
        crds = [crd_resource(c.group, c.kind, c.plural, c.namespaced, c.version) for c in op.crds]
        yield Operator(op.name, op.objects, crds)


# What each real operator's shipped RBAC yields (the README table in docs/inference-table.md).
OPERATOR_EXPECTED: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "argo-rollouts": (
        (
            "AnalysisRun.argoproj.io",
            "AnalysisTemplate.argoproj.io",
            "ClusterAnalysisTemplate.argoproj.io",
            "ConfigMap",
            "Deployment.apps",
            "Experiment.argoproj.io",
            "Pod",
            "PodTemplate",
            "Rollout.argoproj.io",
            "Secret",
        ),
        ("Ingress.networking.k8s.io", "Job.batch", "ReplicaSet.apps", "Service"),
        ("*",),
    ),
    "banzaicloud-istio-operator": ((), (), ()),
    "controller-zero-scaler": ((), (), ()),
    "kube-green": (
        ("CronJob.batch", "Deployment.apps", "SleepInfo.kube-green.com", "StatefulSet.apps"),
        ("ConfigMap", "Secret"),
        ("*",),
    ),
    "postgres-operator": (
        (
            "Node",
            "OperatorConfiguration.acid.zalan.do",
            "Pod",
            "PostgresTeam.acid.zalan.do",
            "postgresql.acid.zalan.do",
        ),
        ("ConfigMap", "Endpoints"),
        ("*",),
    ),
    "prometheus-operator": (
        (
            "Alertmanager.monitoring.coreos.com",
            "AlertmanagerConfig.monitoring.coreos.com",
            "Ingress.networking.k8s.io",
            "Namespace",
            "Node",
            "PodMonitor.monitoring.coreos.com",
            "Probe.monitoring.coreos.com",
            "Prometheus.monitoring.coreos.com",
            "PrometheusAgent.monitoring.coreos.com",
            "PrometheusRule.monitoring.coreos.com",
            "ScrapeConfig.monitoring.coreos.com",
            "ServiceMonitor.monitoring.coreos.com",
            "ThanosRuler.monitoring.coreos.com",
        ),
        ("ConfigMap", "Secret", "StatefulSet.apps"),
        ("*",),
    ),
    "redis-operator": (
        (
            "CustomResourceDefinition.apiextensions.k8s.io",
            "Redis.redis.redis.opstreelabs.in",
            "RedisCluster.redis.redis.opstreelabs.in",
            "RedisReplication.redis.redis.opstreelabs.in",
            "RedisSentinel.redis.redis.opstreelabs.in",
        ),
        (
            "ConfigMap",
            "Namespace",
            "PersistentVolumeClaim",
            "Pod",
            "PodDisruptionBudget.policy",
            "Secret",
            "Service",
            "StatefulSet.apps",
        ),
        ("*",),
    ),
    "strimzi-kafka-operator": (
        (
            "Kafka.kafka.strimzi.io",
            "KafkaBridge.kafka.strimzi.io",
            "KafkaConnect.kafka.strimzi.io",
            "KafkaConnector.kafka.strimzi.io",
            "KafkaMirrorMaker2.kafka.strimzi.io",
            "KafkaNodePool.kafka.strimzi.io",
            "KafkaRebalance.kafka.strimzi.io",
            "KafkaTopic.kafka.strimzi.io",
            "KafkaUser.kafka.strimzi.io",
            "StrimziPodSet.core.strimzi.io",
        ),
        (
            "ClusterRoleBinding.rbac.authorization.k8s.io",
            "ConfigMap",
            "Deployment.apps",
            "Endpoints",
            "Ingress.networking.k8s.io",
            "NetworkPolicy.networking.k8s.io",
            "PersistentVolumeClaim",
            "Pod",
            "PodDisruptionBudget.policy",
            "ReplicaSet.apps",
            "Role.rbac.authorization.k8s.io",
            "RoleBinding.rbac.authorization.k8s.io",
            "Secret",
            "Service",
            "ServiceAccount",
        ),
        ("myproject",),
    ),
}
