//! Answering one DNS query from the Service and EndpointSlice caches (a pure function of the
//! query and a [`Directory`]), with the records CoreDNS's `kubernetes` plugin serves for the
//! cluster domain:
//!
//! - `<svc>.<ns>.svc.<zone>`: A/AAAA = the cluster IPs; headless: the ready endpoint
//!   addresses; ExternalName: a CNAME to `spec.externalName`;
//! - `<host>.<svc>.<ns>.svc.<zone>`: the endpoint whose `hostname` is `<host>` (StatefulSet
//!   pods, `hostname` + `subdomain` pods), or whose address is `<host>` dashed;
//! - SRV `_<port>._<proto>.<svc>.<ns>.svc.<zone>` for named ports: the Service name and port
//!   (cluster IP), or one target per ready endpoint (headless), addresses as additionals;
//! - `<a-b-c-d>.<ns>.pod.<zone>`: A `a.b.c.d` (CoreDNS `pods insecure`: not checked);
//! - other names in the zone: NXDOMAIN, existing names without the asked type: NODATA, both
//!   with the zone's SOA; names outside the zone: REFUSED (the server forwards those
//!   instead when it has upstreams: `forward.rs`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SOA, SRV};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::proxy::model::Protocol;

/// The TTL of every answer (CoreDNS's default for the kubernetes plugin).
pub(crate) const TTL: u32 = 5;

/// Where answers come from.
pub(crate) trait Directory {
    /// The Service `namespace/name`.
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>>;
    /// The EndpointSlices of the Service `namespace/name`.
    fn slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>>;
}

/// What a name resolves to.
enum Lookup {
    /// Records (answers, additionals).
    Found(Vec<Record>, Vec<Record>),
    /// The name exists, without records of the asked type.
    NoData,
    /// No such name.
    NxDomain,
}

/// The answer to `request` for the cluster domain `zone` (e.g. `cluster.local`).
pub(crate) fn answer(request: &Message, directory: &impl Directory, zone: &str) -> Message {
    let mut response = Message::new(
        request.metadata.id,
        MessageType::Response,
        request.metadata.op_code,
    );
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.queries.clone_from(&request.queries);
    if request.metadata.message_type != MessageType::Query {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    }
    if request.metadata.op_code != OpCode::Query {
        response.metadata.response_code = ResponseCode::NotImp;
        return response;
    }
    let [query] = request.queries.as_slice() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    let name = query.name().to_ascii().to_ascii_lowercase();
    let name = name.trim_end_matches('.');
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    let Some(relative) = relative_to(name, &zone) else {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    };
    response.metadata.authoritative = true;
    let labels: Vec<&str> = if relative.is_empty() {
        Vec::new()
    } else {
        relative.split('.').collect()
    };
    let qtype = query.query_type();
    let result = if qtype == RecordType::SOA && labels.is_empty() {
        Lookup::Found(vec![soa(&zone)], Vec::new())
    } else {
        lookup(&labels, qtype, directory, &zone)
    };
    match result {
        Lookup::Found(answers, additionals) => {
            response.answers = answers;
            response.additionals = additionals;
        }
        Lookup::NoData => response.authorities.push(soa(&zone)),
        Lookup::NxDomain => {
            response.metadata.response_code = ResponseCode::NXDomain;
            response.authorities.push(soa(&zone));
        }
    }
    response
}

/// `name` without `.zone` (empty for the zone itself), or `None` outside the zone.
pub(crate) fn relative_to<'a>(name: &'a str, zone: &str) -> Option<&'a str> {
    if name == zone {
        return Some("");
    }
    name.strip_suffix(zone)?.strip_suffix('.')
}

