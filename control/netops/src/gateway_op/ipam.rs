//! The IPAM's `List` answer read as what it adds to the gateway's file
//! (`control::network::gateway::Endpoints`), typed: a value that does not parse is named by its
//! field (read by [`liqo_peering::grpc::external_of`]).

use control::network::gateway::Endpoints;
use ipam::service::proto::ListResponse;
use liqo_types::FieldError;

/// Our external CIDR (empty: none yet) and the endpoint mappings of the IPAM's `List` answer.
pub(super) fn endpoints_of(l: &ListResponse) -> Result<Endpoints, FieldError> {
    let e = liqo_peering::grpc::external_of(l)?;
    Ok(Endpoints {
        local_external_cidr: e.cidr,
        endpoints: e.endpoints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipams_list_gives_the_endpoints_and_a_bad_value_is_named() {
        use ipam::service::proto::{Endpoint, ListResponse};
        let mut l = ListResponse {
            external_cidr: "10.201.0.0/16".into(),
            endpoints: vec![Endpoint {
                ip: "172.18.0.5".into(),
                external_ip: "10.201.0.5".into(),
                peers: vec!["milan".into()],
                holds: Vec::new(),
            }],
            ..ListResponse::default()
        };
        let e = endpoints_of(&l).unwrap();
        assert_eq!(e.local_external_cidr.unwrap().to_string(), "10.201.0.0/16");
        assert_eq!(e.endpoints[0].peers[0].as_str(), "milan");
        l.endpoints[0].peers.push("Bad_Id".into());
        assert_eq!(endpoints_of(&l).unwrap_err().field, "endpoints[0].peers[1]");
        l.endpoints[0].ip = "x".into();
        assert_eq!(endpoints_of(&l).unwrap_err().field, "endpoints[0].ip");
        assert_eq!(
            endpoints_of(&ListResponse::default()).unwrap(),
            Endpoints::default()
        );
    }
}
