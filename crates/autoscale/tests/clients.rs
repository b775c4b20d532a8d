//! Clients that give up and retry, and the external trigger, in the rehearsal.

mod common;

use inferscale_autoscale::keda::KedaSpec;
use inferscale_autoscale::rehearse::{Client, rehearse};
use inferscale_autoscale::traffic::Traffic;

fn object(spec: &str) -> KedaSpec {
    let text = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: x\n  namespace: llm\nspec:\n  scaleTargetRef:\n    name: vllm\n{spec}"
    );
    let so = inferscale_manifests::objects::load(&text).unwrap_or_else(|e| panic!("{e}"));
    KedaSpec::from_object(&so).unwrap_or_else(|e| panic!("{e}"))
}

/// One replica that never scales, 90 req/s (1.6× what it serves) for five minutes.
fn overloaded(client: Client) -> inferscale_autoscale::rehearse::Summary {
    let keda = object(
        "  minReplicaCount: 1\n  maxReplicaCount: 1\n  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://p:9090\n      query: sum(vllm:num_requests_waiting)\n      threshold: \"1000000\"\n",
    );
    let mut setup = common::setup(900.0);
    setup.client = client;
    let traffic = Traffic::from_csv("time_s,rps\n0,90\n300,0\n").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = common::sim(&setup.engine);
    rehearse(&setup, &keda, &traffic, &mut sim, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .summary
}

#[test]
fn impatient_clients_give_up_retry_and_free_the_engine() {
    let patient = overloaded(Client::PATIENT);
    let o = patient.outcomes;
    assert_eq!((o.timeout, o.refused, o.retries, o.aborted), (0, 0, 0, 0));
    assert_eq!(o.ok + o.unfinished, patient.requests, "{o:?}");
    // The queue grows by ~34 req/s for 300 s: the last ones wait minutes.
    assert!(patient.p99_e2e_s.is_some_and(|p| p > 60.0), "{patient:?}");

    let sdk = Client {
        timeout_s: Some(60.0),
        ..Client::OPENAI_SDK
    };
    let impatient = overloaded(sdk);
    let o = impatient.outcomes;
    assert_eq!(
        o.ok + o.timeout + o.refused + o.unfinished,
        impatient.requests,
        "every request ends in one outcome: {o:?}"
    );
    assert!(o.timeout > 0 && o.retries > o.timeout, "{o:?}");
    assert!(
        o.aborted >= o.retries,
        "each give-up aborts its attempt: {o:?}"
    );
    // Nobody waits past three timeouts and the backoffs (60 s × 3 + 1.5 s).
    assert!(
        impatient.p99_e2e_s.is_some_and(|p| p <= 3.0 * 60.0 + 2.0),
        "{:?}",
        impatient.p99_e2e_s
    );
    // The engine dropped what its clients gave up on: fewer answers than the patient ones
    // got, within the same time.
    assert!(
        o.ok < patient.outcomes.ok,
        "{o:?} vs {:?}",
        patient.outcomes
    );
}

/// A rehearsal of `keda` under the traffic `csv` on simulated replicas.
fn stepped(
    setup: &inferscale_autoscale::rehearse::Setup,
    keda: &KedaSpec,
    csv: &str,
) -> inferscale_autoscale::rehearse::Outcome {
    let traffic = Traffic::from_csv(csv).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = common::sim(&setup.engine);
    rehearse(setup, keda, &traffic, &mut sim, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_external_trigger_is_rehearsed_as_the_scaler_computes_it() {
    // desired_replicas by requests in flight at 100 per pod, boosted by the queue at 20.
    let keda = object(
        "  minReplicaCount: 1\n  maxReplicaCount: 6\n  pollingInterval: 15\n  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 120\n  triggers:\n  - type: external\n    metadata:\n      scalerAddress: inferscale-scaler.llm.svc:9090\n      service: vllm\n      port: http\n      metric: desired_replicas\n      signal: in_flight\n      target: \"100\"\n      queueTarget: \"20\"\n",
    );
    assert_eq!(keda.triggers[0].metric, "s0-external");
    assert_eq!(
        keda.triggers[0].threshold, 1.0,
        "the scaler's GetMetricSpec target"
    );
    let mut setup = common::setup(2400.0);
    setup.client = Client::OPENAI_SDK;
    let out = stepped(&setup, &keda, "time_s,rps\n0,20\n300,130\n1200,20\n");
    let s = &out.summary;
    let t = &s.triggers[0];
    assert!(t.query.contains("in_flight"), "{}", t.query);
    assert_eq!(t.failures, 0, "{t:?}");
    // 130 req/s × ~2.3 s ≈ 300 in flight at 100 per pod: at least three replicas.
    assert!(s.max_replicas >= 3, "{:?}", out.events);
    assert!(s.cycle_completed, "{:?}", out.events);
    assert!(t.max_value.is_some_and(|v| v >= 3.0), "{t:?}");
}

#[test]
fn a_trigger_on_fixed_targets_cannot_be_rehearsed_and_says_why() {
    let text = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: x\nspec:\n  scaleTargetRef:\n    name: vllm\n  triggers:\n  - type: external\n    metadata:\n      scalerAddress: s:9090\n      targets: http://10.0.0.1:8000\n      metric: queue_depth\n      target: \"5\"\n";
    let so = inferscale_manifests::objects::load(text).unwrap_or_else(|e| panic!("{e}"));
    let e = KedaSpec::from_object(&so).expect_err("fixed targets");
    assert_eq!(e.path, "spec.triggers[0].metadata.targets");
    let bad = text.replace(
        "targets: http://10.0.0.1:8000",
        "service: vllm\n      port: http\n      colour: red",
    );
    let so = inferscale_manifests::objects::load(&bad).unwrap_or_else(|e| panic!("{e}"));
    let e = KedaSpec::from_object(&so).expect_err("unknown key");
    assert_eq!(e.path, "spec.triggers[0].metadata.colour");
}

#[test]
fn a_cycle_completes_when_it_returns_to_where_it_started_not_to_its_floor() {
    // In flight at 100 per pod: 60 req/s × ~2.3 s holds two replicas busy, 130 three.
    let keda = object(
        "  minReplicaCount: 1\n  maxReplicaCount: 6\n  pollingInterval: 15\n  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 120\n  triggers:\n  - type: external\n    metadata:\n      scalerAddress: inferscale-scaler.llm.svc:9090\n      service: vllm\n      port: http\n      metric: desired_replicas\n      signal: in_flight\n      target: \"100\"\n",
    );
    let mut setup = common::setup(2400.0);
    setup.initial_replicas = 2;
    setup.cluster.initial_nodes = 2;
    let out = stepped(&setup, &keda, "time_s,rps\n0,60\n300,130\n1200,60\n");
    let s = &out.summary;
    assert!(s.max_replicas >= 3, "{:?}", out.events);
    assert_eq!(s.final_replicas, 2, "{:?}", out.events);
    assert!(s.cycle_completed, "back at its two: {:?}", out.events);
}