fn lookup(labels: &[&str], qtype: RecordType, directory: &impl Directory, zone: &str) -> Lookup {
    let fqdn = |relative: &str| format!("{relative}.{zone}.");
    match labels {
        // The zone, `svc.<zone>`, `pod.<zone>`, namespaces: names that exist, with no data.
        [] | ["svc" | "pod"] | [_, "svc" | "pod"] => Lookup::NoData,
        [service, namespace, "svc"] => {
            let Some(svc) = directory.service(namespace, service) else {
                return Lookup::NxDomain;
            };
            let owner = fqdn(&labels.join("."));
            service_records(&svc, directory, namespace, service, &owner, qtype)
        }
        [port, proto, service, namespace, "svc"]
            if port.starts_with('_') && proto.starts_with('_') =>
        {
            let Some(svc) = directory.service(namespace, service) else {
                return Lookup::NxDomain;
            };
            srv_records(&svc, directory, labels, zone, qtype)
        }
        [host, service, namespace, "svc"] => {
            if directory.service(namespace, service).is_none() {
                return Lookup::NxDomain;
            }
            let addresses: Vec<IpAddr> = endpoints(directory, namespace, service, false)
                .into_iter()
                .filter(|e| e.label == *host)
                .map(|e| e.ip)
                .collect();
            if addresses.is_empty() {
                return Lookup::NxDomain;
            }
            address_records(&fqdn(&labels.join(".")), &addresses, qtype)
        }
        [dashed, _namespace, "pod"] => match dashed.replace('-', ".").parse::<Ipv4Addr>() {
            Ok(ip) => address_records(&fqdn(&labels.join(".")), &[IpAddr::V4(ip)], qtype),
            Err(_) => Lookup::NxDomain,
        },
        _ => Lookup::NxDomain,
    }
}

fn service_records(
    svc: &Service,
    directory: &impl Directory,
    namespace: &str,
    service: &str,
    owner: &str,
    qtype: RecordType,
) -> Lookup {
    let spec = svc.spec.clone().unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") {
        let Some(target) = spec.external_name.as_deref().and_then(name) else {
            return Lookup::NoData;
        };
        let Some(owner) = name(owner) else {
            return Lookup::NxDomain;
        };
        return Lookup::Found(vec![record(owner, RData::CNAME(CNAME(target)))], Vec::new());
    }
    let addresses: Vec<IpAddr> = if is_headless(&spec) {
        endpoints(directory, namespace, service, true)
            .into_iter()
            .map(|e| e.ip)
            .collect()
    } else {
        spec.cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|ip| ip.parse().ok())
            .collect()
    };
    address_records(owner, &dedup(addresses), qtype)
}

fn srv_records(
    svc: &Service,
    directory: &impl Directory,
    labels: &[&str],
    zone: &str,
    qtype: RecordType,
) -> Lookup {
    let [port, proto, service, namespace, _] = labels else {
        return Lookup::NxDomain;
    };
    let (port_name, proto) = (&port[1..], &proto[1..]);
    let spec = svc.spec.clone().unwrap_or_default();
    let Some(service_port) = spec.ports.iter().flatten().find(|p| {
        p.name.as_deref() == Some(port_name)
            && Protocol::parse(p.protocol.as_deref()).map(Protocol::name) == Some(proto)
    }) else {
        return Lookup::NxDomain;
    };
    if qtype != RecordType::SRV && qtype != RecordType::ANY {
        return Lookup::NoData;
    }
    let owner_text = format!("{}.{zone}.", labels.join("."));
    let service_fqdn = format!("{service}.{namespace}.svc.{zone}.");
    let Some(owner) = name(&owner_text) else {
        return Lookup::NxDomain;
    };
    let mut answers = Vec::new();
    let mut additionals = Vec::new();
    if is_headless(&spec) {
        for endpoint in endpoints(directory, namespace, service, true) {
            let Some(port) = endpoint
                .ports
                .iter()
                .find(|(n, p, _)| n == port_name && *p == proto)
            else {
                continue;
            };
            let target_text = format!("{}.{service_fqdn}", endpoint.label);
            let Some(target) = name(&target_text) else {
                continue;
            };
            answers.push(record(
                owner.clone(),
                RData::SRV(SRV::new(0, 100, port.2, target.clone())),
            ));
            additionals.push(address_record(target, endpoint.ip));
        }
    } else {
        let Some(target) = name(&service_fqdn) else {
            return Lookup::NxDomain;
        };
        let port = u16::try_from(service_port.port).unwrap_or(0);
        answers.push(record(
            owner,
            RData::SRV(SRV::new(0, 100, port, target.clone())),
        ));
        for ip in spec
            .cluster_ips
            .iter()
            .flatten()
            .filter_map(|ip| ip.parse().ok())
        {
            additionals.push(address_record(target.clone(), ip));
        }
    }
    if answers.is_empty() {
        return Lookup::NoData;
    }
    Lookup::Found(answers, additionals)
}

