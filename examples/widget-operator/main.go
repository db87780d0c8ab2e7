// widget-operator: a small operator as kubebuilder scaffolds them, for zeroscaler's tests.
//
// One manager runs everything an operator of that kind runs: a reconciler for Widgets
// (example.zeroscaler.io/v1) that writes status.observed, a defaulting and a validating
// admission webhook served over TLS by the manager itself, leader election on a Lease, and
// health and readiness probes. Widgets are read as unstructured objects, so there is no
// generated code.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var widgetKind = schema.GroupVersionKind{Group: "example.zeroscaler.io", Version: "v1", Kind: "Widget"}

const (
	defaultColor = "blue"
	maxSize      = 10
)

func newWidget() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetKind)
	return u
}

// reconciler writes what it saw of the spec into status.observed.
type reconciler struct {
	client.Client
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	w := newWidget()
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
	color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
	observed := fmt.Sprintf("size=%d color=%s", size, color)
	current, _, _ := unstructured.NestedString(w.Object, "status", "observed")
	if current == observed {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(w.Object, observed, "status", "observed"); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Status().Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("reconciled widget", "widget", req.NamespacedName.String(), "observed", observed)
	return ctrl.Result{}, nil
}

// podWatcher is the shape of many real operators: it watches Pods and ReplicaSets in every
// namespace (to find the workloads it manages) and only logs what it sees.
type podWatcher struct {
	client.Client
}

func (r *podWatcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("saw pod", "pod", req.NamespacedName.String(), "phase", pod.Status.Phase)
	return ctrl.Result{}, nil
}

type widgetSpec struct {
	Size  *int64 `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

func specOf(raw []byte) (map[string]any, widgetSpec, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, widgetSpec{}, err
	}
	var holder struct {
		Spec widgetSpec `json:"spec"`
	}
	if err := json.Unmarshal(raw, &holder); err != nil {
		return nil, widgetSpec{}, err
	}
	return obj, holder.Spec, nil
}

// defaulting sets spec.color when it is empty.
func defaulting(ctx context.Context, req admission.Request) admission.Response {
	obj, spec, err := specOf(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ctrl.LoggerFrom(ctx).Info("reviewed widget", "webhook", "default", "widget", req.Namespace+"/"+req.Name, "operation", req.Operation)
	if spec.Color != "" {
		return admission.Allowed("color given")
	}
	if err := unstructured.SetNestedField(obj, defaultColor, "spec", "color"); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// validating refuses a Widget whose spec.size is missing or outside 1..maxSize.
func validating(ctx context.Context, req admission.Request) admission.Response {
	_, spec, err := specOf(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ctrl.LoggerFrom(ctx).Info("reviewed widget", "webhook", "validate", "widget", req.Namespace+"/"+req.Name, "operation", req.Operation)
	if spec.Size == nil || *spec.Size < 1 || *spec.Size > maxSize {
		return admission.Denied(fmt.Sprintf("spec.size must be an integer from 1 to %d", maxSize))
	}
	return admission.Allowed("")
}

func main() {
	var (
		namespace    string
		webhookHost  string
		webhookPort  int
		certDir      string
		probeAddress string
		leaseID      string
		watchPods    bool
	)
	flag.StringVar(&namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the one namespace whose Widgets it reconciles (and where its Lease is)")
	flag.StringVar(&webhookHost, "webhook-host", "127.0.0.1", "address the admission webhook listens on")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port the admission webhook listens on")
	flag.StringVar(&certDir, "cert-dir", "/tls", "directory with the webhook's tls.crt and tls.key")
	flag.StringVar(&probeAddress, "health-probe-bind-address", "127.0.0.1:8081", "address of /healthz and /readyz")
	flag.StringVar(&leaseID, "leader-election-id", "widget-operator", "name of the leader election Lease")
	flag.BoolVar(&watchPods, "watch-pods", false, "also watch Pods and ReplicaSets in every namespace")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	if namespace == "" {
		log.Error(nil, "--namespace (or POD_NAMESPACE) is required")
		os.Exit(2)
	}

	caching := cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
	if watchPods {
		everywhere := cache.ByObject{Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}
		caching.ByObject = map[client.Object]cache.ByObject{&corev1.Pod{}: everywhere, &appsv1.ReplicaSet{}: everywhere}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Cache:   caching,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: webhookHost, Port: webhookPort, CertDir: certDir,
		}),
		HealthProbeBindAddress:  probeAddress,
		LeaderElection:          true,
		LeaderElectionID:        leaseID,
		LeaderElectionNamespace: namespace,
		// Give the Lease up when stopped (the program ends with the manager), so a pod started
		// after this one, as after a sleep, leads at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "cannot create the manager")
		os.Exit(1)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("widget").For(newWidget()).Complete(&reconciler{mgr.GetClient()}); err != nil {
		log.Error(err, "cannot create the controller")
		os.Exit(1)
	}
	if watchPods {
		// Pods and ReplicaSets, cluster-wide (a ReplicaSet's event asks for a Pod of its name).
		err := ctrl.NewControllerManagedBy(mgr).Named("pods").For(&corev1.Pod{}).Watches(&appsv1.ReplicaSet{}, &handler.EnqueueRequestForObject{}).Complete(&podWatcher{mgr.GetClient()})
		if err != nil {
			log.Error(err, "cannot create the pod controller")
			os.Exit(1)
		}
	}
	// Asking the manager for its webhook server is what makes the manager run it.
	hooks := mgr.GetWebhookServer()
	hooks.Register("/mutate", &webhook.Admission{Handler: admission.HandlerFunc(defaulting)})
	hooks.Register("/validate", &webhook.Admission{Handler: admission.HandlerFunc(validating)})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "cannot add the health check")
		os.Exit(1)
	}
	// Ready once the webhook serves: the Service's endpoint appears only then.
	if err := mgr.AddReadyzCheck("webhook", hooks.StartedChecker()); err != nil {
		log.Error(err, "cannot add the readiness check")
		os.Exit(1)
	}
	go func() {
		<-mgr.Elected()
		log.Info("became leader", "lease", namespace+"/"+leaseID)
	}()
	log.Info("starting", "namespace", namespace, "webhook", fmt.Sprintf("%s:%d", webhookHost, webhookPort))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
