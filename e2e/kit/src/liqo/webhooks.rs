//! How the chart's webhook configurations are rewritten for the harness ([`Webhooks`]): the
//! apiserver reaches the controller-manager's webhooks on the loopback, not through a Service.
//! It only edits objects in memory; applying them is `objects`'s (and `from_chart`'s).

use kube::api::DynamicObject;

/// How the chart's webhook configurations are rewritten for the harness: the apiserver reaches
/// the controller-manager's webhooks at `https://127.0.0.1:<port><path>` (there is no Service
/// network), and the pod webhook's failurePolicy is the test's.
#[derive(Debug, Clone)]
pub(super) struct Webhooks {
    /// The controller-manager's `--webhook-listen` port.
    pub(super) port: u16,
    /// The pod webhook's failurePolicy (`Fail`, `Ignore`); `None` keeps the object's.
    pub(super) pod_failure_policy: Option<String>,
}

impl Webhooks {
    /// Rewrites `obj` when it is a webhook configuration: each webhook's `clientConfig.service`
    /// becomes `clientConfig.url` with the service's path; the pod webhook's failurePolicy is
    /// set. Other objects are left alone.
    pub(super) fn rewrite(&self, kind: &str, obj: &mut DynamicObject) {
        if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
            return;
        }
        let Some(hooks) = obj.data.get_mut("webhooks").and_then(|w| w.as_array_mut()) else {
            return;
        };
        for h in hooks {
            let path = h
                .pointer("/clientConfig/service/path")
                .and_then(|p| p.as_str())
                .unwrap_or("/")
                .to_owned();
            // The caBundle, if the controller-manager set it already, stays.
            let ca = h.pointer("/clientConfig/caBundle").cloned();
            h["clientConfig"] = serde_json::json!({
                "url": format!("https://127.0.0.1:{}{path}", self.port),
            });
            if let Some(ca) = ca {
                h["clientConfig"]["caBundle"] = ca;
            }
            if let Some(policy) = self
                .pod_failure_policy
                .as_ref()
                .filter(|_| h["name"] == control::consts::webhook::POD_WEBHOOK)
            {
                h["failurePolicy"] = serde_json::json!(policy);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, path::Path};

    use super::*;
    use crate::liqo::yaml::documents;

    #[test]
    fn the_charts_webhooks_are_rewritten_to_the_loopback_port_and_policy() {
        let hooks = Webhooks {
            port: 40123,
            pod_failure_policy: Some("Ignore".into()),
        };
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/files");
        let mut seen = 0;
        for f in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            let path = dir.join(format!("liqo-webhook-{f}.yaml"));
            let text = fs::read_to_string(&path).unwrap();
            for (gvk, mut obj) in documents(&path, &text).unwrap() {
                assert_eq!(gvk.kind, f);
                hooks.rewrite(&gvk.kind, &mut obj);
                for h in obj.data["webhooks"].as_array().unwrap() {
                    seen += 1;
                    let (url, policy) = match h["name"].as_str().unwrap() {
                        "pod.mutate.liqo.io" => ("https://127.0.0.1:40123/mutate/pod", "Ignore"),
                        "nsoff.validate.liqo.io" => (
                            "https://127.0.0.1:40123/validate/namespace-offloading",
                            "Ignore",
                        ),
                        other => panic!("unexpected webhook {other}"),
                    };
                    assert_eq!(h["clientConfig"], serde_json::json!({"url": url}));
                    assert_eq!(h["failurePolicy"], policy);
                }
            }
        }
        assert_eq!(seen, 2);
        let fail = Webhooks {
            port: 1,
            pod_failure_policy: Some("Fail".into()),
        };
        let path = dir.join("liqo-webhook-ValidatingWebhookConfiguration.yaml");
        let text = fs::read_to_string(&path).unwrap();
        let (gvk, mut obj) = documents(&path, &text).unwrap().remove(0);
        fail.rewrite(&gvk.kind, &mut obj);
        assert_eq!(
            obj.data["webhooks"][0]["failurePolicy"], "Ignore",
            "not the pod webhook"
        );
        // A live configuration: its caBundle and failurePolicy stay with no policy given.
        let live = Webhooks {
            port: 2,
            pod_failure_policy: None,
        };
        let path = dir.join("liqo-webhook-MutatingWebhookConfiguration.yaml");
        let text = fs::read_to_string(&path).unwrap();
        let (gvk, mut obj) = documents(&path, &text).unwrap().remove(0);
        obj.data["webhooks"][0]["clientConfig"]["caBundle"] = serde_json::json!("Q0E=");
        let policy = obj.data["webhooks"][0]["failurePolicy"].clone();
        live.rewrite(&gvk.kind, &mut obj);
        assert_eq!(
            obj.data["webhooks"][0]["clientConfig"],
            serde_json::json!({"url": "https://127.0.0.1:2/mutate/pod", "caBundle": "Q0E="})
        );
        assert_eq!(obj.data["webhooks"][0]["failurePolicy"], policy);
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nwebhooks: []\n";
        let (gvk, mut obj) = documents(Path::new("x.yaml"), text).unwrap().remove(0);
        let before = obj.clone();
        fail.rewrite(&gvk.kind, &mut obj);
        assert_eq!(obj.data, before.data);
    }
}