fn is_headless(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> bool {
    matches!(spec.cluster_ip.as_deref(), None | Some("None" | ""))
}

/// An endpoint address as DNS sees it.
struct Named {
    ip: IpAddr,
    /// Its `hostname`, else the dashed address.
    label: String,
    /// (port name, protocol, port).
    ports: Vec<(String, &'static str, u16)>,
}

/// The endpoints of a Service's slices (`ready_only`: the ready ones).
fn endpoints(
    directory: &impl Directory,
    namespace: &str,
    service: &str,
    ready_only: bool,
) -> Vec<Named> {
    let mut out = Vec::new();
    for slice in directory.slices(namespace, service) {
        let ports: Vec<(String, &'static str, u16)> = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.name.clone().unwrap_or_default(),
                    Protocol::parse(p.protocol.as_deref())?.name(),
                    u16::try_from(p.port?).ok()?,
                ))
            })
            .collect();
        for endpoint in &slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            if ready_only && !ready {
                continue;
            }
            for address in &endpoint.addresses {
                let Ok(ip) = address.parse::<IpAddr>() else {
                    continue;
                };
                let label = endpoint
                    .hostname
                    .clone()
                    .unwrap_or_else(|| address.replace(['.', ':'], "-"));
                out.push(Named {
                    ip,
                    label,
                    ports: ports.clone(),
                });
            }
        }
    }
    out
}

fn dedup(mut addresses: Vec<IpAddr>) -> Vec<IpAddr> {
    addresses.sort();
    addresses.dedup();
    addresses
}

/// A and AAAA answers from `addresses` for `qtype` (NODATA when the name has none of it).
fn address_records(owner: &str, addresses: &[IpAddr], qtype: RecordType) -> Lookup {
    let Some(owner) = name(owner) else {
        return Lookup::NxDomain;
    };
    let answers: Vec<Record> = addresses
        .iter()
        .filter(|ip| match qtype {
            RecordType::A => ip.is_ipv4(),
            RecordType::AAAA => ip.is_ipv6(),
            RecordType::ANY => true,
            _ => false,
        })
        .map(|ip| address_record(owner.clone(), *ip))
        .collect();
    if answers.is_empty() {
        Lookup::NoData
    } else {
        Lookup::Found(answers, Vec::new())
    }
}

fn address_record(owner: Name, ip: IpAddr) -> Record {
    match ip {
        IpAddr::V4(v4) => record(owner, RData::A(A(v4))),
        IpAddr::V6(v6) => record(owner, RData::AAAA(AAAA(v6))),
    }
}

fn record(owner: Name, data: RData) -> Record {
    let mut record = Record::from_rdata(owner, TTL, data);
    record.dns_class = DNSClass::IN;
    record
}

/// A fully qualified name from text (`None` when it is not a valid name).
fn name(text: &str) -> Option<Name> {
    let mut name = Name::from_ascii(text).ok()?;
    name.set_fqdn(true);
    Some(name)
}

/// The zone's SOA (for the authority section of NXDOMAIN and NODATA answers).
fn soa(zone: &str) -> Record {
    let zone_name = name(&format!("{zone}.")).unwrap_or_else(Name::root);
    let mname = name(&format!("ns.dns.{zone}.")).unwrap_or_else(Name::root);
    let rname = name(&format!("hostmaster.{zone}.")).unwrap_or_else(Name::root);
    record(
        zone_name,
        RData::SOA(SOA::new(mname, rname, 1, 7200, 1800, 86_400, TTL)),
    )
}

#[cfg(test)]
pub(crate) mod tests;
