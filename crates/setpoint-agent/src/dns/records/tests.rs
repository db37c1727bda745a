//! One test per record kind, through the encoded wire form.

use std::str::FromStr;

use hickory_proto::op::Query;
use serde_json::json;

use super::*;
use crate::proxy::model::tests::{service, slice};

/// Services and slices in vectors.
#[derive(Default)]
pub(crate) struct Fixed {
    pub(crate) services: Vec<Arc<Service>>,
    pub(crate) slices: Vec<Arc<EndpointSlice>>,
}

impl Directory for Fixed {
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services
            .iter()
            .find(|s| {
                s.metadata.namespace.as_deref() == Some(namespace)
                    && s.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    fn slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>> {
        self.slices
            .iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(namespace)
                    && s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("kubernetes.io/service-name"))
                        .map(String::as_str)
                        == Some(service)
            })
            .cloned()
            .collect()
    }
}

/// `web` (ClusterIP 10.96.0.10, port http 80), `db` (headless, two ready endpoints, one not
/// ready, hostnames db-0/db-1), `ext` (ExternalName example.org).
pub(crate) fn cluster() -> Fixed {
    Fixed {
        services: vec![
            service(
                json!({"metadata": {"namespace": "default", "name": "web"}, "spec": {
                "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
            ),
            service(
                json!({"metadata": {"namespace": "default", "name": "db"}, "spec": {
                "clusterIP": "None", "clusterIPs": ["None"],
                "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]}}),
            ),
            service(
                json!({"metadata": {"namespace": "default", "name": "ext"}, "spec": {
                "type": "ExternalName", "externalName": "example.org"}}),
            ),
        ],
        slices: vec![slice(json!({
            "metadata": {"namespace": "default", "name": "db-x", "labels": {"kubernetes.io/service-name": "db"}},
            "addressType": "IPv4",
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.244.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
                {"addresses": ["10.244.0.6"], "hostname": "db-1", "conditions": {"ready": true}},
                {"addresses": ["10.244.0.7"], "conditions": {"ready": false}},
            ],
        }))],
    }
}

/// Asks `name` `qtype` through the wire format (encode, answer, decode).
pub(crate) fn ask(directory: &impl Directory, name: &str, qtype: RecordType) -> Message {
    let mut query = Message::new(7, MessageType::Query, OpCode::Query);
    query.metadata.recursion_desired = true;
    query
        .queries
        .push(Query::query(Name::from_str(name).expect("name"), qtype));
    let bytes = query.to_vec().expect("encode");
    let reply =
        crate::dns::server::respond(&bytes, directory, "cluster.local", None).expect("a reply");
    Message::from_vec(&reply).expect("decode")
}

fn data(message: &Message) -> Vec<String> {
    let mut out: Vec<String> = message.answers.iter().map(|r| r.data.to_string()).collect();
    out.sort();
    out
}

#[test]
fn a_cluster_ip_service_answers_its_cluster_ip() {
    let reply = ask(&cluster(), "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(reply.metadata.id, 7);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.metadata.authoritative);
    assert_eq!(data(&reply), ["10.96.0.10"]);
    assert_eq!(reply.answers[0].ttl, TTL);
    // Names are case-insensitive; an IPv4-only Service has no AAAA (NODATA with the SOA).
    assert_eq!(
        data(&ask(
            &cluster(),
            "WEB.Default.svc.cluster.local.",
            RecordType::A
        )),
        ["10.96.0.10"]
    );
    let aaaa = ask(
        &cluster(),
        "web.default.svc.cluster.local.",
        RecordType::AAAA,
    );
    assert_eq!(aaaa.metadata.response_code, ResponseCode::NoError);
    assert!(aaaa.answers.is_empty());
    assert_eq!(aaaa.authorities[0].record_type(), RecordType::SOA);
}

#[test]
fn a_headless_service_answers_its_ready_endpoints() {
    let reply = ask(&cluster(), "db.default.svc.cluster.local.", RecordType::A);
    assert_eq!(data(&reply), ["10.244.0.5", "10.244.0.6"]);
}

#[test]
fn endpoint_hostnames_resolve_under_their_service() {
    assert_eq!(
        data(&ask(
            &cluster(),
            "db-1.db.default.svc.cluster.local.",
            RecordType::A
        )),
        ["10.244.0.6"]
    );
    // Without a hostname, the dashed address names the endpoint.
    assert_eq!(
        data(&ask(
            &cluster(),
            "10-244-0-7.db.default.svc.cluster.local.",
            RecordType::A
        )),
        ["10.244.0.7"]
    );
    let missing = ask(
        &cluster(),
        "db-9.db.default.svc.cluster.local.",
        RecordType::A,
    );
    assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn srv_records_name_the_port() {
    let reply = ask(
        &cluster(),
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(data(&reply), ["0 100 80 web.default.svc.cluster.local."]);
    assert_eq!(
        reply
            .additionals
            .iter()
            .map(|r| r.data.to_string())
            .collect::<Vec<_>>(),
        ["10.96.0.10"]
    );
    let headless = ask(
        &cluster(),
        "_pg._tcp.db.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(
        data(&headless),
        [
            "0 100 5432 db-0.db.default.svc.cluster.local.",
            "0 100 5432 db-1.db.default.svc.cluster.local."
        ]
    );
    assert_eq!(headless.additionals.len(), 2);
    let wrong = ask(
        &cluster(),
        "_http._udp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(wrong.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn pod_names_resolve_to_their_dashed_address() {
    let reply = ask(
        &cluster(),
        "10-244-0-9.default.pod.cluster.local.",
        RecordType::A,
    );
    assert_eq!(data(&reply), ["10.244.0.9"]);
}

#[test]
fn an_external_name_service_is_a_cname() {
    let reply = ask(&cluster(), "ext.default.svc.cluster.local.", RecordType::A);
    assert_eq!(reply.answers[0].record_type(), RecordType::CNAME);
    assert_eq!(data(&reply), ["example.org."]);
}

#[test]
fn unknown_names_in_the_zone_are_nxdomain_and_others_refused() {
    let reply = ask(&cluster(), "nope.default.svc.cluster.local.", RecordType::A);
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(reply.authorities[0].record_type(), RecordType::SOA);
    let parent = ask(&cluster(), "svc.cluster.local.", RecordType::A);
    assert_eq!(parent.metadata.response_code, ResponseCode::NoError);
    let soa = ask(&cluster(), "cluster.local.", RecordType::SOA);
    assert_eq!(soa.answers[0].record_type(), RecordType::SOA);
    let outside = ask(&cluster(), "example.org.", RecordType::A);
    assert_eq!(outside.metadata.response_code, ResponseCode::Refused);
    assert!(!outside.metadata.authoritative);
}

#[test]
fn garbage_gets_formerr_and_big_udp_answers_are_truncated() {
    let reply =
        crate::dns::server::respond(&[0, 9, 1], &cluster(), "cluster.local", None).expect("reply");
    let reply = Message::from_vec(&reply).expect("decode");
    assert_eq!(
        (reply.metadata.id, reply.metadata.response_code),
        (9, ResponseCode::FormErr)
    );
    // A headless Service with 60 endpoints does not fit 512 bytes.
    let mut big = cluster();
    let endpoints: Vec<_> = (1..=60)
        .map(|i| json!({"addresses": [format!("10.244.1.{i}")]}))
        .collect();
    big.slices.push(slice(json!({
        "metadata": {"namespace": "default", "name": "db-y", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4", "endpoints": endpoints})));
    let mut query = Message::new(1, MessageType::Query, OpCode::Query);
    query.queries.push(Query::query(
        Name::from_str("db.default.svc.cluster.local.").expect("name"),
        RecordType::A,
    ));
    let bytes = query.to_vec().expect("encode");
    let udp = crate::dns::server::respond(&bytes, &big, "cluster.local", Some(512)).expect("reply");
    let udp = Message::from_vec(&udp).expect("decode");
    assert!(udp.metadata.truncation);
    assert!(udp.answers.is_empty());
    let tcp = crate::dns::server::respond(&bytes, &big, "cluster.local", None).expect("reply");
    assert_eq!(Message::from_vec(&tcp).expect("decode").answers.len(), 62);
}
