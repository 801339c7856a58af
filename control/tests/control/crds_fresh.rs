//! The committed `chart/crds/*.yaml` are exactly what `liqo-crdgen` writes, and read back as
//! the CRDs they were rendered from. On failure, run `cargo run -p control --bin liqo-crdgen`.

use std::{fs, path::PathBuf};

use control::crdgen::{self, HEADER};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../chart/crds")
}

#[test]
fn committed_crds_are_fresh() {
    let files = crdgen::render_all().unwrap();
    let stale = crdgen::check(&crds_dir(), &files).unwrap();
    assert!(
        stale.is_empty(),
        "stale CRD files in chart/crds: {stale:?}; run `cargo run -p control --bin liqo-crdgen`"
    );
}

#[test]
fn committed_crds_read_back_unchanged() {
    for crd in control::api::crds() {
        let path = crds_dir().join(crdgen::file_name(&crd));
        let text = fs::read_to_string(&path).unwrap();
        let yaml = text.strip_prefix(HEADER).unwrap();
        let parsed: CustomResourceDefinition = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(parsed, crd, "{}", path.display());
    }
}
